"""End to end: spanledger's Langfuse exporter through the real ``langfuse`` SDK, over a socket.

Provider calls go to the loopback stand-in; the exporter renders each call through a real
``Langfuse`` client whose OTLP/HTTP export lands on ``OtlpReceiver`` (127.0.0.1), which decodes
exactly what Langfuse's ingestion endpoint would get. Nothing leaves the machine.

Encodings worth knowing when reading the assertions (langfuse 5.x):

- ``langfuse.observation.usage_details`` is a JSON string (``'{"input": 3}'``);
- every ``langfuse.observation.metadata.<key>`` value is JSON-encoded, strings included
  (``'"cohere"'``, ``'3'``);
- ``level="ERROR"`` also sets the OTel span status to ERROR with the status message.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langfuse import Langfuse
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry.sdk.trace import TracerProvider

import spanledger
from spanledger import ErrorCategory, Event, ProviderError
from spanledger.exporters.delivery import DeliveryStats
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.pipelines import LangfusePipeline
from spanledger.providers import CohereEmbeddings, CohereReranker, JinaReranker, TEIEmbeddings
from spanledger.testing import StandIn

from .otlp_receiver import TRACES_PATH, OtlpReceiver, ReceivedSpan

PUBLIC_KEY = "pk-lf-test"
SECRET_KEY = "sk-lf-test"
SENTINEL = "SENTINEL-lf-5b81e2"

TYPE = "langfuse.observation.type"
MODEL = "langfuse.observation.model.name"
USAGE = "langfuse.observation.usage_details"
LEVEL = "langfuse.observation.level"
STATUS_MESSAGE = "langfuse.observation.status_message"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
METADATA_PREFIX = "langfuse.observation.metadata."

STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.StatusCode.STATUS_CODE_ERROR

LangfuseFactory = Callable[..., Langfuse]


# --- helpers -----------------------------------------------------------------------------------


def forget_langfuse_client(public_key: str = PUBLIC_KEY) -> None:
    """Shut down and unregister the SDK's resource manager for ``public_key``.

    Langfuse keeps one resource manager per public key per process: a second
    ``Langfuse(public_key=...)`` with the same key silently reuses the first one's base URL,
    tracer provider and exporter (and ``Langfuse.shutdown()`` does not unregister it). Each test
    therefore drops it so its client posts to its own receiver.
    """
    with LangfuseResourceManager._lock:
        stale = LangfuseResourceManager._instances.pop(public_key, None)
    if stale is not None:
        stale.shutdown()


def metadata(span: ReceivedSpan) -> dict[str, Any]:
    """The observation metadata, each value JSON-decoded as Langfuse 5.x encodes it."""
    return {
        key[len(METADATA_PREFIX) :]: json.loads(value)
        for key, value in span["attributes"].items()
        if key.startswith(METADATA_PREFIX)
    }


def usage(span: ReceivedSpan) -> dict[str, Any] | None:
    """``usage_details`` decoded, or ``None`` when the attribute is absent."""
    raw = span["attributes"].get(USAGE)
    if raw is None:
        return None
    decoded = json.loads(raw)
    assert isinstance(decoded, dict), raw
    return decoded


def span_for(spans: list[ReceivedSpan], call_id: str) -> ReceivedSpan:
    """The one observation carrying ``call_id`` in its metadata."""
    found = [s for s in spans if metadata(s).get("spanledger_call_id") == call_id]
    assert len(found) == 1, f"{len(found)} observations for call {call_id}: {spans}"
    return found[0]


def record(
    exporter: LangfuseExporter, action: Callable[[], None]
) -> tuple[spanledger.Recorder, list[Event]]:
    """Run ``action`` with a recorder holding ``exporter`` (and a list of the events)."""
    events: list[Event] = []
    recorder = spanledger.Recorder([exporter, events.append])
    with spanledger.use(recorder):
        action()
    return recorder, events


def flushed_spans(
    receiver: OtlpReceiver, recorder: spanledger.Recorder, count: int
) -> list[ReceivedSpan]:
    """Flush through the recorder (exporter -> client) and wait for ``count`` spans."""
    recorder.flush()
    spans = receiver.wait_for_spans(count, timeout=5.0)
    assert len(spans) == count, f"expected {count} spans, got {len(spans)}: {spans}"
    return spans


def embed_once(standin: StandIn, text: str) -> None:
    with CohereEmbeddings(
        "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
    ) as embedder:
        embedder.embed([text])


def everything_received(receiver: OtlpReceiver) -> str:
    """Every decoded span and every decompressed request body, as one string."""
    rendered = json.dumps(receiver.spans, default=str, ensure_ascii=False)
    bodies = "\n".join(r.body.decode("utf-8", "replace") for r in receiver.requests)
    return rendered + "\n" + bodies


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server


@pytest.fixture
def langfuse_factory(receiver: OtlpReceiver) -> Iterator[LangfuseFactory]:
    """Builds a Langfuse client bound to ``receiver`` on a private tracer provider."""
    providers: list[TracerProvider] = []

    def build(**options: Any) -> Langfuse:
        forget_langfuse_client()
        provider = TracerProvider()
        providers.append(provider)
        client = Langfuse(
            public_key=PUBLIC_KEY,
            secret_key=SECRET_KEY,
            base_url=receiver.url,
            tracer_provider=provider,
            timeout=2,
            **options,
        )
        resources = client._resources
        assert resources is not None
        assert resources.base_url == receiver.url
        assert resources.tracer_provider is provider
        return client

    try:
        yield build
    finally:
        forget_langfuse_client()  # flushes while the receiver is still up
        for provider in providers:
            provider.shutdown()


@pytest.fixture
def langfuse_client(langfuse_factory: LangfuseFactory) -> Langfuse:
    return langfuse_factory()


# --- the receiver against the bare SDK ---------------------------------------------------------


def test_receiver_decodes_an_sdk_observation(
    receiver: OtlpReceiver, langfuse_client: Langfuse
) -> None:
    observation = langfuse_client.start_observation(
        as_type="embedding",
        name="x",
        model="m",
        usage_details={"input": 3},
        metadata={"count": 2, "label": "text"},
    )
    observation.end()
    langfuse_client.flush()

    spans = receiver.wait_for_spans(1)
    assert len(spans) == 1
    span = spans[0]
    assert span["name"] == "x"
    assert span["attributes"][TYPE] == "embedding"
    assert span["attributes"][MODEL] == "m"
    assert span["attributes"][USAGE] == '{"input": 3}'
    assert span["attributes"][METADATA_PREFIX + "count"] == "2"
    assert span["attributes"][METADATA_PREFIX + "label"] == '"text"'
    assert metadata(span) == {"count": 2, "label": "text"}
    assert len(span["trace_id"]) == 32
    assert len(span["span_id"]) == 16
    assert span["parent_span_id"] is None
    assert 0 < span["start_time_unix_nano"] <= span["end_time_unix_nano"]
    assert span["status_code"] == 0
    assert span["scope_name"] == "langfuse-sdk"
    assert span["scope_attributes"] == {"public_key": PUBLIC_KEY}

    (post,) = receiver.trace_posts
    assert post.status == 200
    assert post.span_count == 1
    assert post.headers["content-type"] == "application/x-protobuf"
    assert post.headers["content-encoding"] == "gzip"
    assert post.headers["x-langfuse-public-key"] == PUBLIC_KEY
    assert post.basic_credentials() == f"{PUBLIC_KEY}:{SECRET_KEY}"
    assert receiver.other_requests == []  # tracing alone calls no other endpoint


def test_receiver_decodes_error_level_and_uncompressed_bodies(
    receiver: OtlpReceiver, langfuse_factory: LangfuseFactory
) -> None:
    client = langfuse_factory(otel_compression="none")
    observation = client.start_observation(as_type="generation", name="g", model="m")
    observation.update(level="ERROR", status_message="went wrong", output={"k": [1, 2]})
    observation.end()
    client.flush()

    (span,) = receiver.wait_for_spans(1)
    assert span["attributes"][TYPE] == "generation"
    assert span["attributes"][LEVEL] == "ERROR"
    assert span["attributes"][STATUS_MESSAGE] == "went wrong"
    assert json.loads(span["attributes"][OUTPUT]) == {"k": [1, 2]}
    assert span["status_code"] == STATUS_ERROR
    assert span["status_message"] == "went wrong"
    (post,) = receiver.trace_posts
    assert "content-encoding" not in post.headers


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()


OTLP_JSON = {
    "resourceSpans": [
        {
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "t"}}]},
            "scopeSpans": [
                {
                    "scope": {"name": "hand-made", "version": "1"},
                    "spans": [
                        {
                            "traceId": "5B8EFFF798038103D269B633813FC60C",
                            "spanId": "EEE19B7EC3C1B174",
                            "parentSpanId": "EEE19B7EC3C1B173",
                            "name": "json span",
                            "kind": 1,
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": "1544712661000000000",
                            "attributes": [
                                {"key": "s", "value": {"stringValue": "text"}},
                                {"key": "i", "value": {"intValue": "42"}},
                                {"key": "d", "value": {"doubleValue": 1.5}},
                                {"key": "b", "value": {"boolValue": True}},
                                {
                                    "key": "a",
                                    "value": {
                                        "arrayValue": {
                                            "values": [{"stringValue": "x"}, {"intValue": 7}]
                                        }
                                    },
                                },
                                {
                                    "key": "kv",
                                    "value": {
                                        "kvlistValue": {
                                            "values": [{"key": "n", "value": {"boolValue": False}}]
                                        }
                                    },
                                },
                            ],
                            "events": [
                                {
                                    "name": "ev",
                                    "timeUnixNano": "1544712660500000000",
                                    "attributes": [{"key": "e", "value": {"intValue": 1}}],
                                }
                            ],
                            "status": {"code": 2, "message": "bad"},
                        }
                    ],
                }
            ],
        }
    ]
}


def test_receiver_decodes_otlp_json_and_answers_other_paths(receiver: OtlpReceiver) -> None:
    auth = "Basic " + base64.b64encode(b"pk:sk").decode()
    status, body = _post(
        receiver.traces_url,
        gzip.compress(json.dumps(OTLP_JSON).encode()),
        {"content-type": "application/json", "content-encoding": "gzip", "authorization": auth},
    )
    assert (status, json.loads(body)) == (200, {})
    (span,) = receiver.spans
    assert span["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert span["span_id"] == "eee19b7ec3c1b174"
    assert span["parent_span_id"] == "eee19b7ec3c1b173"
    assert span["end_time_unix_nano"] - span["start_time_unix_nano"] == 1_000_000_000
    assert span["attributes"] == {
        "s": "text",
        "i": 42,
        "d": 1.5,
        "b": True,
        "a": ["x", 7],
        "kv": {"n": False},
    }
    assert span["events"] == [
        {"name": "ev", "time_unix_nano": 1544712660500000000, "attributes": {"e": 1}}
    ]
    assert (span["status_code"], span["status_message"]) == (2, "bad")
    assert span["resource_attributes"] == {"service.name": "t"}
    assert receiver.trace_posts[0].basic_credentials() == "pk:sk"

    with urllib.request.urlopen(receiver.url + "/api/public/health", timeout=5) as response:
        assert response.status == 200
        assert json.loads(response.read()) == {}
    assert [(r.method, r.path) for r in receiver.other_requests] == [("GET", "/api/public/health")]


def test_receiver_failure_mode_answers_500_and_keeps_nothing(receiver: OtlpReceiver) -> None:
    receiver.fail_traces = True
    status, _ = _post(
        receiver.traces_url, json.dumps(OTLP_JSON).encode(), {"content-type": "application/json"}
    )
    assert status == 500
    (post,) = receiver.trace_posts
    assert (post.status, post.span_count) == (500, 1)
    assert receiver.spans == []

    receiver.fail_traces = False
    status, _ = _post(
        receiver.traces_url, json.dumps(OTLP_JSON).encode(), {"content-type": "application/json"}
    )
    assert status == 200
    assert len(receiver.spans) == 1
    assert TRACES_PATH == "/api/public/otel/v1/traces"


# --- the exporter ------------------------------------------------------------------------------


def test_embeddings_become_embedding_observations_with_usage(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)

    def calls() -> None:
        with (
            spanledger.request("req-7"),
            CohereEmbeddings(
                "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
            ) as embedder,
        ):
            embedder.embed(["alpha beta gamma delta", "epsilon"], input_type="query")

    recorder, events = record(exporter, calls)
    (event,) = events
    assert isinstance(event, spanledger.EmbeddingEvent)
    assert event.usage is not None
    assert (event.usage.input_tokens or 0) > 0

    spans = flushed_spans(receiver, recorder, 2)  # the request's observation and the call's
    span = span_for(spans, event.call_id)
    [request] = [s for s in spans if s["name"] == "request"]
    assert request["parent_span_id"] is None
    assert request["attributes"][TYPE] == "span"
    assert span["parent_span_id"] == request["span_id"]  # one Langfuse trace per request
    assert span["trace_id"] == request["trace_id"]
    attributes = span["attributes"]
    assert attributes[TYPE] == "embedding"
    assert attributes[MODEL] == "embed-v4.0"
    assert "embed-v4.0" in span["name"]
    assert usage(span) == {"input": event.usage.input_tokens}
    assert attributes.get(LEVEL, "DEFAULT") == "DEFAULT"
    assert span["status_code"] != STATUS_ERROR
    assert OUTPUT not in attributes
    assert INPUT not in attributes
    meta = metadata(span)
    assert meta["spanledger_call_id"] == event.call_id
    assert meta["provider"] == "cohere"
    assert meta["operation"] == "embeddings"
    assert meta["input_count"] == 2
    assert meta["input_type"] == "query"
    assert meta["request_id"] == "req-7"
    assert meta["dimensions"] == event.dimensions == 16
    # the observation was opened when the call started, so it spans the call
    started_ns = int(event.started_at.timestamp() * 1e9)
    assert abs(span["start_time_unix_nano"] - started_ns) < 1_000_000_000
    assert span["end_time_unix_nano"] - span["start_time_unix_nano"] >= 0


def test_unreported_usage_is_absent_not_zero(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)

    def calls() -> None:
        with TEIEmbeddings("bge", base_url=standin.base_url("tei")) as tei:
            tei.embed(["no usage on this wire"])
        with CohereEmbeddings(
            "usage-missing", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as cohere:
            cohere.embed(["usage omitted by the provider"])
        with CohereReranker(
            "usage-missing", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as reranker:
            reranker.rerank("q", ["d1", "d2"])

    recorder, events = record(exporter, calls)
    assert len(events) == 3
    assert all(getattr(e, "usage", "?") is None for e in events)
    spans = flushed_spans(receiver, recorder, 3)
    models = []
    for event in events:
        span = span_for(spans, event.call_id)
        models.append(span["attributes"][MODEL])
        reported = usage(span)
        # "not reported" must not read as "0 tokens": absent, or an empty object at most
        assert reported in (None, {}), reported
        assert 0 not in (reported or {}).values()
    assert models == ["bge", "usage-missing", "usage-missing"]


def test_reranks_become_generations_with_their_billing_units(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)

    def calls() -> None:
        with CohereReranker(
            "rerank-v3.5", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as cohere:
            cohere.rerank("which fruit", ["apple fruit", "car", "banana fruit"], top_k=2)
        with JinaReranker(
            "jina-reranker", base_url=standin.base_url("jina"), api_key="test-key"
        ) as jina:
            jina.rerank("which fruit", ["apple fruit", "car"])

    recorder, events = record(exporter, calls)
    cohere_event, jina_event = events
    assert isinstance(cohere_event, spanledger.RerankEvent)
    assert isinstance(jina_event, spanledger.RerankEvent)
    assert jina_event.usage is not None
    assert jina_event.usage.input_tokens
    spans = flushed_spans(receiver, recorder, 2)

    cohere_span = span_for(spans, cohere_event.call_id)
    assert cohere_span["attributes"][TYPE] == "generation"
    assert cohere_span["attributes"][MODEL] == "rerank-v3.5"
    assert usage(cohere_span) == {"search_units": 1}
    meta = metadata(cohere_span)
    assert meta["operation"] == "rerank"
    assert meta["provider"] == "cohere"
    assert meta["document_count"] == 3
    assert meta["query_length"] == cohere_event.query_length
    assert meta["result_count"] == 2
    assert meta["top_k"] == 2

    jina_span = span_for(spans, jina_event.call_id)
    assert jina_span["attributes"][TYPE] == "generation"
    assert jina_span["attributes"][MODEL] == "jina-reranker"
    assert usage(jina_span) == {"input": jina_event.usage.input_tokens}
    assert metadata(jina_span)["document_count"] == 2
    assert metadata(jina_span)["result_count"] == 2
    for span in (cohere_span, jina_span):
        assert OUTPUT not in span["attributes"]
        assert span["attributes"].get(LEVEL, "DEFAULT") == "DEFAULT"


def test_a_failed_call_is_an_error_observation(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)
    caught: list[ProviderError] = []

    def calls() -> None:
        with CohereReranker(
            "fail-429", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as reranker:
            try:
                reranker.rerank("q", ["d1", "d2"])
            except ProviderError as error:
                caught.append(error)

    recorder, events = record(exporter, calls)
    assert [e.category for e in caught] == [ErrorCategory.RATE_LIMIT]
    (event,) = events
    assert isinstance(event, spanledger.RerankFailedEvent)

    span = span_for(flushed_spans(receiver, recorder, 1), event.call_id)
    attributes = span["attributes"]
    assert attributes[TYPE] == "generation"
    assert attributes[LEVEL] == "ERROR"
    assert attributes[STATUS_MESSAGE] == "provider_rate_limit"
    assert OUTPUT not in attributes
    assert usage(span) in (None, {})  # nothing was billed, nothing reported
    assert span["status_code"] == STATUS_ERROR
    assert span["status_message"] == "provider_rate_limit"
    meta = metadata(span)
    assert meta["status_code"] == 429
    assert meta["document_count"] == 2
    assert "result_count" not in meta


def test_no_payload_leaves_the_process_by_default(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)
    failures: list[ProviderError] = []

    def calls() -> None:
        with CohereEmbeddings(
            "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as embedder:
            embedder.embed([f"passage {SENTINEL}", SENTINEL], extras={"note": SENTINEL})
        with TEIEmbeddings("bge", base_url=standin.base_url("tei")) as tei:
            tei.embed([SENTINEL])
        with CohereReranker(
            "rerank-v3.5", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as cohere:
            cohere.rerank(f"query {SENTINEL}", [f"doc {SENTINEL}", "other"])
        with JinaReranker(
            "jina-reranker", base_url=standin.base_url("jina"), api_key="test-key"
        ) as jina:
            result = jina.rerank(SENTINEL, [f"doc {SENTINEL}"], return_documents=True)
            assert result.results[0].document == f"doc {SENTINEL}"  # the caller still gets it
        with CohereReranker(
            "fail-429", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as failing:
            try:
                failing.rerank(f"query {SENTINEL}", [SENTINEL])
            except ProviderError as error:
                failures.append(error)

    recorder, events = record(exporter, calls)
    assert len(events) == 5
    assert len(failures) == 1
    spans = flushed_spans(receiver, recorder, 5)
    for span in spans:
        assert INPUT not in span["attributes"]
        assert OUTPUT not in span["attributes"]
    received = everything_received(receiver)
    assert "spanledger_call_id" in received  # the haystack is the real one
    assert SENTINEL not in received


def test_capture_payload_sends_inputs_and_results(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client, capture_payload=True)

    def calls() -> None:
        with CohereEmbeddings(
            "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as embedder:
            embedder.embed([f"passage {SENTINEL}"])
        with JinaReranker(
            "jina-reranker", base_url=standin.base_url("jina"), api_key="test-key"
        ) as jina:
            jina.rerank(f"query {SENTINEL}", [f"doc {SENTINEL}", "other"])

    recorder, events = record(exporter, calls)
    embed_event, rerank_event = events
    spans = flushed_spans(receiver, recorder, 2)

    embed_span = span_for(spans, embed_event.call_id)
    assert json.loads(embed_span["attributes"][INPUT]) == [f"passage {SENTINEL}"]
    assert OUTPUT not in embed_span["attributes"]  # vectors are never rendered

    rerank_span = span_for(spans, rerank_event.call_id)
    rendered_input = json.loads(rerank_span["attributes"][INPUT])
    assert rendered_input["query"] == f"query {SENTINEL}"
    assert rendered_input["documents"] == [f"doc {SENTINEL}", "other"]
    rendered_output = json.loads(rerank_span["attributes"][OUTPUT])
    assert [r["index"] for r in rendered_output] == [0, 1]


@pytest.mark.parametrize("delay", [0.0, 1.5], ids=["fast-500", "slow-500"])
def test_a_failing_backend_never_slows_or_breaks_calls(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn, delay: float
) -> None:
    """Export happens off the calling thread: a backend answering 500 (after ``delay``
    seconds) costs the calls nothing, and flush/shutdown stay bounded by the client timeout."""
    receiver.fail_traces = True
    receiver.traces_delay = delay
    exporter = LangfuseExporter(client=langfuse_client)
    durations: list[float] = []

    def timed(call: Callable[[], object]) -> None:
        t0 = time.perf_counter()
        call()
        durations.append(time.perf_counter() - t0)

    def calls() -> None:
        with (
            CohereEmbeddings(
                "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
            ) as embedder,
            TEIEmbeddings("bge", base_url=standin.base_url("tei")) as tei,
            CohereReranker(
                "rerank-v3.5", base_url=standin.base_url("cohere"), api_key="test-key"
            ) as cohere,
            JinaReranker(
                "jina-reranker", base_url=standin.base_url("jina"), api_key="test-key"
            ) as jina,
        ):
            for _ in range(3):
                timed(lambda: embedder.embed(["a", "b"]))
                timed(lambda: tei.embed(["a"]))
                timed(lambda: cohere.rerank("q", ["d"]))
                timed(lambda: jina.rerank("q", ["d"]))

    recorder, events = record(exporter, calls)
    assert len(events) == 12
    assert max(durations) < 1.0, durations

    t0 = time.perf_counter()
    recorder.flush()
    assert time.perf_counter() - t0 < 5.0
    assert receiver.wait_for(lambda r: len(r.trace_posts) >= 1, timeout=5.0)
    assert all(post.status == 500 for post in receiver.trace_posts)
    assert sum(post.span_count for post in receiver.trace_posts) == 12  # it did try
    assert receiver.spans == []
    stats = recorder.stats
    assert [(s.delivered, s.failed) for s in stats.values()] == [(12, 0), (12, 0)]

    # the backend comes back: later calls get through
    receiver.fail_traces = False
    receiver.traces_delay = 0.0
    recorder, later = record(exporter, lambda: embed_once(standin, "again"))
    recorder.flush()
    (span,) = receiver.wait_for_spans(1)
    assert metadata(span)["spanledger_call_id"] == later[0].call_id

    # and shutting down against a failing backend is bounded too
    receiver.fail_traces = True
    receiver.traces_delay = delay
    recorder, lost = record(exporter, lambda: embed_once(standin, "lost"))
    assert len(lost) == 1
    t0 = time.perf_counter()
    recorder.shutdown()
    assert time.perf_counter() - t0 < 5.0
    assert receiver.trace_posts[-1].status == 500


def test_configured_exporter_counts_spans_a_failing_backend_lost(
    receiver: OtlpReceiver, standin: StandIn
) -> None:
    """``configure()`` builds its own client whose span exporter counts deliveries."""
    forget_langfuse_client()
    recorder = spanledger.configure(
        environ={
            "LANGFUSE_PUBLIC_KEY": PUBLIC_KEY,
            "LANGFUSE_SECRET_KEY": SECRET_KEY,
            "LANGFUSE_HOST": receiver.url,
        },
        install=False,
    )
    (exporter,) = recorder.sinks
    assert isinstance(exporter, LangfuseExporter)
    resources = exporter.client._resources
    assert resources is not None
    try:
        receiver.fail_traces = True
        with spanledger.use(recorder):
            embed_once(standin, "lost")
        recorder.flush()
        assert exporter.delivery == DeliveryStats("langfuse", exported=0, failed=1, produced=1)

        receiver.fail_traces = False
        with spanledger.use(recorder):
            embed_once(standin, "delivered")
        recorder.flush()
        assert exporter.delivery == DeliveryStats("langfuse", exported=1, failed=1, produced=2)
        (span,) = receiver.wait_for_spans(1)
        assert span["attributes"][TYPE] == "embedding"
        assert [p.basic_credentials() for p in receiver.trace_posts] == [
            f"{PUBLIC_KEY}:{SECRET_KEY}"
        ] * 2
    finally:
        recorder.shutdown()
        pipeline = exporter._pipeline
        assert isinstance(pipeline, LangfusePipeline)
        pipeline.shutdown(time.monotonic() + 2)  # as at exit: the client closed for good
        assert resources._shutdown
        pipeline.tracer_provider.shutdown()


def test_posts_carry_the_langfuse_credentials(
    receiver: OtlpReceiver, langfuse_client: Langfuse, standin: StandIn
) -> None:
    exporter = LangfuseExporter(client=langfuse_client)

    def calls() -> None:
        with CohereEmbeddings(
            "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
        ) as embedder:
            embedder.embed(["x"])

    recorder, _ = record(exporter, calls)
    flushed_spans(receiver, recorder, 1)
    posts = receiver.trace_posts
    assert posts
    for post in posts:
        assert post.authorization is not None
        assert post.authorization.startswith("Basic ")
        assert post.basic_credentials() == "pk-lf-test:sk-lf-test"
        assert post.headers["x-langfuse-public-key"] == PUBLIC_KEY
    assert SECRET_KEY not in everything_received(receiver)
