"""spanledger beside the application's own Langfuse client, through the real ``langfuse`` SDK.

The application traces with OpenTelemetry: its global tracer provider has an in-memory span
exporter (standing for its Datadog or Jaeger) and its Langfuse client, built the SDK's default
way, sits on that provider and exports to a Langfuse endpoint of its own (``app_langfuse``).
spanledger exports to another loopback endpoint (``receiver``). Both use the same public key,
which the SDK would otherwise share one client's resources under.

- A client spanledger builds from keys is isolated in either order of construction: none of
  its observations (nor their payload) reach the application's provider, the application's
  client keeps its own provider, and spanledger's observations reach spanledger's endpoint,
  counted.
- A client the caller passes is used as it is: flushed when asked, never shut down, and
  nothing spanledger builds for the same key flushes or closes it.
- Where the SDK allows no isolation, spanledger's observations carry no payload, even with
  ``capture_payload=True``, and one log line says why.
"""

from __future__ import annotations

import atexit
import json
import time
import uuid
from collections import UserDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import structlog
from langfuse import Langfuse, get_client, observe
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import spanledger
from spanledger import Event
from spanledger.exporters.delivery import DeliveryStats
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.pipelines import LangfusePipeline
from spanledger.providers import CohereEmbeddings
from spanledger.testing import StandIn

from .otlp_receiver import OtlpReceiver, ReceivedSpan

SECRET_KEY = "sk-lf-coexist"
SENTINEL = "SENTINEL-lf-coexist-9d41"
CALL_ID = "langfuse.observation.metadata.spanledger_call_id"
INPUT = "langfuse.observation.input"
APP_OBSERVATION = "app answer"


# --- the application ---------------------------------------------------------------------------


@dataclass
class App:
    """The application's tracing: its global provider, what its exporter got, its Langfuse
    client (once built) and the endpoint that client exports to."""

    provider: TracerProvider
    exported: InMemorySpanExporter
    langfuse_endpoint: OtlpReceiver
    public_key: str
    client: Langfuse | None = None

    def build_client(self) -> Langfuse:
        """The application's Langfuse client, the SDK's default way: on the global provider."""
        self.client = Langfuse(
            public_key=self.public_key,
            secret_key=SECRET_KEY,
            base_url=self.langfuse_endpoint.url,
            timeout=2,
        )
        return self.client

    def observe(self) -> None:
        """One observation of the application's own, flushed."""
        assert self.client is not None
        self.client.start_observation(name=APP_OBSERVATION, as_type="generation").end()
        self.client.flush()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exported.get_finished_spans())


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    """spanledger's Langfuse endpoint."""
    with OtlpReceiver() as server:
        yield server


@pytest.fixture
def app() -> Iterator[App]:
    """A global tracer provider set by the application, with an in-memory exporter, and no
    Langfuse client in the SDK's registry but the application's (other tests leave theirs);
    both restored afterwards, the application's client shut down."""
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    registry = LangfuseResourceManager._instances
    with LangfuseResourceManager._lock:
        others = dict(registry)
        registry.clear()
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    trace.set_tracer_provider(provider)
    with OtlpReceiver() as endpoint:
        application = App(provider, exported, endpoint, f"pk-lf-coexist-{uuid.uuid4().hex}")
        try:
            yield application
        finally:
            with LangfuseResourceManager._lock:
                resources = registry.pop(application.public_key, None)
                registry.clear()
                registry.update(others)
            if resources is not None:
                resources.shutdown()
            provider.shutdown()
            trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved


# --- spanledger --------------------------------------------------------------------------------


@dataclass
class Recorded:
    """A recorder of spanledger's, its Langfuse exporter and the events it recorded."""

    recorder: spanledger.Recorder
    exporter: LangfuseExporter
    events: list[Event]

    def embed(self, standin: StandIn) -> Event:
        """One embedding call, the sentinel in its input; its event."""
        with (
            spanledger.use(self.recorder),
            CohereEmbeddings(
                "embed-v4.0", base_url=standin.base_url("cohere"), api_key="test-key"
            ) as embedder,
        ):
            embedder.embed([f"passage {SENTINEL}"])
        return self.events[-1]

    def close(self) -> None:
        """Shut the recorder down and close the pipeline spanledger built for good, as at exit,
        then its tracer provider (else their threads restart in every later test's forks)."""
        self.recorder.shutdown()
        pipeline = self.exporter._pipeline
        if isinstance(pipeline, LangfusePipeline):
            pipeline.shutdown(time.monotonic() + 2)
            pipeline.tracer_provider.shutdown()


def recorded(**settings: Any) -> Recorded:
    """``spanledger.configure(**settings)``, payload on, with the events kept."""
    events: list[Event] = []
    recorder = spanledger.configure(
        capture_payload=True, install=False, sinks=[events.append], **settings
    )
    (exporter,) = [sink for sink in recorder.sinks if isinstance(sink, LangfuseExporter)]
    return Recorded(recorder, exporter, events)


def from_keys(app: App, endpoint: OtlpReceiver) -> Recorded:
    """spanledger configured with the application's keys, exporting to ``endpoint``."""
    return recorded(
        environ={
            "LANGFUSE_PUBLIC_KEY": app.public_key,
            "LANGFUSE_SECRET_KEY": SECRET_KEY,
            "LANGFUSE_HOST": endpoint.url,
        }
    )


def call_ids(spans: list[ReadableSpan]) -> list[str]:
    """The call ids of spanledger's observations among ``spans``."""
    ids = [(span.attributes or {}).get(CALL_ID) for span in spans]
    return [json.loads(str(found)) for found in ids if found is not None]


def names(spans: list[ReceivedSpan]) -> list[str]:
    return [span["name"] for span in spans]


def every_text(app: App, *endpoints: OtlpReceiver) -> str:
    """Every span the application's provider exported, and everything each endpoint received."""
    parts = [
        f"{span.name} {dict(span.attributes or {})!r} {span.status.description}"
        for span in app.spans()
    ]
    for endpoint in endpoints:
        parts.append(json.dumps(endpoint.spans, default=str, ensure_ascii=False))
        parts.extend(r.body.decode("utf-8", "replace") for r in endpoint.requests)
    return "\n".join(parts)


def assert_isolated(app: App, receiver: OtlpReceiver, ours: Recorded) -> None:
    """spanledger's observation reached its endpoint only, payload and all, counted; the
    application's reached the application's provider and endpoint only; the application's
    client is still the one the SDK hands out."""
    assert [span.name for span in app.spans()] == [APP_OBSERVATION]
    assert SENTINEL not in every_text(app, app.langfuse_endpoint)
    assert names(app.langfuse_endpoint.wait_for_spans(1)) == [APP_OBSERVATION]

    (event,) = ours.events
    (span,) = receiver.wait_for_spans(1)
    assert json.loads(span["attributes"][CALL_ID]) == event.call_id
    assert json.loads(span["attributes"][INPUT]) == [f"passage {SENTINEL}"]  # isolated: opted in
    assert ours.exporter.delivery == DeliveryStats("langfuse", exported=1, failed=0, produced=1)

    assert app.client is not None
    assert app.client._resources is not None
    assert app.client._resources.tracer_provider is app.provider  # never rebound
    assert get_client()._resources is app.client._resources  # one client in the registry


# --- a client spanledger builds from keys ------------------------------------------------------


def test_built_after_the_apps_client_it_stays_off_the_apps_provider(
    app: App, receiver: OtlpReceiver, standin: StandIn
) -> None:
    app.build_client()
    ours = from_keys(app, receiver)
    try:
        ours.embed(standin)
        app.observe()
        ours.recorder.flush()
        assert_isolated(app, receiver, ours)
    finally:
        ours.close()


def test_built_before_the_apps_client_it_does_not_capture_it(
    app: App, receiver: OtlpReceiver, standin: StandIn
) -> None:
    ours = from_keys(app, receiver)
    try:
        app.build_client()
        ours.embed(standin)
        app.observe()
        ours.recorder.flush()
        assert_isolated(app, receiver, ours)
    finally:
        ours.close()


def test_pipelines_for_one_public_key_on_two_hosts_each_reach_their_own(
    app: App, receiver: OtlpReceiver, standin: StandIn
) -> None:
    """The SDK alone would give the second the first one's resources, host included."""
    with OtlpReceiver() as other:
        first, second = from_keys(app, receiver), from_keys(app, other)
        try:
            first_event, second_event = first.embed(standin), second.embed(standin)
            first.recorder.flush()
            second.recorder.flush()
            (first_span,) = receiver.wait_for_spans(1)
            (second_span,) = other.wait_for_spans(1)
            assert json.loads(first_span["attributes"][CALL_ID]) == first_event.call_id
            assert json.loads(second_span["attributes"][CALL_ID]) == second_event.call_id
        finally:
            first.close()
            second.close()


def test_a_pipeline_for_another_key_leaves_the_apps_get_client_alone(
    app: App, receiver: OtlpReceiver
) -> None:
    """The SDK hands ``@observe`` and ``get_client()`` a disabled client once it lists two:
    spanledger's is never listed, so the application's keeps tracing."""
    app.build_client()
    ours = recorded(
        environ={
            "LANGFUSE_PUBLIC_KEY": f"{app.public_key}-spanledger",
            "LANGFUSE_SECRET_KEY": SECRET_KEY,
            "LANGFUSE_HOST": receiver.url,
        }
    )
    try:

        @observe(name=APP_OBSERVATION)
        def answer() -> str:
            return "an answer"

        answer()
        assert app.client is not None
        assert get_client()._resources is app.client._resources
        assert [span.name for span in app.spans()] == [APP_OBSERVATION]
    finally:
        ours.close()


# --- a client the caller passes ----------------------------------------------------------------


class Calls:
    """Counts the calls of some methods of one object, each still doing its work."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: Any, *methods: str) -> None:
        self.counts = dict.fromkeys(methods, 0)
        for method in methods:
            monkeypatch.setattr(target, method, self._counting(method, getattr(target, method)))

    def _counting(self, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[method] += 1
            return original(*args, **kwargs)

        return counted


def test_a_passed_client_is_flushed_when_asked_and_never_closed(
    app: App,
    receiver: OtlpReceiver,
    standin: StandIn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller's client takes spanledger's observations as it is; a flush of spanledger's
    flushes it, a shutdown flushes it and closes nothing; a pipeline spanledger builds for the
    same key, flushed and closed for good, touches neither the client nor its provider."""
    client = app.build_client()
    resources = client._resources
    assert resources is not None
    client_calls = Calls(monkeypatch, client, "flush", "shutdown")
    provider_calls = Calls(monkeypatch, app.provider, "force_flush", "shutdown")

    given = recorded(langfuse=client, environ={})
    given.embed(standin)
    given.recorder.flush()
    assert client_calls.counts == {"flush": 1, "shutdown": 0}
    assert call_ids(app.spans()) == [given.events[0].call_id]  # the caller's client, as it is

    built = from_keys(app, receiver)
    built.embed(standin)
    flushes_before = provider_calls.counts["force_flush"]
    built.recorder.flush()
    built.close()
    assert provider_calls.counts == {"force_flush": flushes_before, "shutdown": 0}

    given.recorder.shutdown()
    assert client_calls.counts == {"flush": 2, "shutdown": 0}
    assert provider_calls.counts["shutdown"] == 0
    assert resources._shutdown is False
    assert LangfuseResourceManager._instances[app.public_key] is resources
    assert client._otel_tracer is resources.tracer
    app.observe()  # the caller's client still works, on its own provider and endpoint
    assert APP_OBSERVATION in [span.name for span in app.spans()]
    assert app.langfuse_endpoint.wait_for(lambda endpoint: APP_OBSERVATION in names(endpoint.spans))


# --- where the SDK allows no isolation ---------------------------------------------------------


def _registry_keyed_by_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK whose registry files each client under its key's text."""
    original = LangfuseResourceManager.__new__

    def by_text(cls: type[LangfuseResourceManager], **options: Any) -> LangfuseResourceManager:
        options["public_key"] = str(options["public_key"])
        return original(cls, **options)

    monkeypatch.setattr(LangfuseResourceManager, "__new__", by_text)


def _registry_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK whose registry is not a dict spanledger knows to look in."""
    monkeypatch.setattr(
        LangfuseResourceManager, "_instances", UserDict(LangfuseResourceManager._instances)
    )


@pytest.mark.parametrize(
    ("sdk", "reason"),
    [(_registry_keyed_by_text, "handed back"), (_registry_elsewhere, "no client registry")],
    ids=["keyed-by-text", "registry-elsewhere"],
)
def test_without_isolation_no_payload_leaves_and_one_line_says_why(
    app: App,
    receiver: OtlpReceiver,
    standin: StandIn,
    sdk: Callable[[pytest.MonkeyPatch], None],
    reason: str,
) -> None:
    """The observations go the shared way the SDK gave, without their payload; the shared
    resources keep their own exit handler and outlive spanledger's pipeline."""
    resources = app.build_client()._resources
    assert resources is not None
    with pytest.MonkeyPatch.context() as monkeypatch, structlog.testing.capture_logs() as logs:
        sdk(monkeypatch)
        dropped: list[object] = []
        monkeypatch.setattr(atexit, "unregister", dropped.append)
        ours = from_keys(app, receiver)
        again = from_keys(app, receiver)  # the same pipeline: said once
        try:
            event = ours.embed(standin)
            ours.recorder.flush()
            assert SENTINEL not in every_text(app, receiver, app.langfuse_endpoint)
            assert call_ids(app.spans()) == [event.call_id]  # produced, the shared way
            assert ours.exporter.capture_payload is False
            assert again.exporter.capture_payload is False
        finally:
            again.recorder.shutdown()
            ours.close()
    assert resources._shutdown is False
    assert resources.shutdown not in dropped
    warnings = [log for log in logs if log["event"] == "langfuse_not_isolated"]
    assert len(warnings) == 1, logs
    assert reason in warnings[0]["reason"]
    assert app.public_key not in repr(warnings[0])
    assert SECRET_KEY not in repr(warnings[0])
