"""instrument / uninstrument: same client back, idempotent, reversible, never in the way."""

from __future__ import annotations

import functools
import gc
import subprocess
import sys
import textwrap
import weakref
from typing import Any

import httpx2
import openai
import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from voyageai.api_resources.api_requestor import APIRequestor
from voyageai.local.model_registry import SUPPORTED_MODELS

import spanledger
from spanledger import EmbeddingFailedEvent, ErrorCategory, Recorder
from spanledger.capture import sdk_calls as _capture
from spanledger.exporters.otel import OtelExporter
from spanledger.integrations.voyageai import client as voyage_client
from spanledger.recording import call as _recording
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, OP_IDS, OPS, TEXTS, Op, Tape, tokens


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_instrument_returns_the_client_and_twice_changes_nothing(
    op: Op, standin: StandIn, tape: Tape
) -> None:
    client = op.client(standin)

    assert spanledger.instrument(client) is client
    assert spanledger.instrument(client) is client
    assert spanledger.instrumentation.is_instrumented(client)
    op.call(client, "model-a", TEXTS)

    assert len(tape.events) == 1


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_uninstrument_restores_the_client(op: Op, standin: StandIn, tape: Tape) -> None:
    client = op.client(standin)
    owner = client.embeddings if op.provider == "openai" else client
    before = dict(vars(owner))
    spanledger.instrument(client)
    kept = op.call  # a wrapper captured while instrumented must go quiet too
    stale = client.embeddings.create if op.provider == "openai" else None

    assert spanledger.uninstrument(client) is client
    assert spanledger.uninstrument(client) is client
    op.call(client, "model-a", TEXTS)
    kept(client, "model-a", TEXTS)
    if stale is not None:
        stale(model="model-a", input=TEXTS)

    assert tape.events == []
    assert vars(owner) == before
    assert not spanledger.instrumentation.is_instrumented(client)
    spanledger.instrument(client)
    op.call(client, "model-a", TEXTS)
    assert len(tape.events) == 1


def test_hooks_on_a_shared_http_client_stay_until_its_last_user_leaves(
    standin: StandIn,
) -> None:
    shared = httpx2.Client()
    first = openai.OpenAI(api_key=API_KEY, base_url=standin.url, http_client=shared)
    second = openai.OpenAI(api_key=API_KEY, base_url=standin.url, http_client=shared)
    hooks_before = {stage: list(hooks) for stage, hooks in shared.event_hooks.items()}

    attributes_before = dict(vars(shared))

    spanledger.instrument(first)
    spanledger.instrument(second)
    assert [len(hooks) for hooks in shared.event_hooks.values()] == [1, 1]
    assert "send" in vars(shared)
    spanledger.uninstrument(first)
    assert [len(hooks) for hooks in shared.event_hooks.values()] == [1, 1]
    assert "send" in vars(shared)
    spanledger.uninstrument(second)

    assert shared.event_hooks == hooks_before
    assert vars(shared).keys() == attributes_before.keys()
    assert "send" not in vars(shared)


def test_a_send_someone_else_wrapped_is_kept_and_restored(standin: StandIn, tape: Tape) -> None:
    http = httpx2.Client()
    original = http.send
    sent: list[object] = []

    def theirs(request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(request)
        return original(request, *args, **kwargs)

    vars(http)["send"] = theirs
    client = openai.OpenAI(api_key=API_KEY, base_url=f"{standin.url}/openai/v1", http_client=http)

    spanledger.instrument(client)
    client.embeddings.create(model="m", input=TEXTS)
    spanledger.uninstrument(client)

    assert len(sent) == 1
    assert len(tape.events) == 1
    assert vars(http)["send"] is theirs


def test_a_send_wrapped_on_top_of_ours_survives_uninstrument(standin: StandIn, tape: Tape) -> None:
    http = httpx2.Client()
    client = openai.OpenAI(api_key=API_KEY, base_url=f"{standin.url}/openai/v1", http_client=http)
    spanledger.instrument(client)
    ours = http.send
    sent: list[object] = []

    @functools.wraps(ours)  # copies whatever marks ours onto theirs
    def theirs(request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(request)
        return ours(request, *args, **kwargs)

    vars(http)["send"] = theirs
    spanledger.uninstrument(client)
    client.embeddings.create(model="m", input=TEXTS)

    assert vars(http)["send"] is theirs
    assert len(sent) == 1
    assert tape.events == []


def test_a_class_patched_after_instrumenting_is_honoured(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = spanledger.instrument(
        openai.OpenAI(api_key=API_KEY, base_url=f"{standin.url}/openai/v1")
    )
    original = httpx2.Client.send
    sent: list[object] = []

    def patched(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(request)
        return original(self, request, *args, **kwargs)

    monkeypatch.setattr(httpx2.Client, "send", patched)
    client.embeddings.create(model="m", input=TEXTS)

    assert len(sent) == 1
    assert len(tape.events) == 1


def test_the_voyage_requestor_is_restored_by_the_last_client(standin: StandIn) -> None:
    gc.collect()  # clients earlier tests instrumented and dropped release it too,
    spanledger.uninstrument(object())  # once the next (un)instrument runs the releases
    request, arequest = APIRequestor.request, APIRequestor.arequest
    assert request.__qualname__ == "APIRequestor.request"
    first = spanledger.instrument(OPS[3].client(standin))
    second = spanledger.instrument(OPS[3].client(standin, is_async=True))
    assert APIRequestor.request is not request

    spanledger.uninstrument(first)
    assert APIRequestor.request is not request
    del second
    gc.collect()
    assert APIRequestor.request is not request  # queued by the collector, not yet run
    spanledger.uninstrument(first)

    assert (APIRequestor.request, APIRequestor.arequest) == (request, arequest)


def test_a_dropped_clients_http_client_is_not_kept_alive(standin: StandIn) -> None:
    client = spanledger.instrument(
        openai.OpenAI(api_key=API_KEY, base_url=standin.url, http_client=httpx2.Client())
    )
    http_client = weakref.ref(client._client)

    del client
    gc.collect()

    assert http_client() is None


def test_a_client_collected_while_another_is_being_instrumented_does_not_deadlock() -> None:
    script = textwrap.dedent(
        """
        import gc, weakref
        import httpx2, openai
        import spanledger
        from spanledger.capture import http_hooks as _hooks

        class CollectingOnWrite(weakref.WeakKeyDictionary):
            def __setitem__(self, key, value):
                gc.collect()  # a collection that falls inside the hooks' locked section
                super().__setitem__(key, value)

        _hooks._users = CollectingOnWrite()
        gc.disable()
        dropped = openai.OpenAI(api_key="k", http_client=httpx2.Client())
        spanledger.instrument(dropped)
        dropped.cycle = dropped  # only the cyclic collector frees it
        shared = dropped._client
        del dropped
        kept = spanledger.instrument(openai.OpenAI(api_key="k", http_client=httpx2.Client()))
        spanledger.uninstrument(kept)
        print(len(shared.event_hooks["request"]), len(shared.event_hooks["response"]))
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )

    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.split() == ["0", "0"]  # and the dropped client's hooks came off


@pytest.mark.parametrize(
    "client",
    [
        object(),
        "openai",
        openai.OpenAI(api_key=API_KEY).embeddings,
    ],
    ids=["object", "str", "openai-resource"],
)
def test_unsupported_objects_are_refused(client: Any) -> None:
    with pytest.raises(TypeError, match="supports"):
        spanledger.instrument(client)
    assert spanledger.uninstrument(client) is client


def test_without_a_recorder_nothing_is_recorded(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []

    class Counting(_capture.SdkCall):
        def __init__(self, *args: Any) -> None:
            started.append(self)
            super().__init__(*args)

    monkeypatch.setattr(_capture, "SdkCall", Counting)
    client = spanledger.instrument(OPS[0].client(standin))

    assert not spanledger.get_recorder().active
    result = client.embeddings.create(model="model-a", input=TEXTS)

    assert len(result.data) == 3
    assert started == []


def test_a_failing_sink_never_reaches_the_caller(standin: StandIn) -> None:
    def explode(event: object) -> None:
        raise RuntimeError("sink down")

    recorder = Recorder([explode])
    client = spanledger.instrument(OPS[2].client(standin))
    with spanledger.use(recorder):
        result = client.rerank(model="m", query="q", documents=TEXTS)

    assert len(result.results) == 3
    assert next(iter(recorder.stats.values())).failed == 1


def test_an_event_that_cannot_be_built_is_logged_and_the_call_still_ends(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fields: Any) -> Any:
        raise ValueError("cannot build")

    monkeypatch.setattr(_recording, "_embedding_event", broken)
    client = spanledger.instrument(OPS[1].client(standin))

    with structlog.testing.capture_logs() as logs:
        result = client.embed(model="m", texts=TEXTS, input_type="search_query")

    assert len(result.embeddings.float_ or []) == 3
    assert [kind for kind, _ in tape.log] == ["start", "event"]
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "unrecordable_outcome",
    )
    assert {entry["event"] for entry in logs} == {"event_build_failed"}
    assert logs[0]["error_type"] == "ValueError"


def test_the_span_is_live_during_the_http_attempt(standin: StandIn) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    recorder = Recorder([OtelExporter(tracer_provider=provider, enable_metrics=False)])
    client = spanledger.instrument(OPS[0].client(standin))
    current: list[Any] = []
    client._client.event_hooks["request"].append(
        lambda request: current.append(trace.get_current_span())
    )

    with spanledger.use(recorder), provider.get_tracer("test").start_as_current_span("turn"):
        client.embeddings.create(model="model-a", input=TEXTS)
        with pytest.raises(openai.RateLimitError):
            client.embeddings.create(model="fail-429", input=TEXTS)

    ok, limited, turn = spans.get_finished_spans()
    assert [span.name for span in (ok, limited, turn)] == [
        "embeddings model-a",
        "embeddings fail-429",
        "turn",
    ]
    assert current[0].get_span_context() == ok.get_span_context()
    assert ok.parent is not None
    assert ok.parent.span_id == turn.context.span_id
    assert ok.attributes is not None
    assert ok.attributes["gen_ai.usage.input_tokens"] == sum(tokens(text) for text in TEXTS)
    assert limited.status.status_code is StatusCode.ERROR
    assert limited.attributes is not None
    assert limited.attributes["error.type"] == "provider_rate_limit"


def test_voyage_local_models_are_not_provider_calls() -> None:
    local = next(iter(SUPPORTED_MODELS))

    assert voyage_client._embed_facts((None, None), (["x"],), {"model": local}) is None
    assert voyage_client._embed_facts((None, None), (["x"], "voyage-3"), {}) is not None


def test_an_install_that_fails_halfway_leaves_the_client_as_it_was(standin: StandIn) -> None:
    client = OPS[0].client(standin)
    del client._client  # the SDK's http client is where the hooks go

    with pytest.raises(AttributeError):
        spanledger.instrument(client)

    assert "create" not in vars(client.embeddings)
    assert not spanledger.instrumentation.is_instrumented(client)


def test_the_function_and_the_package_are_two_names() -> None:
    package = sys.modules["spanledger.instrumentation"]

    assert {"instrument", "uninstrument", "record_embedding", "record_rerank"} <= set(
        spanledger.__all__
    )
    assert spanledger.instrumentation is package
    assert spanledger.instrument is package.instrument
    assert spanledger.uninstrument is package.uninstrument
    assert callable(spanledger.instrument)
    assert not hasattr(spanledger.instrument, "transport")
    assert "instrumentation" in spanledger.__all__
