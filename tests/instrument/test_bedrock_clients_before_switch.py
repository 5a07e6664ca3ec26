"""boto3 Bedrock clients made before ``spanledger.instrument()`` (the usual module-level client)
record under the switch from their first call on, once per call, against the loopback stand-in
with real SigV4-signed requests; ``uninstrument()`` stops them; a client of any other service,
and a stubbed one, are left as they are (issue 34, item 5)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import botocore.client  # type: ignore[import-untyped]
import pytest
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.stub import Stubber  # type: ignore[import-untyped]

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, ErrorCategory, RerankEvent
from spanledger.instrumentation import _skipped, instrumented_sdks, is_instrumented
from spanledger.instrumentation._everywhere import failures
from spanledger.integrations.botocore import client as bedrock_client
from spanledger.testing import StandIn
from tests.instrument.conftest import Tape, tokens

SECRET = "secret-before-switch-7c3e"
TEXT = "ticks feed on blood"
TEXTS = [TEXT, "the clock ticks", "deer carry ticks"]
QUERY = "what do ticks eat"
TITAN_V2 = "amazon.titan-embed-text-v2:0"
RERANK_ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
FIRST_CALL = "_emit_api_params"


def client(standin: StandIn, service: str = "bedrock-runtime") -> Any:
    """A real boto3 client with fake credentials, pointed at the stand-in."""
    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=standin.base_url("aws.bedrock"),
        aws_access_key_id="test",
        aws_secret_access_key=SECRET,
        config=NO_RETRIES,
    )


def embed(bedrock: Any) -> dict[str, Any]:
    response = bedrock.invoke_model(
        modelId=TITAN_V2, body=json.dumps({"inputText": TEXT, "dimensions": 8})
    )
    body: dict[str, Any] = json.loads(response["body"].read())
    return body


def rerank(agent: Any, top: int = 2) -> Any:
    return agent.rerank(
        queries=[{"type": "TEXT", "textQuery": {"text": QUERY}}],
        sources=[
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}},
            }
            for d in TEXTS
        ],
        rerankingConfiguration={
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": top,
                "modelConfiguration": {"modelArn": RERANK_ARN},
            },
        },
    )


def handlers(bedrock: Any) -> list[tuple[str, list[Any]]]:
    """Every handler the client's emitter holds for its recorded operation."""
    service = bedrock.meta.service_model
    operation = bedrock_client.OPERATIONS.get(service.service_name, "ListFoundationModels")
    names = [
        f"{step}.{service.service_id.hyphenize()}.{operation}" for step in bedrock_client._STEPS
    ]
    emitter = bedrock.meta.events._emitter
    return [(name, list(emitter._handlers.prefix_search(name))) for name in names]


def first_call_method() -> object:
    return vars(botocore.client.BaseClient)[FIRST_CALL]


@pytest.fixture(autouse=True)
def _fresh(standin: StandIn) -> Iterator[None]:
    standin.reset()
    creator = vars(botocore.client.ClientCreator)["create_client"]
    emit = first_call_method()
    yield
    spanledger.uninstrument()
    standin.reset()
    assert vars(botocore.client.ClientCreator)["create_client"] is creator
    assert first_call_method() is emit


def test_clients_made_before_the_switch_record_from_their_first_call(
    standin: StandIn, tape: Tape
) -> None:
    runtime = client(standin)
    agent = client(standin, "bedrock-agent-runtime")
    untouched = (handlers(runtime), handlers(agent))
    spanledger.instrument()
    assert "botocore" in instrumented_sdks()
    assert embed(runtime)["inputTextTokenCount"] == tokens(TEXT)
    result = rerank(agent, top=2)
    embedding, reranking = tape.events
    assert isinstance(embedding, EmbeddingEvent)
    assert (embedding.provider, embedding.model) == ("aws.bedrock", TITAN_V2)
    assert embedding.usage is not None
    assert embedding.usage.input_tokens == tokens(TEXT)
    assert (embedding.input_count, embedding.dimensions) == (1, 8)
    assert isinstance(reranking, RerankEvent)
    assert (reranking.provider, reranking.model) == ("aws.bedrock", "amazon.rerank-v1:0")
    assert reranking.usage is None  # Bedrock reports none: unknown, never zero
    assert (reranking.document_count, reranking.top_k, reranking.result_count) == (3, 2, 2)
    assert reranking.query_length == len(QUERY.encode())
    assert len(result["results"]) == 2
    assert is_instrumented(runtime)
    assert is_instrumented(agent)

    spanledger.uninstrument()
    assert not is_instrumented(runtime)
    assert not is_instrumented(agent)
    assert (handlers(runtime), handlers(agent)) == untouched
    assert "invoke_model" not in vars(runtime)
    assert "rerank" not in vars(agent)
    embed(runtime)
    rerank(agent)
    assert len(tape.events) == 2


def test_each_call_is_recorded_once_however_the_client_was_caught(
    standin: StandIn, tape: Tape
) -> None:
    before = client(standin)
    by_hand = spanledger.instrument(client(standin))
    spanledger.instrument(sdks=["botocore"])
    after = client(standin)  # the creation hook's
    assert is_instrumented(after)
    assert not is_instrumented(before)
    for bedrock in (before, after, by_hand, before, after, by_hand):
        embed(bedrock)
    assert [event.kind for event in tape.events] == ["embedding"] * 6
    assert len({event.call_id for event in tape.events}) == 6
    spanledger.uninstrument()
    assert not is_instrumented(before)
    assert not is_instrumented(after)
    assert is_instrumented(by_hand)  # instrumented by hand: the user's, the switch leaves it
    embed(before)
    embed(after)
    embed(by_hand)
    assert len(tape.events) == 7


def test_switched_off_and_on_again_it_is_caught_again(standin: StandIn, tape: Tape) -> None:
    runtime = client(standin)
    spanledger.instrument(sdks=["botocore"])
    embed(runtime)
    spanledger.uninstrument()
    embed(runtime)
    spanledger.instrument(sdks=["botocore"])
    embed(runtime)
    assert len(tape.events) == 2


def canned_control_plane(bedrock: Any) -> None:
    """Answer ``list_foundation_models`` from botocore's ``before-send`` seam."""

    def before_send(request: Any = None, **_: Any) -> AWSResponse:
        raw = _Raw(b'{"modelSummaries": []}')
        return AWSResponse(request.url, 200, {"content-type": "application/json"}, raw)

    bedrock.meta.events.register("before-send.bedrock.ListFoundationModels", before_send)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, amt: int = 1024, decode_content: bool = False) -> Iterator[bytes]:
        yield self._body


def test_a_client_of_another_service_is_untouched(standin: StandIn, tape: Tape) -> None:
    control = boto3.client(
        "bedrock",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key=SECRET,
    )
    canned_control_plane(control)
    control.list_foundation_models()  # whatever botocore sets on a client's first call
    attributes, emitter = dict(vars(control)), handlers(control)
    spanledger.instrument(sdks=["botocore"])
    assert control.list_foundation_models()["modelSummaries"] == []
    assert control.list_foundation_models()["modelSummaries"] == []
    assert vars(control) == attributes
    assert handlers(control) == emitter
    assert not is_instrumented(control)
    assert tape.events == []


def test_a_stubbed_client_made_before_records_nothing(tape: Tape) -> None:
    agent = boto3.client(
        "bedrock-agent-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key=SECRET,
    )
    spanledger.instrument(sdks=["botocore"])
    with Stubber(agent) as stub:
        stub.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]})
        assert rerank(agent, top=1)["results"][0]["index"] == 0
    assert is_instrumented(agent)
    assert tape.events == []


def test_its_calls_after_the_first_hear_an_interrupt(standin: StandIn, tape: Tape) -> None:
    runtime = client(standin)
    spanledger.instrument(sdks=["botocore"])
    embed(runtime)  # caught: its operation method now hears interrupts too
    interrupt = KeyboardInterrupt()

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise interrupt

    runtime._endpoint.http_session.send = interrupted
    with pytest.raises(KeyboardInterrupt) as raised:
        embed(runtime)
    assert raised.value is interrupt
    first, second = tape.events
    assert isinstance(first, EmbeddingEvent)
    assert isinstance(second, EmbeddingFailedEvent)
    assert second.error_category is ErrorCategory.INTERRUPTED


def test_a_client_the_switch_cannot_instrument_goes_on_unrecorded(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[object] = []

    def broken(bedrock: Any, installation: Any) -> None:
        tries.append(bedrock)
        raise RuntimeError("botocore changed under us")

    runtime = client(standin)
    monkeypatch.setattr(bedrock_client, "install", broken)
    caplog.set_level(logging.DEBUG, logger="spanledger")
    spanledger.instrument(sdks=["botocore"])
    assert embed(runtime)["inputTextTokenCount"] == tokens(TEXT)
    assert embed(runtime)["inputTextTokenCount"] == tokens(TEXT)
    assert not is_instrumented(runtime)
    assert tries == [runtime]  # tried once, not at every call
    assert tape.events == []
    assert any(record.name.startswith("spanledger") for record in caplog.records)


def test_a_botocore_without_the_first_call_method_is_left_unpatched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _skipped._forget_warnings()
    monkeypatch.delattr(botocore.client.BaseClient, FIRST_CALL)
    creator = vars(botocore.client.ClientCreator)["create_client"]
    spanledger.instrument(sdks=["botocore"])
    assert instrumented_sdks() == ()
    assert vars(botocore.client.ClientCreator)["create_client"] is creator
    assert FIRST_CALL in failures()["botocore"]
    monkeypatch.undo()
    _skipped._forget_warnings()


def test_beside_opentelemetrys_botocore_instrumentation(standin: StandIn, tape: Tape) -> None:
    from opentelemetry.instrumentation import botocore as otel_botocore
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    make_api_call = vars(botocore.client.BaseClient)["_make_api_call"]
    kind: Any = otel_botocore.BotocoreInstrumentor
    instrumentor = kind()  # a singleton
    runtime = client(standin)
    instrumentor.instrument(tracer_provider=provider)
    try:
        spanledger.instrument(sdks=["botocore"])
        embed(runtime)
        embed(runtime)
        assert len(tape.events) == 2
        assert len(spans.get_finished_spans()) == 2
        instrumentor.uninstrument()
        embed(runtime)
        assert len(tape.events) == 3
        assert len(spans.get_finished_spans()) == 2
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert vars(botocore.client.BaseClient)["_make_api_call"] is make_api_call
