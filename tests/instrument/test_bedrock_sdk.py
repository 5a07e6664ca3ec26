"""boto3's Bedrock clients, instrumented through botocore's own per-client events, against the
loopback stand-in with real SigV4-signed requests: one event per HTTP attempt, figures from the
raw body and headers, the caller's result and exceptions exactly what botocore gave, the
InvokeModel body handed back byte for byte, and no caller text anywhere."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import botocore.client  # type: ignore[import-untyped]
import botocore.exceptions  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError
from botocore.stub import Stubber  # type: ignore[import-untyped]

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    ErrorCategory,
    Event,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.instrumentation import instrumented_sdks, is_instrumented
from spanledger.integrations.botocore import client as bedrock_client
from spanledger.testing import (
    Reply,
    Route,
    StandIn,
    bedrock_cohere_embeddings,
    bedrock_titan_embeddings,
)
from tests.instrument.conftest import Tape, tokens

SENTINEL = "SENTINEL-bedrock-4d2a"
SECRET = "secret-SENTINEL-key-9e1f"
TEXT = f"ticks feed on blood {SENTINEL}"
TEXTS = [TEXT, f"the clock ticks {SENTINEL}", f"deer carry ticks {SENTINEL}"]
QUERY = f"what do ticks eat {SENTINEL}"
TITAN_V2 = "amazon.titan-embed-text-v2:0"
NO_RETRIES = Config(retries={"total_max_attempts": 1})
FAST_RETRIES = Config(retries={"total_max_attempts": 3, "mode": "standard"})
INVOKE = "/model/{model+}/invoke"
RERANK_ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


def client(
    standin: StandIn,
    service: str = "bedrock-runtime",
    behaviour: str | None = None,
    config: Config = NO_RETRIES,
) -> Any:
    """A real boto3 client with fake credentials, pointed at the stand-in."""
    return boto3.client(
        service,
        region_name="us-east-1",
        endpoint_url=standin.base_url("aws.bedrock", behaviour),
        aws_access_key_id="test",
        aws_secret_access_key=SECRET,
        config=config,
    )


def runtime(standin: StandIn, behaviour: str | None = None, config: Config = NO_RETRIES) -> Any:
    return spanledger.instrument(client(standin, "bedrock-runtime", behaviour, config))


def invoke(bedrock: Any, model: str, body: dict[str, Any]) -> dict[str, Any]:
    response = bedrock.invoke_model(modelId=model, body=json.dumps(body))
    return dict(response, body=response["body"].read())


def titan(text: str = TEXT, **extra: Any) -> dict[str, Any]:
    return {"inputText": text, **extra}


def cohere_embed(texts: list[str] = TEXTS) -> dict[str, Any]:
    return {"texts": texts, "input_type": "search_document"}


def agent_rerank(agent: Any, documents: list[str] = TEXTS, top: int = 2) -> Any:
    return agent.rerank(
        queries=[{"type": "TEXT", "textQuery": {"text": QUERY}}],
        sources=[
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": d}},
            }
            for d in documents
        ],
        rerankingConfiguration={
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": top,
                "modelConfiguration": {"modelArn": RERANK_ARN},
            },
        },
    )


def only(tape: Tape) -> Event:
    [event] = tape.events
    return event


@pytest.fixture(autouse=True)
def _standin_fresh(standin: StandIn) -> Iterator[None]:
    standin.reset()
    yield
    standin.reset()


# What is read: the figures as the stand-in sent them, the facts the request carried.


@pytest.mark.parametrize("model", ["amazon.titan-embed-text-v1", TITAN_V2])
def test_titan_reads_its_body_tokens(standin: StandIn, tape: Tape, model: str) -> None:
    standin.route(bedrock_titan_embeddings(tokens=11))
    invoke(runtime(standin), model, titan(dimensions=8))
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("aws.bedrock", model)
    assert event.usage is not None
    assert event.usage.input_tokens == 11
    assert (event.input_count, event.dimensions) == (1, 8)
    assert event.request_params == {"dimensions": 8}
    assert event.server_address == "127.0.0.1"
    assert event.server_port == int(standin.url.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    ("model", "recorded"),
    [
        ("cohere.embed-english-v3", "cohere.embed-english-v3"),
        ("us.cohere.embed-v4:0", "cohere.embed-v4:0"),
    ],
)
def test_cohere_embed_reads_the_header_tokens(
    standin: StandIn, tape: Tape, model: str, recorded: str
) -> None:
    answer = invoke(runtime(standin), model, cohere_embed())
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.model == recorded
    assert event.usage is not None
    assert event.usage.input_tokens == sum(tokens(t) for t in TEXTS)
    assert event.input_count == len(TEXTS)
    assert event.input_type == "search_document"
    vectors = json.loads(answer["body"])["embeddings"]
    assert event.dimensions == len(vectors["float"][0] if "v4" in model else vectors[0])


def test_nova_reads_the_header_tokens(standin: StandIn, tape: Tape) -> None:
    body = {
        "taskType": "SINGLE_EMBEDDING",
        "singleEmbeddingParams": {"embeddingDimension": 16, "text": {"value": TEXT}},
    }
    invoke(runtime(standin), "amazon.nova-2-multimodal-embeddings-v1:0", body)
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(TEXT)
    assert (event.input_count, event.dimensions) == (1, 16)


def test_cohere_rerank_through_invoke_model_reports_no_usage(standin: StandIn, tape: Tape) -> None:
    body = {"query": QUERY, "documents": TEXTS, "top_n": 2, "api_version": 2}
    answer = invoke(runtime(standin), "cohere.rerank-v3-5:0", body)
    event = only(tape)
    assert isinstance(event, RerankEvent)
    assert event.usage is None  # Bedrock reports none: unknown, never zero
    assert event.billing == "queries"
    assert (event.document_count, event.top_k, event.result_count) == (3, 2, 2)
    assert event.result_count == len(json.loads(answer["body"])["results"])


def test_agent_rerank_counts_its_sources(standin: StandIn, tape: Tape) -> None:
    agent = spanledger.instrument(client(standin, "bedrock-agent-runtime"))
    result = agent_rerank(agent, top=2)
    event = only(tape)
    assert isinstance(event, RerankEvent)
    assert event.model == "amazon.rerank-v1:0"
    assert event.usage is None
    assert event.billing == "queries"
    assert (event.document_count, event.top_k, event.result_count) == (3, 2, 2)
    assert event.query_length == len(QUERY.encode())
    assert len(result["results"]) == 2


@pytest.mark.parametrize(
    ("model_id", "recorded"),
    [
        (TITAN_V2, TITAN_V2),
        ("us.amazon.titan-embed-text-v2:0", TITAN_V2),
        (f"arn:aws:bedrock:us-east-1::foundation-model/{TITAN_V2}", TITAN_V2),
        (
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3",
        ),
    ],
)
def test_every_model_id_form_is_read(
    standin: StandIn, tape: Tape, model_id: str, recorded: str
) -> None:
    invoke(runtime(standin), model_id, titan())
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.model == recorded
    assert event.usage is not None


# Attempts and failures.


def test_a_throttle_then_a_success_is_two_attempts_of_one_call(
    standin: StandIn, tape: Tape
) -> None:
    standin.route(bedrock_titan_embeddings().failing(429, retry_after=1), times=1)
    answer = invoke(runtime(standin, config=FAST_RETRIES), TITAN_V2, titan())
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    throttled, succeeded = tape.events
    assert isinstance(throttled, EmbeddingFailedEvent)
    assert isinstance(succeeded, EmbeddingEvent)
    assert throttled.retried is True
    assert throttled.error_category is ErrorCategory.RATE_LIMIT
    assert throttled.error_type == "ThrottlingException"
    assert (throttled.status_code, throttled.retry_after) == (429, 1.0)
    assert throttled.logical_call_id == succeeded.logical_call_id == throttled.call_id
    assert succeeded.attempt == 2
    assert succeeded.usage is not None
    assert len(standin.requests) == 2


def test_with_retries_off_a_throttle_is_one_event_and_the_same_exception(
    standin: StandIn, tape: Tape
) -> None:
    bare = client(standin, behaviour="fail-429")
    with pytest.raises(botocore.exceptions.ClientError) as unrecorded:
        bare.invoke_model(modelId=TITAN_V2, body=json.dumps(titan()))
    with pytest.raises(botocore.exceptions.ClientError) as recorded:
        runtime(standin, "fail-429").invoke_model(modelId=TITAN_V2, body=json.dumps(titan()))
    assert type(recorded.value) is type(unrecorded.value)
    assert recorded.value.response["Error"] == unrecorded.value.response["Error"]
    event = only(tape)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.retried is False
    assert event.logical_call_id is None
    assert event.error_category is ErrorCategory.RATE_LIMIT
    assert (event.status_code, event.retry_after) == (429, 2.0)
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length > 0


@pytest.mark.parametrize(
    ("behaviour", "category", "code"),
    [
        ("not-ready", ErrorCategory.MODEL_NOT_LOADED, "ModelNotReadyException"),
        ("fail-400", ErrorCategory.INVALID_REQUEST, "ValidationException"),
        ("fail-403", ErrorCategory.AUTHENTICATION, "AccessDeniedException"),
        ("fail-408", ErrorCategory.UNAVAILABLE, "ModelTimeoutException"),
        ("fail-503", ErrorCategory.UNAVAILABLE, "ServiceUnavailableException"),
    ],
)
def test_errors_take_botocores_error_code(
    standin: StandIn, tape: Tape, behaviour: str, category: ErrorCategory, code: str
) -> None:
    with pytest.raises(botocore.exceptions.ClientError) as raised:
        invoke(runtime(standin, behaviour), TITAN_V2, titan())
    assert raised.value.response["Error"]["Code"] == code
    event = only(tape)
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (category, code)


def test_a_dropped_connection_is_an_unavailable_attempt(standin: StandIn, tape: Tape) -> None:
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        invoke(runtime(standin, "reset"), TITAN_V2, titan())
    event = only(tape)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.UNAVAILABLE
    assert event.error_type == "ProtocolError"
    assert event.status_code is None


def test_a_refused_connection_is_retried_and_each_attempt_recorded(tape: Tape) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bedrock = spanledger.instrument(
        boto3.client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="test",
            aws_secret_access_key=SECRET,
            config=Config(retries={"total_max_attempts": 2, "mode": "standard"}),
        )
    )
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        invoke(bedrock, TITAN_V2, titan())
    first, last = tape.events
    assert isinstance(first, EmbeddingFailedEvent)
    assert isinstance(last, EmbeddingFailedEvent)
    assert first.retried is True
    assert last.attempt == 2
    assert {first.error_type, last.error_type} == {"NewConnectionError"}
    assert last.error_category is ErrorCategory.UNAVAILABLE


def test_a_garbage_header_figure_is_not_reported(standin: StandIn, tape: Tape) -> None:
    real = bedrock_cohere_embeddings()

    def garbage(request: Any) -> Reply:
        reply = real.respond(request)
        return Reply(200, reply.body, {**reply.headers, "X-Amzn-Bedrock-Input-Token-Count": "abc"})

    standin.route(Route(real.vendor, real.path, garbage, real.selects))
    invoke(runtime(standin), "cohere.embed-english-v3", cohere_embed())
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None
    assert event.malformed_usage == ("input_tokens",)


def test_a_body_the_endpoint_does_not_answer_fails_the_event_not_the_call(
    standin: StandIn, tape: Tape
) -> None:
    standin.route(bedrock_titan_embeddings().malformed(b'{"embedding": ['))
    answer = invoke(runtime(standin), TITAN_V2, titan())
    assert answer["body"] == b'{"embedding": ['  # the caller reads what was sent
    event = only(tape)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    assert event.status_code == 200
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == len(b'{"embedding": [')


# What the caller gets: exactly what botocore gave.


@pytest.mark.parametrize(
    "read",
    [
        lambda body: body.read(),
        lambda body: body.read(5) + body.read(1000) + body.read(),
        lambda body: b"".join(body.iter_chunks(7)),
        lambda body: b"\n".join(body.iter_lines(keepends=False)),
        lambda body: b"".join(body),
    ],
    ids=["read", "read-n", "iter_chunks", "iter_lines", "iter"],
)
def test_the_invoke_model_body_is_handed_back_byte_for_byte(
    standin: StandIn, tape: Tape, read: Any
) -> None:
    body = json.dumps(cohere_embed())
    bare = client(standin).invoke_model(modelId="cohere.embed-english-v3", body=body)
    recorded = runtime(standin).invoke_model(modelId="cohere.embed-english-v3", body=body)
    assert read(recorded["body"]) == read(bare["body"])
    assert recorded["contentType"] == bare["contentType"]
    assert recorded.keys() == bare.keys()
    assert len(tape.events) == 1


def test_a_large_body_is_replayed_whole(standin: StandIn, tape: Tape) -> None:
    texts = [f"passage {i} {SENTINEL}" for i in range(96)]
    body = json.dumps({"texts": texts, "input_type": "search_document", "output_dimension": 1024})
    bare = client(standin).invoke_model(modelId="cohere.embed-english-v3", body=body)
    recorded = runtime(standin).invoke_model(modelId="cohere.embed-english-v3", body=body)
    expected = bare["body"].read()
    assert len(expected) > 1_000_000
    assert recorded["body"].read() == expected
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert (event.input_count, event.dimensions) == (96, 1024)


def test_a_chat_model_passes_through_unrecorded(standin: StandIn, tape: Tape) -> None:
    answer = {"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 3}}
    standin.route(Route("aws.bedrock", INVOKE, lambda _r: Reply(200, answer), ("messages",)))
    chat = {"messages": [{"role": "user", "content": QUERY}], "anthropic_version": "x"}
    bedrock = runtime(standin)
    result = invoke(bedrock, "anthropic.claude-3-haiku-20240307-v1:0", chat)
    assert json.loads(result["body"]) == answer
    # Titan Text's generation body carries ``inputText`` too: not an embedding
    standin.route(
        Route(
            "aws.bedrock", "/model/{model+}/invoke", lambda _r: Reply(200, answer), ("inputText",)
        )
    )
    invoke(bedrock, "amazon.titan-text-express-v1", titan(textGenerationConfig={}))
    assert tape.events == []


def test_a_stubbed_call_sends_nothing_and_records_nothing(tape: Tape) -> None:
    bedrock = spanledger.instrument(
        boto3.client(
            "bedrock-agent-runtime",
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key=SECRET,
        )
    )
    with Stubber(bedrock) as stub:
        stub.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]})
        assert agent_rerank(bedrock, top=1)["results"][0]["index"] == 0
    assert tape.events == []


def test_our_own_failure_never_reaches_the_caller(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"reader broke on {SENTINEL}")

    monkeypatch.setattr(bedrock_client, "reported", broken)
    answer = invoke(runtime(standin), TITAN_V2, titan())
    assert json.loads(answer["body"])["inputTextTokenCount"] == tokens(TEXT)
    event = only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None  # unknown, since it could not be read
    monkeypatch.setattr(bedrock_client, "_call_for", broken)
    invoke(runtime(standin), TITAN_V2, titan())
    assert len(tape.events) == 1


# Instrumenting and undoing.


def emitter_state(bedrock: Any) -> list[tuple[str, list[Any]]]:
    """Every handler the client's emitter holds for the recorded operation."""
    names = [f"{step}.bedrock-runtime.InvokeModel" for step in bedrock_client._STEPS]
    emitter = bedrock.meta.events._emitter
    return [(name, list(emitter._handlers.prefix_search(name))) for name in names]


def test_uninstrument_takes_every_handler_back(standin: StandIn, tape: Tape) -> None:
    bedrock = client(standin)
    before = emitter_state(bedrock)
    spanledger.instrument(bedrock)
    assert spanledger.instrument(bedrock) is bedrock  # twice: no change
    assert emitter_state(bedrock) != before
    invoke(bedrock, TITAN_V2, titan())
    spanledger.uninstrument(bedrock)
    assert emitter_state(bedrock) == before
    assert not is_instrumented(bedrock)
    invoke(bedrock, TITAN_V2, titan())
    assert len(tape.events) == 1


def test_handlers_stay_on_their_own_client(standin: StandIn, tape: Tape) -> None:
    session = boto3.Session(
        aws_access_key_id="test", aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    url = standin.base_url("aws.bedrock")
    one = spanledger.instrument(session.client("bedrock-runtime", endpoint_url=url))
    other = session.client("bedrock-runtime", endpoint_url=url)
    invoke(other, TITAN_V2, titan())
    invoke(one, TITAN_V2, titan())
    assert len(tape.events) == 1


def test_other_clients_are_refused() -> None:
    s3 = boto3.client(
        "s3", region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key=SECRET
    )
    with pytest.raises(TypeError, match=r"bedrock-runtime.*not a s3 client"):
        spanledger.instrument(s3)


# The process-wide switch.


def test_the_switch_catches_clients_made_after_it(standin: StandIn, tape: Tape) -> None:
    creator = vars(botocore.client.ClientCreator)["create_client"]
    made_before = client(standin)
    spanledger.instrument(sdks=["botocore"])
    try:
        assert instrumented_sdks() == ("botocore",)
        made_after = client(standin)
        agent = client(standin, "bedrock-agent-runtime")
        s3 = boto3.client(
            "s3", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key=SECRET
        )
        assert is_instrumented(made_after)
        assert is_instrumented(agent)
        assert not is_instrumented(made_before)
        assert not is_instrumented(s3)
        invoke(made_before, TITAN_V2, titan())  # made before: caught at its first call
        invoke(made_after, TITAN_V2, titan())
        agent_rerank(agent)
        assert [event.kind for event in tape.events] == ["embedding", "embedding", "rerank"]
    finally:
        spanledger.uninstrument()
    assert vars(botocore.client.ClientCreator)["create_client"] is creator
    assert not is_instrumented(made_after)
    invoke(made_after, TITAN_V2, titan())
    assert len(tape.events) == 3
    assert instrumented_sdks() == ()


def test_the_switch_is_on_by_default_when_botocore_is_installed() -> None:
    spanledger.instrument()
    try:
        assert "botocore" in instrumented_sdks()
    finally:
        spanledger.uninstrument()


def test_an_untested_botocore_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "1.20.0" if name == "botocore" else real(name)
    )
    creator = vars(botocore.client.ClientCreator)["create_client"]
    spanledger.instrument(sdks=["botocore"])
    assert vars(botocore.client.ClientCreator)["create_client"] is creator
    assert instrumented_sdks() == ()


def test_a_client_the_switch_cannot_instrument_is_handed_back(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(client: Any, installation: Any) -> None:
        raise RuntimeError("botocore changed under us")

    monkeypatch.setattr(bedrock_client, "install", broken)
    spanledger.instrument(sdks=["botocore"])
    try:
        bedrock = client(standin)
        assert not is_instrumented(bedrock)
        assert invoke(bedrock, TITAN_V2, titan())["body"]
    finally:
        spanledger.uninstrument()
    assert tape.events == []


# Privacy.


def test_no_caller_text_or_key_reaches_an_event_a_log_or_an_exception(
    standin: StandIn, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = Tape()
    surfaces: list[str] = []
    caplog.set_level(logging.DEBUG, logger="spanledger")
    with spanledger.use(Recorder([tape])):
        invoke(runtime(standin), TITAN_V2, titan())
        invoke(runtime(standin), "cohere.embed-english-v3", cohere_embed())
        agent_rerank(spanledger.instrument(client(standin, "bedrock-agent-runtime")))
        for behaviour in ("fail-429", "fail-400", "reset"):
            with pytest.raises((BotoCoreError, ClientError)) as e:
                invoke(runtime(standin, behaviour), TITAN_V2, titan())
            surfaces.append(str(e.value))
        with pytest.raises(botocore.exceptions.ClientError) as e:
            agent_rerank(
                spanledger.instrument(client(standin, "bedrock-agent-runtime", "fail-500"))
            )
        surfaces.append(str(e.value))

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"reader broke on {SENTINEL} {SECRET}")

        monkeypatch.setattr(bedrock_client, "reported", broken)
        invoke(runtime(standin), TITAN_V2, titan())
    assert len(tape.events) == 8
    assert any(isinstance(event, RerankFailedEvent) for event in tape.events)
    surfaces += [event.model_dump_json() for event in tape.events]
    surfaces += [repr(event) for event in tape.events]
    ours = [record for record in caplog.records if record.name.startswith("spanledger")]
    assert ours  # the broken reader was logged, by type
    surfaces += [record.getMessage() + repr(record.__dict__) for record in ours]
    for surface in surfaces:
        assert SENTINEL not in surface
        assert SECRET not in surface
