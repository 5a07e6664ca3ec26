"""An interrupted call is its own outcome on every path: a ``KeyboardInterrupt``, a
``SystemExit``, a ``GeneratorExit`` or a task's cancellation landing mid-call gives exactly one
failed event, ``interrupted`` (named by the interrupt's class, priced ``estimated`` like an
abandoned attempt), never ``provider_unavailable``; the very same exception reaches the caller.

Each interrupt is raised from inside what the path reaches: an ``httpx.MockTransport`` handler,
the connection pool under an SDK's HTTP client (httpcore, httpcore2, urllib3, aiohttp),
botocore's HTTP session, a model's tokenizer.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import aiohttp
import boto3  # type: ignore[import-untyped]
import botocore.endpoint  # type: ignore[import-untyped]
import cohere
import httpcore
import httpcore2
import httpx
import httpx2
import ollama
import openai
import pytest
import requests
import urllib3
from botocore.config import Config  # type: ignore[import-untyped]
from google import genai
from google.genai import types as gtypes
from mistralai.client import Mistral
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from voyageai.client import Client as VoyageClient
from voyageai.client_async import AsyncClient as AsyncVoyageClient

import spanledger
from spanledger import (
    CallStarted,
    EmbeddingFailedEvent,
    ErrorCategory,
    Event,
    JsonlSink,
    ProviderError,
    Recorder,
    RerankFailedEvent,
    read_events,
)
from spanledger.capture.failures import describe
from spanledger.capture.local import Library, LocalSpec
from spanledger.chains import CancelToken, awith_fallback, with_fallback
from spanledger.costs import CostStatus
from spanledger.errors import error_for_interrupt, interrupts
from spanledger.estimates import may_have_billed
from spanledger.events import EmbeddingUsage, RerankUsage
from spanledger.exporters.otel import OtelExporter
from spanledger.instrumentation import transport
from spanledger.ledger import Ledger, PriceTable
from spanledger.providers import CohereEmbeddings, CohereReranker
from spanledger.recording.call import ended_by
from spanledger.recording.facts import EmbedFacts, Figures
from spanledger.testing import StandIn

ORIGIN = "http://127.0.0.1:9"
"""Where the SDKs are pointed: nothing is ever sent there (the interrupt lands first)."""
TEXTS = ["ticks feed on blood", "the clock ticks"]
QUERY = "what do ticks eat"
COHERE_EMBED = f"{ORIGIN}/v2/embed"
INTERRUPTS = pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit], ids=str)
INVALID_ESTIMATE = EmbeddingUsage(input_tokens=sum(-(-len(t.encode()) // 4) for t in TEXTS))


Failed = type[EmbeddingFailedEvent] | type[RerankFailedEvent]


class Tape:
    """A start-aware sink keeping every start notice and event."""

    def __init__(self) -> None:
        self.started: list[CallStarted] = []
        self.events: list[Event] = []

    def call_started(self, started: CallStarted) -> None:
        self.started.append(started)

    def emit(self, event: Event) -> None:
        self.events.append(event)


@pytest.fixture
def tape() -> Iterator[Tape]:
    recording = Tape()
    with spanledger.use(Recorder([recording])):
        yield recording


def only_interrupted(
    tape: Tape, kind: type[BaseException] = KeyboardInterrupt, failed: Failed = EmbeddingFailedEvent
) -> EmbeddingFailedEvent | RerankFailedEvent:
    """The one event of the interrupted call: failed, ``interrupted``, named by ``kind``."""
    assert len(tape.events) == 1, tape.events
    (event,) = tape.events
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    assert isinstance(event, failed)
    assert event.error_category is ErrorCategory.INTERRUPTED
    assert event.error_type == kind.__name__
    assert event.status_code is None
    assert not any(
        isinstance(e, EmbeddingFailedEvent | RerankFailedEvent)
        and e.error_category is ErrorCategory.UNAVAILABLE
        for e in tape.events
    )
    assert [s.call_id for s in tape.started] == [event.call_id]
    return event


def raiser(interrupt: BaseException) -> Callable[..., Any]:
    def handler(*args: Any, **kwargs: Any) -> Any:
        raise interrupt

    return handler


def araiser(interrupt: BaseException) -> Callable[..., Coroutine[None, None, Any]]:
    async def handler(*args: Any, **kwargs: Any) -> Any:
        raise interrupt

    return handler


def embedder_raising(interrupt: BaseException) -> CohereEmbeddings:
    """A provider class whose HTTP client's transport raises ``interrupt`` mid-call."""
    client = httpx.Client(transport=httpx.MockTransport(raiser(interrupt)))
    return CohereEmbeddings(model="embed-v4.0", api_key="k", base_url=ORIGIN, http_client=client)


# --------------------------------------------------------------------------- the one rule


@pytest.mark.parametrize(
    "interrupt",
    [
        KeyboardInterrupt(),
        SystemExit(3),
        GeneratorExit(),
        asyncio.CancelledError(),
        BaseExceptionGroup("both", [KeyboardInterrupt(), ValueError()]),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_interrupt_is_interrupted_never_the_providers_fault(interrupt: BaseException) -> None:
    assert interrupts(interrupt)
    for error in (describe(interrupt), ended_by(interrupt), error_for_interrupt(interrupt)):
        assert error.category is ErrorCategory.INTERRUPTED
        assert error.error_type == type(interrupt).__name__
        assert not error.category.transient
        assert may_have_billed(error.category, error.error_type, error.status_code)


def test_an_exception_is_still_described_as_before() -> None:
    assert not interrupts(ValueError())
    assert describe(httpx.ReadTimeout("slow")).category is ErrorCategory.UNAVAILABLE
    assert ended_by(RuntimeError()).category is ErrorCategory.UNAVAILABLE


# --------------------------------------------------------------------------- provider classes


@INTERRUPTS
def test_a_provider_embed_interrupted_mid_call(tape: Tape, kind: type[BaseException]) -> None:
    interrupt = kind()
    with pytest.raises(kind) as raised:
        embedder_raising(interrupt).embed(TEXTS)
    assert raised.value is interrupt
    event = only_interrupted(tape, kind, EmbeddingFailedEvent)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.estimated_usage == INVALID_ESTIMATE  # like an abandoned attempt


@INTERRUPTS
def test_a_provider_arerank_interrupted_mid_call(tape: Tape, kind: type[BaseException]) -> None:
    interrupt = kind()
    client = httpx.AsyncClient(transport=httpx.MockTransport(araiser(interrupt)))
    reranker = CohereReranker(
        model="rerank-v3.5", api_key="k", base_url=ORIGIN, async_http_client=client
    )
    with pytest.raises(kind) as raised:
        asyncio.run(reranker.arerank(QUERY, TEXTS))
    assert raised.value is interrupt
    event = only_interrupted(tape, kind, RerankFailedEvent)
    assert isinstance(event, RerankFailedEvent)
    assert event.estimated_usage == RerankUsage(search_units=1)


def test_a_cancelled_provider_call_is_interrupted(tape: Tape) -> None:
    async def hanging(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("cancelled before this")

    client = httpx.AsyncClient(transport=httpx.MockTransport(hanging))
    embedder = CohereEmbeddings(
        model="embed-v4.0", api_key="k", base_url=ORIGIN, async_http_client=client
    )

    async def cancel_it() -> None:
        task = asyncio.ensure_future(embedder.aembed(TEXTS))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    only_interrupted(tape, asyncio.CancelledError, EmbeddingFailedEvent)


def test_a_provider_coroutine_closed_mid_call_is_interrupted(tape: Tape) -> None:
    @types.coroutine
    def suspended() -> Iterator[str]:
        yield "suspended"

    async def pausing(request: httpx.Request) -> httpx.Response:
        await suspended()
        raise AssertionError("closed before this")

    client = httpx.AsyncClient(transport=httpx.MockTransport(pausing))
    embedder = CohereEmbeddings(
        model="embed-v4.0", api_key="k", base_url=ORIGIN, async_http_client=client
    )

    async def drive() -> None:
        call = embedder.aembed(TEXTS)
        assert call.send(None) == "suspended"
        call.close()  # GeneratorExit at the await: the coroutine is dropped mid-call

    asyncio.run(drive())
    only_interrupted(tape, GeneratorExit, EmbeddingFailedEvent)


# --------------------------------------------------------------------------- SDK captures


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> Callable[[BaseException], None]:
    """``pools(interrupt)``: every connection pool an SDK's client reaches raises ``interrupt``
    (as Ctrl-C does while a request is on the wire), under every spanledger hook."""

    def interrupt_in_flight(interrupt: BaseException) -> None:
        sync, asynchronous = raiser(interrupt), araiser(interrupt)
        for module in (httpcore, httpcore2):
            monkeypatch.setattr(module.ConnectionPool, "handle_request", sync)
            monkeypatch.setattr(module.AsyncConnectionPool, "handle_async_request", asynchronous)
        monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", sync)
        monkeypatch.setattr(aiohttp.ClientSession, "_request", asynchronous)

    return interrupt_in_flight


def _openai(is_async: bool) -> Any:
    kind = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = kind(api_key="k", base_url=f"{ORIGIN}/v1", max_retries=0)
    return client.embeddings.create(model="text-embedding-3-small", input=TEXTS)


def _cohere_embed(is_async: bool) -> Any:
    kind = cohere.AsyncClientV2 if is_async else cohere.ClientV2
    client = kind(api_key="k", base_url=ORIGIN)
    return client.embed(model="embed-v4.0", texts=TEXTS, input_type="search_document")


def _cohere_rerank(is_async: bool) -> Any:
    kind = cohere.AsyncClientV2 if is_async else cohere.ClientV2
    return kind(api_key="k", base_url=ORIGIN).rerank(
        model="rerank-v3.5", query=QUERY, documents=TEXTS
    )


def _voyage_embed(is_async: bool) -> Any:
    kind = AsyncVoyageClient if is_async else VoyageClient
    client = kind(api_key="k", base_url=f"{ORIGIN}/v1", max_retries=0)
    return client.embed(TEXTS, model="voyage-3.5")


def _voyage_rerank(is_async: bool) -> Any:
    kind = AsyncVoyageClient if is_async else VoyageClient
    client = kind(api_key="k", base_url=f"{ORIGIN}/v1", max_retries=0)
    return client.rerank(QUERY, TEXTS, model="rerank-2.5")


def _mistral(is_async: bool) -> Any:
    client = Mistral(api_key="k", server_url=ORIGIN)
    if is_async:
        return client.embeddings.create_async(model="mistral-embed", inputs=TEXTS)
    return client.embeddings.create(model="mistral-embed", inputs=TEXTS)


def _ollama(is_async: bool) -> Any:
    kind = ollama.AsyncClient if is_async else ollama.Client
    return kind(host=ORIGIN).embed("nomic-embed-text", TEXTS)


def _gemini(is_async: bool) -> Any:
    client = genai.Client(api_key="k", http_options=gtypes.HttpOptions(base_url=ORIGIN))
    models = client.aio.models if is_async else client.models
    contents: Any = TEXTS
    return models.embed_content(model="gemini-embedding-001", contents=contents)


SDK_CALLS: dict[str, tuple[Callable[[bool], Any], Failed]] = {
    "openai": (_openai, EmbeddingFailedEvent),
    "cohere-embed": (_cohere_embed, EmbeddingFailedEvent),
    "cohere-rerank": (_cohere_rerank, RerankFailedEvent),
    "voyage-embed": (_voyage_embed, EmbeddingFailedEvent),
    "voyage-rerank": (_voyage_rerank, RerankFailedEvent),
    "mistral": (_mistral, EmbeddingFailedEvent),
    "ollama": (_ollama, EmbeddingFailedEvent),
    "google-genai": (_gemini, EmbeddingFailedEvent),
}


@pytest.fixture
def switched_on() -> Iterator[None]:
    """Every SDK spanledger knows instrumented by the process-wide switch (no HTTP switch)."""
    spanledger.instrument()
    try:
        yield
    finally:
        spanledger.uninstrument()


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("sdk", sorted(SDK_CALLS))
def test_an_sdk_call_interrupted_in_flight(
    switched_on: None,
    pools: Callable[[BaseException], None],
    tape: Tape,
    sdk: str,
    is_async: bool,
) -> None:
    call, failed = SDK_CALLS[sdk]
    interrupt = KeyboardInterrupt()
    pools(interrupt)

    async def awaited() -> Any:
        return await call(True)

    with pytest.raises(KeyboardInterrupt) as raised:
        asyncio.run(awaited()) if is_async else call(False)
    assert raised.value is interrupt
    event = only_interrupted(tape, KeyboardInterrupt, failed)
    assert event.estimated_usage is not None or event.provider in ("ollama", "gcp.gemini")


# --------------------------------------------------------------------------- botocore / Bedrock

TITAN = "amazon.titan-embed-text-v2:0"
RERANK_ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


def bedrock(service: str, endpoint: str = ORIGIN, attempts: int = 1) -> Any:
    return spanledger.instrument(
        boto3.client(
            service,
            region_name="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
        )
    )


def invoke_titan(client: Any) -> Any:
    return client.invoke_model(modelId=TITAN, body=json.dumps({"inputText": TEXTS[0]}))


def agent_rerank(client: Any) -> Any:
    return client.rerank(
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
                "numberOfResults": 1,
                "modelConfiguration": {"modelArn": RERANK_ARN},
            },
        },
    )


@INTERRUPTS
@pytest.mark.parametrize(
    ("service", "call", "failed"),
    [
        ("bedrock-runtime", invoke_titan, EmbeddingFailedEvent),
        ("bedrock-agent-runtime", agent_rerank, RerankFailedEvent),
    ],
    ids=["invoke_model", "rerank"],
)
def test_a_bedrock_call_interrupted_in_flight(
    tape: Tape,
    kind: type[BaseException],
    service: str,
    call: Callable[[Any], Any],
    failed: Failed,
) -> None:
    """botocore's events hear only ``Exception``s: before the fix the call left no event."""
    client = bedrock(service)
    interrupt = kind()
    client._endpoint.http_session.send = raiser(interrupt)
    with pytest.raises(kind) as raised:
        call(client)
    assert raised.value is interrupt
    event = only_interrupted(tape, kind, failed)
    assert event.provider == "aws.bedrock"
    assert event.estimated_usage is not None


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _: None))


def test_a_bedrock_retry_interrupted_in_flight_ends_only_that_attempt(
    tape: Tape, no_backoff: None
) -> None:
    """The 503 attempt keeps its outcome; the retry the interrupt hit is ``interrupted``."""
    with StandIn() as standin:
        client = bedrock("bedrock-runtime", standin.base_url("aws.bedrock", "fail-503"), 2)
        session = client._endpoint.http_session
        send, interrupt = session.send, KeyboardInterrupt()
        sent: list[object] = []

        def once_then_interrupted(request: Any) -> Any:
            sent.append(request)
            if len(sent) > 1:
                raise interrupt
            return send(request)

        session.send = once_then_interrupted
        with pytest.raises(KeyboardInterrupt) as raised:
            invoke_titan(client)
    assert raised.value is interrupt
    first, second = tape.events
    assert isinstance(first, EmbeddingFailedEvent)
    assert isinstance(second, EmbeddingFailedEvent)
    assert (first.error_category, first.status_code, first.retried) == (
        ErrorCategory.UNAVAILABLE,
        503,
        True,
    )
    assert (second.error_category, second.error_type, second.attempt) == (
        ErrorCategory.INTERRUPTED,
        "KeyboardInterrupt",
        2,
    )


def test_a_bedrock_call_interrupted_in_its_backoff_keeps_its_last_attempt(
    tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interrupt between attempts interrupts no attempt: the held one goes out, once."""
    interrupt = KeyboardInterrupt()
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=raiser(interrupt)))
    with StandIn() as standin:
        client = bedrock("bedrock-runtime", standin.base_url("aws.bedrock", "fail-503"), 2)
        with pytest.raises(KeyboardInterrupt) as raised:
            invoke_titan(client)
    assert raised.value is interrupt
    (event,) = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (ErrorCategory.UNAVAILABLE, 503)


def test_uninstrument_takes_the_bedrock_method_back() -> None:
    client = bedrock("bedrock-runtime")
    assert "invoke_model" in vars(client)
    spanledger.uninstrument(client)
    assert "invoke_model" not in vars(client)


# --------------------------------------------------------------------------- HTTP paths


def cohere_embed_body() -> dict[str, object]:
    return {"model": "embed-v4.0", "texts": TEXTS, "input_type": "search_document"}


@INTERRUPTS
def test_the_recording_transport_records_an_interrupt(
    tape: Tape, kind: type[BaseException]
) -> None:
    interrupt = kind()
    inner = httpx.MockTransport(raiser(interrupt))
    client = httpx.Client(transport=transport(inner, vendors={ORIGIN: "cohere"}))
    with client, pytest.raises(kind) as raised:
        client.post(COHERE_EMBED, json=cohere_embed_body())
    assert raised.value is interrupt
    event = only_interrupted(tape, kind, EmbeddingFailedEvent)
    assert event.estimated_usage is not None


def test_the_async_recording_transport_records_an_interrupt(tape: Tape) -> None:
    interrupt = KeyboardInterrupt()
    inner = httpx.MockTransport(araiser(interrupt))

    async def post() -> None:
        wrapped = spanledger.instrumentation.async_transport(inner, vendors={ORIGIN: "cohere"})
        async with httpx.AsyncClient(transport=wrapped) as client:
            await client.post(COHERE_EMBED, json=cohere_embed_body())

    with pytest.raises(KeyboardInterrupt) as raised:
        asyncio.run(post())
    assert raised.value is interrupt
    only_interrupted(tape, KeyboardInterrupt, EmbeddingFailedEvent)


@pytest.fixture
def http_switch() -> Iterator[None]:
    spanledger.instrument(sdks=[], http=True, vendors={ORIGIN: "cohere"})
    try:
        yield
    finally:
        spanledger.uninstrument()


@pytest.mark.parametrize("client", ["httpx", "httpx-async", "httpx2", "requests"])
def test_the_http_switch_records_an_interrupt(
    http_switch: None, pools: Callable[[BaseException], None], tape: Tape, client: str
) -> None:
    interrupt = KeyboardInterrupt()
    pools(interrupt)

    async def apost() -> None:
        async with httpx.AsyncClient() as session:
            await session.post(COHERE_EMBED, json=cohere_embed_body())

    def post() -> None:
        if client == "httpx":
            httpx.post(COHERE_EMBED, json=cohere_embed_body())
        elif client == "httpx-async":
            asyncio.run(apost())
        elif client == "httpx2":
            httpx2.post(COHERE_EMBED, json=cohere_embed_body())
        else:
            requests.post(COHERE_EMBED, json=cohere_embed_body(), timeout=5)

    with pytest.raises(KeyboardInterrupt) as raised:
        post()
    assert raised.value is interrupt
    only_interrupted(tape, KeyboardInterrupt, EmbeddingFailedEvent)


# --------------------------------------------------------------------------- in-process models


class Encoder:
    """A model whose tokenizer is where the interrupt lands."""

    interrupt: BaseException | None = None

    def encode(self, texts: list[str]) -> list[list[float]]:
        if self.interrupt is not None:
            raise self.interrupt
        return [[0.0] for _ in texts]


@pytest.fixture
def local_library() -> Iterator[Library]:
    module = types.ModuleType("spanledger_interrupted_models")
    module.Encoder = Encoder  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module

    def facts(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[EmbedFacts, int]:
        texts = args[0]
        return EmbedFacts(provider="local", model="m", input_count=len(texts), billing="local"), 1

    library = Library(
        module.__name__,
        lambda m: [(m.Encoder, "encode", LocalSpec(facts, lambda r, f: Figures(dimensions=1)))],
    )
    yield library
    library.switch_off()
    for model in list(library.chosen):
        library.release(model)
    del sys.modules[module.__name__]


@INTERRUPTS
def test_an_in_process_model_interrupted(
    local_library: Library, tape: Tape, kind: type[BaseException]
) -> None:
    model = Encoder()
    model.interrupt = kind()
    local_library.choose(model)
    with pytest.raises(kind) as raised:
        model.encode(TEXTS)
    assert raised.value is model.interrupt
    event = only_interrupted(tape, kind, EmbeddingFailedEvent)
    line = Ledger(PriceTable.from_dict({"currency": "USD", "prices": []}), warn=False).price(event)
    assert line.status is CostStatus.NOT_BILLED  # nobody bills a local model, interrupted or not


# --------------------------------------------------------------------------- manual blocks


def test_a_manual_block_interrupted(tape: Tape) -> None:
    interrupt = KeyboardInterrupt()
    block = spanledger.record_embedding(provider="cohere", model="embed-v4.0", inputs=TEXTS)
    with pytest.raises(KeyboardInterrupt) as raised, block:
        raise interrupt
    assert raised.value is interrupt
    only_interrupted(tape, KeyboardInterrupt, EmbeddingFailedEvent)


# --------------------------------------------------------------------------- chains


def test_a_cancelled_async_chain_step_is_interrupted_not_unavailable(tape: Tape) -> None:
    """The caller cancels the chain: the step it was running ends ``interrupted``; the chain's
    own record of that attempt stays ``aborted``."""

    async def hanging(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        raise AssertionError("cancelled before this")

    client = httpx.AsyncClient(transport=httpx.MockTransport(hanging))
    step = CohereReranker(
        model="rerank-v3.5", api_key="k", base_url=ORIGIN, async_http_client=client
    )

    async def run() -> Any:
        token = CancelToken()
        asyncio.get_running_loop().call_later(0.05, token.cancel)
        return await awith_fallback([step], QUERY, TEXTS, cancel=token)

    outcome = asyncio.run(run())
    assert outcome.status == "aborted"
    assert [a.status for a in outcome.attempts] == ["aborted"]
    only_interrupted(tape, asyncio.CancelledError, RerankFailedEvent)


def test_a_sync_chain_step_interrupted_on_its_worker(tape: Tape) -> None:
    """A step's worker thread ending on an interrupt is the step's, not the caller's: the chain
    never raises it; the step's call is ``interrupted`` and its attempt ``aborted``."""
    interrupt = KeyboardInterrupt()
    client = httpx.Client(transport=httpx.MockTransport(raiser(interrupt)))
    step = CohereReranker(model="rerank-v3.5", api_key="k", base_url=ORIGIN, http_client=client)
    outcome = with_fallback([step], QUERY, TEXTS, cancel=CancelToken())
    assert [a.status for a in outcome.attempts] == ["aborted"]
    assert all(a.error_category is not ErrorCategory.UNAVAILABLE for a in outcome.attempts)
    only_interrupted(tape, KeyboardInterrupt, RerankFailedEvent)


# --------------------------------------------------------------------------- what is counted


PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "prices": [
            {
                "provider": "cohere",
                "model": "embed-v4.0",
                "input_per_mtok": "0.12",
                "checked": "2026-01-01",
            }
        ],
    }
)


def test_an_interrupt_is_priced_estimated_and_counted_apart_from_unavailability() -> None:
    """The metric an unavailability alert counts (``error.type`` on the call duration) says
    ``interrupted``; the ledger prices the call as an abandoned attempt: ``estimated``."""
    reader = InMemoryMetricReader()
    exporter = OtelExporter(
        tracer_provider=TracerProvider(), meter_provider=MeterProvider(metric_readers=[reader])
    )
    tape = Tape()
    embedder = embedder_raising(KeyboardInterrupt())
    recorder = Recorder([tape, exporter], prices=PRICES)
    with spanledger.use(recorder), pytest.raises(KeyboardInterrupt):
        embedder.embed(TEXTS)
    exporter.flush()
    event = only_interrupted(tape, KeyboardInterrupt, EmbeddingFailedEvent)
    assert event.cost is not None
    assert event.cost.status is CostStatus.ESTIMATED
    assert event.cost.amount is not None
    assert event.cost.amount > Decimal(0)
    data = reader.get_metrics_data()
    assert data is not None
    errors = {
        str((point.attributes or {}).get("error.type"))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.client.operation.duration"
        for point in metric.data.data_points
    }
    assert errors == {"interrupted"}
    exporter.shutdown()


def test_an_interrupted_event_reads_back_from_the_log(tmp_path: Any) -> None:
    """The new category survives the event log (what the fleet report and the CLI read)."""
    log = tmp_path / "events.jsonl"
    embedder = embedder_raising(KeyboardInterrupt())
    sink = JsonlSink(log)
    with spanledger.use(Recorder([sink], prices=PRICES)), pytest.raises(KeyboardInterrupt):
        embedder.embed(TEXTS)
    sink.shutdown()
    read_back = read_events(log)
    assert read_back.problems == []
    (read,) = read_back.events
    assert isinstance(read, EmbeddingFailedEvent)
    assert read.error_category is ErrorCategory.INTERRUPTED
    assert read.started_at <= datetime.now(UTC)


def test_the_interrupt_is_never_wrapped(tape: Tape) -> None:
    """The caller gets the interrupt itself: no ``ProviderError`` around it, no cause added."""
    interrupt = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt) as raised:
        embedder_raising(interrupt).embed(TEXTS)
    assert raised.value is interrupt
    assert not isinstance(raised.value, ProviderError)
    assert raised.value.__cause__ is None
    only_interrupted(tape)
