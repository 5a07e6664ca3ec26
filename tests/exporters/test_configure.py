"""``spanledger.configure()``: sinks chosen from an ``environ`` mapping and from arguments.

The real environment is never relied on: every test passes ``environ=``; where a variable
could leak in from the real environment it is set (by monkeypatch) to a decoy that points at
a closed 127.0.0.1 port, so a configure() that read the wrong source fails the test instead of
reaching a real backend.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import spanledger
from spanledger import ConsoleSink, JsonlSink, Recorder, read_events
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter

from .conftest import (
    LangfuseRig,
    OtelRig,
    Providers,
    SeenPost,
    StatusServer,
    closed_port,
    embedding_event,
    unique_public_key,
)

OTEL_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_METRICS_EXPORTER",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
)


@pytest.fixture(autouse=True)
def _quiet_environment(monkeypatch: pytest.MonkeyPatch, restore_default_recorder: None) -> None:
    """Short export timeouts, and decoys in place of any real OTLP / Langfuse settings."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LANGFUSE_BASE_URL", raising=False)
    monkeypatch.delenv("SPANLEDGER_EVENTS", raising=False)
    monkeypatch.delenv("SPANLEDGER_CONSOLE", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")


def sinks_of(recorder: Recorder, kind: type) -> list[object]:
    return [sink for sink in recorder.sinks if isinstance(sink, kind)]


def exported_span_names(posts: list[SeenPost]) -> list[str]:
    names: list[str] = []
    for post in posts:
        if post.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(post.body)
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    names.extend(span.name for span in scope_spans.spans)
    return names


def exported_service_names(posts: list[SeenPost]) -> set[str]:
    names: set[str] = set()
    for post in posts:
        if post.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(post.body)
            for resource_spans in request.resource_spans:
                for attribute in resource_spans.resource.attributes:
                    if attribute.key == "service.name":
                        names.add(attribute.value.string_value)
    return names


# --------------------------------------------------------------------------- events file


def test_events_path_from_environ_writes_a_jsonl_log(tmp_path: Path, providers: Providers) -> None:
    path = tmp_path / "logs" / "events.jsonl"
    recorder = spanledger.configure(environ={"SPANLEDGER_EVENTS": str(path)}, install=False)

    (sink,) = recorder.sinks
    assert isinstance(sink, JsonlSink)
    providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
    recorder.shutdown()
    (event,) = read_events(path)
    assert event.model == "embed-v4.0"


def test_events_path_argument_beats_environ(tmp_path: Path) -> None:
    chosen, ignored = tmp_path / "chosen.jsonl", tmp_path / "ignored.jsonl"
    recorder = spanledger.configure(
        events_path=chosen, environ={"SPANLEDGER_EVENTS": str(ignored)}, install=False
    )

    recorder.emit(embedding_event())
    recorder.shutdown()
    assert len(read_events(chosen)) == 1
    assert not ignored.exists()


def test_the_real_environment_is_not_read_when_environ_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPANLEDGER_EVENTS", str(tmp_path / "real-env.jsonl"))
    monkeypatch.setenv("SPANLEDGER_CONSOLE", "1")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", unique_public_key())
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk")

    recorder = spanledger.configure(environ={}, install=False)

    assert recorder.sinks == ()
    assert not (tmp_path / "real-env.jsonl").exists()


def test_extra_sinks_are_kept(tmp_path: Path) -> None:
    seen: list[object] = []
    recorder = spanledger.configure(
        sinks=[seen.append], environ={"SPANLEDGER_EVENTS": str(tmp_path / "e.jsonl")}, install=False
    )

    recorder.emit(embedding_event())
    recorder.shutdown()
    assert len(seen) == 1
    assert len(sinks_of(recorder, JsonlSink)) == 1


# --------------------------------------------------------------------------- console


@pytest.mark.parametrize(
    ("value", "wanted"), [("1", True), ("true", True), ("0", False), ("", False)]
)
def test_console_from_environ(value: str, wanted: bool) -> None:
    recorder = spanledger.configure(environ={"SPANLEDGER_CONSOLE": value}, install=False)

    assert bool(sinks_of(recorder, ConsoleSink)) is wanted


def test_console_argument_beats_environ() -> None:
    off = spanledger.configure(console=False, environ={"SPANLEDGER_CONSOLE": "1"}, install=False)
    on = spanledger.configure(console=True, environ={}, install=False)

    assert sinks_of(off, ConsoleSink) == []
    assert len(sinks_of(on, ConsoleSink)) == 1


# --------------------------------------------------------------------------- OTLP


def test_otlp_endpoint_from_environ_is_where_spans_go(providers: Providers) -> None:
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": backend.url}, install=False
        )
        (exporter,) = recorder.sinks
        assert isinstance(exporter, OtelExporter)
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        posts = backend.seen
    assert exported_span_names(posts) == ["embeddings embed-v4.0"]
    assert exporter.delivery is not None
    assert exporter.delivery.exported == 1
    assert exporter.delivery.failed == 0


def test_otlp_endpoint_argument_sends_spans_and_metrics(providers: Providers) -> None:
    with StatusServer(200) as backend:
        recorder = spanledger.configure(otlp_endpoint=backend.url + "/", environ={}, install=False)
        (exporter,) = recorder.sinks
        assert isinstance(exporter, OtelExporter)
        providers.reranker("cohere", "rerank-v3.5", recorder).rerank("q", ["a", "b"])
        recorder.shutdown()
        posts = backend.seen
    paths = {post.path for post in posts}
    assert paths == {"/v1/traces", "/v1/metrics"}
    assert exported_span_names(posts) == ["rerank rerank-v3.5"]
    assert exported_service_names(posts) == {"spanledger"}
    assert exporter.delivery is not None
    assert exporter.delivery.exported == 1


def test_metrics_exporter_none_turns_otlp_metrics_off(providers: Providers) -> None:
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            otlp_endpoint=backend.url, environ={"OTEL_METRICS_EXPORTER": "none"}, install=False
        )
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        paths = {post.path for post in backend.seen}
    assert paths == {"/v1/traces"}


def test_service_name_from_environ_names_the_resource(providers: Providers) -> None:
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            otlp_endpoint=backend.url,
            environ={"OTEL_SERVICE_NAME": "search-api", "OTEL_METRICS_EXPORTER": "none"},
            install=False,
        )
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        posts = backend.seen
    assert exported_service_names(posts) == {"search-api"}


def exported_resource(posts: list[SeenPost]) -> dict[str, str]:
    found: dict[str, str] = {}
    for post in posts:
        if post.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest.FromString(post.body)
            for resource_spans in request.resource_spans:
                for attribute in resource_spans.resource.attributes:
                    found[attribute.key] = attribute.value.string_value
    return found


@pytest.mark.parametrize(
    ("environ", "service", "project"),
    [
        ({"OTEL_SERVICE_NAME": "search-api"}, "search-api", "search-api"),
        (
            {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment=prod"},
            "from-attrs",
            "from-attrs",
        ),
        (
            {
                "OTEL_SERVICE_NAME": "search-api",
                "OTEL_RESOURCE_ATTRIBUTES": "service.name=x,openinference.project.name=rag%20evals",
            },
            "search-api",
            "rag evals",
        ),
        ({}, "spanledger", "spanledger"),
    ],
)
def test_resource_names_the_service_and_phoenix_project_as_the_user_set_them(
    providers: Providers, environ: dict[str, str], service: str, project: str
) -> None:
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            otlp_endpoint=backend.url,
            environ={**environ, "OTEL_METRICS_EXPORTER": "none"},
            install=False,
        )
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        resource = exported_resource(backend.seen)
    assert resource["service.name"] == service
    assert resource["openinference.project.name"] == project
    if "deployment.environment" in environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        assert resource["deployment.environment"] == "prod"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("a=1,novalue", "entry 2 has no '=' between a key and its value"),
        ("=secret-value", "entry 1 has no key before its '='"),
        ("k=bad%07value", "entry 1 has a control character in its value"),
    ],
)
def test_a_bad_resource_attribute_is_named_by_position_never_quoted(
    value: str, problem: str
) -> None:
    with pytest.raises(spanledger.ConfigurationError) as caught:
        spanledger.configure(
            otlp_endpoint="http://127.0.0.1:9",
            environ={"OTEL_RESOURCE_ATTRIBUTES": value},
            install=False,
        )
    assert str(caught.value).startswith(f"OTEL_RESOURCE_ATTRIBUTES {problem}")
    assert "secret-value" not in str(caught.value)


def test_tracer_provider_argument_is_used_instead_of_otlp(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel()  # for its in-memory tracer provider
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            tracer_provider=rig.tracer_provider,
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": backend.url},
            install=False,
        )
        (exporter,) = recorder.sinks
        assert isinstance(exporter, OtelExporter)
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        posts = backend.seen
    assert posts == []
    (span,) = rig.call_spans()
    assert span.name == "embeddings embed-v4.0"


# --------------------------------------------------------------------------- Langfuse


def test_langfuse_keys_from_environ_build_an_exporter_for_that_host(
    providers: Providers,
) -> None:
    public_key = unique_public_key()
    with StatusServer(200) as backend:
        recorder = spanledger.configure(
            environ={
                "LANGFUSE_PUBLIC_KEY": public_key,
                "LANGFUSE_SECRET_KEY": "sk-lf-secret",
                "LANGFUSE_HOST": backend.url,
            },
            install=False,
        )
        (exporter,) = recorder.sinks
        assert isinstance(exporter, LangfuseExporter)
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        recorder.shutdown()
        posts = [post for post in backend.seen if post.path == "/api/public/otel/v1/traces"]
    assert posts, [post.path for post in backend.seen]
    credentials = base64.b64encode(f"{public_key}:sk-lf-secret".encode()).decode()
    headers = {key.lower(): value for key, value in posts[0].headers.items()}
    assert headers["authorization"] == f"Basic {credentials}"
    assert exported_span_names(posts) == ["embeddings embed-v4.0"]
    assert exporter.delivery is not None
    assert exporter.delivery.exported == 1


def test_langfuse_with_one_key_is_a_configuration_error_naming_the_other() -> None:
    """A half-configured Langfuse is almost surely a mistake: refused, not silently off."""
    public_key = unique_public_key()
    with pytest.raises(spanledger.ConfigurationError) as caught:
        spanledger.configure(environ={"LANGFUSE_PUBLIC_KEY": public_key}, install=False)

    assert "LANGFUSE_SECRET_KEY is not" in str(caught.value)
    assert public_key not in str(caught.value)


def test_langfuse_false_turns_it_off_despite_environ() -> None:
    recorder = spanledger.configure(
        langfuse=False,
        environ={
            "LANGFUSE_PUBLIC_KEY": unique_public_key(),
            "LANGFUSE_SECRET_KEY": "sk",
            "LANGFUSE_HOST": f"http://127.0.0.1:{closed_port()}",
        },
        install=False,
    )

    assert sinks_of(recorder, LangfuseExporter) == []


def test_langfuse_client_argument_is_used(langfuse_rig: LangfuseRig, providers: Providers) -> None:
    recorder = spanledger.configure(langfuse=langfuse_rig.client, environ={}, install=False)

    (exporter,) = recorder.sinks
    assert isinstance(exporter, LangfuseExporter)
    assert exporter.client is langfuse_rig.client
    providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
    (span,) = langfuse_rig.spans()
    assert span.name == "embeddings embed-v4.0"


# --------------------------------------------------------------------------- install


def test_install_true_makes_it_the_process_default() -> None:
    recorder = spanledger.configure(environ={"SPANLEDGER_CONSOLE": "1"})

    assert spanledger.get_recorder() is recorder


def test_install_false_leaves_the_default_alone() -> None:
    before = spanledger.get_recorder()
    recorder = spanledger.configure(environ={"SPANLEDGER_CONSOLE": "1"}, install=False)

    assert spanledger.get_recorder() is before
    assert spanledger.get_recorder() is not recorder


def test_installed_recorder_receives_calls_from_providers_without_a_recorder(
    tmp_path: Path, providers: Providers
) -> None:
    path = tmp_path / "default.jsonl"
    recorder = spanledger.configure(environ={"SPANLEDGER_EVENTS": str(path)})
    embedder = providers.embedder("cohere", "embed-v4.0", recorder)
    embedder._recorder = None  # behave like a provider built without recorder=
    embedder.embed(["a"])
    recorder.shutdown()

    assert len(read_events(path)) == 1


# --------------------------------------------------------------------------- no globals


def test_no_global_provider_is_ever_installed() -> None:
    script = textwrap.dedent(
        f"""
        import opentelemetry.metrics as metrics
        import opentelemetry.trace as trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        import spanledger
        from spanledger.exporters.otel import OtelExporter
        from tests.exporters.conftest import embedding_event

        OtelExporter()
        OtelExporter(tracer_provider=TracerProvider(), meter_provider=MeterProvider())
        recorder = spanledger.configure(
            otlp_endpoint="http://127.0.0.1:{closed_port()}",
            environ={{
                "LANGFUSE_PUBLIC_KEY": "pk-subprocess",
                "LANGFUSE_SECRET_KEY": "sk",
                "LANGFUSE_HOST": "http://127.0.0.1:{closed_port()}",
            }},
        )
        recorder.emit(embedding_event())
        recorder.shutdown()
        print("PROVIDERS", type(trace.get_tracer_provider()).__name__)
        print("PROVIDERS", type(metrics.get_meter_provider()).__name__)
        """
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "LANGFUSE_", "SPANLEDGER_"))
    }
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    reported = [
        line.split()[1] for line in done.stdout.splitlines() if line.startswith("PROVIDERS ")
    ]
    assert reported == ["ProxyTracerProvider", "_ProxyMeterProvider"]


@pytest.mark.parametrize(
    ("environ", "extra"),
    [
        ({"SPANLEDGER_PROMETHEUS_PORT": "9"}, "spanledger[prometheus]"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "spanledger[otel]"),
        (
            {
                "SPANLEDGER_PROMETHEUS_PORT": "9",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
            },
            "spanledger[otel,prometheus]",
        ),
    ],
)
def test_a_missing_sdk_names_the_extra_the_configuration_needs(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], extra: str
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # as if not installed
    with pytest.raises(ImportError) as caught:
        spanledger.configure(environ=environ)
    assert str(caught.value).startswith(f"install {extra} to use this exporter")


def _configure_warnings(
    caplog: pytest.LogCaptureFixture, environ: dict[str, str]
) -> tuple[Recorder, list[str]]:
    with caplog.at_level("WARNING", logger="spanledger.configure"):
        recorder = spanledger.configure(environ=environ, install=False)
    recorder.shutdown()
    return recorder, [r.getMessage() for r in caplog.records if r.name == "spanledger.configure"]


def test_a_mistyped_setting_is_named_with_the_one_it_resembles(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    recorder, warnings = _configure_warnings(caplog, {"SPANLEDGER_EVENT": str(tmp_path / "e")})

    assert recorder.sinks == ()
    assert warnings[0] == (
        "unknown_setting variable='SPANLEDGER_EVENT' hint='did you mean SPANLEDGER_EVENTS?'"
    )
    assert warnings[1].startswith("nothing_configured hint='events are sent nowhere: set ")
    assert str(tmp_path) not in " ".join(warnings)  # the value is never quoted


def test_an_unrelated_spanledger_variable_is_named_and_the_rest_still_applies(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    environ = {"SPANLEDGER_THEME": "blue", "SPANLEDGER_EVENTS": str(tmp_path / "e.jsonl")}
    recorder, warnings = _configure_warnings(caplog, environ)

    assert [type(sink) for sink in recorder.sinks] == [JsonlSink]
    assert warnings == [
        "unknown_setting variable='SPANLEDGER_THEME' hint='spanledger does not read it'"
    ]


def test_known_settings_and_test_switches_draw_no_warning(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    environ = {
        "SPANLEDGER_EVENTS": str(tmp_path / "e.jsonl"),
        "SPANLEDGER_CONSOLE": "0",
        "SPANLEDGER_SHUTDOWN_TIMEOUT": "2",
        "SPANLEDGER_REQUIRE_E2E": "1",
        "OTHER_TOOL_EVENT": "x",
    }
    _, warnings = _configure_warnings(caplog, environ)
    assert warnings == []


def test_a_price_table_alone_is_a_configuration(caplog: pytest.LogCaptureFixture) -> None:
    from spanledger.ledger import example_prices_path

    recorder, warnings = _configure_warnings(
        caplog, {"SPANLEDGER_PRICES": str(example_prices_path())}
    )
    assert recorder.sinks == ()
    assert warnings == []
