"""The wiring in ``exporters/`` works as its README says: each env file, loaded into
``configure(environ=...)``, builds the exporters it names and delivers to a loopback endpoint;
the Collector pipeline is consistently wired and uses spanledger's Langfuse ingestion path."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import spanledger
from spanledger import JsonlSink, configuration
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import CohereEmbeddings
from spanledger.testing import StandIn

from .e2e_langfuse.otlp_receiver import OtlpReceiver

FOLDER = Path(__file__).resolve().parents[1] / "exporters"


def load_env(name: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in (FOLDER / "env" / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as server:
        yield server


@pytest.fixture(autouse=True)
def no_default_recorder() -> Iterator[None]:
    yield
    spanledger.set_default_recorder(None)


def one_call(standin: StandIn) -> None:
    with CohereEmbeddings("embed-v4.0", base_url=standin.base_url("cohere")) as embedder:
        embedder.embed(["tides"])


def span_names(bodies: list[bytes]) -> list[str]:
    names = []
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                names += [span.name for span in scope_spans.spans]
    return names


def test_jaeger_env_sends_spans_over_otlp_without_metrics(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    env = load_env("jaeger.env")
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4318")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    env["SPANLEDGER_EVENTS"] = str(tmp_path / env["SPANLEDGER_EVENTS"])
    recorder = spanledger.configure(environ=env)
    assert [type(sink) for sink in recorder.sinks] == [JsonlSink, OtelExporter]
    assert spanledger.get_recorder() is recorder
    with StandIn() as standin:
        one_call(standin)
    recorder.shutdown()
    posts = [r for r in receiver.requests if r.method == "POST"]
    assert {r.path for r in posts} == {"/v1/traces"}  # no metrics: OTEL_METRICS_EXPORTER=none
    assert span_names([r.body for r in posts]) == ["embeddings embed-v4.0"]
    assert len(spanledger.read_events(tmp_path / "spanledger-events.jsonl").events) == 1


def test_collector_env_sends_spans_and_metrics(receiver: OtlpReceiver, tmp_path: Path) -> None:
    env = load_env("collector.env")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    env["SPANLEDGER_EVENTS"] = str(tmp_path / "events.jsonl")
    recorder = spanledger.configure(environ=env)
    with StandIn() as standin:
        one_call(standin)
    recorder.shutdown()
    paths = {r.path for r in receiver.requests if r.method == "POST"}
    assert paths == {"/v1/traces", "/v1/metrics"}


def test_langfuse_env_sends_observations(receiver: OtlpReceiver, tmp_path: Path) -> None:
    env = load_env("langfuse.env")
    env["LANGFUSE_HOST"] = receiver.url
    env["LANGFUSE_PUBLIC_KEY"] = "pk-lf-folder-test"
    env["SPANLEDGER_EVENTS"] = str(tmp_path / "events.jsonl")
    recorder = spanledger.configure(environ=env)
    assert [type(sink) for sink in recorder.sinks] == [JsonlSink, LangfuseExporter]
    with StandIn() as standin:
        one_call(standin)
    recorder.shutdown()
    assert receiver.trace_posts
    assert receiver.trace_posts[0].basic_credentials() == (
        f"pk-lf-folder-test:{env['LANGFUSE_SECRET_KEY']}"
    )


def test_collector_pipeline_is_consistently_wired() -> None:
    config: dict[str, Any] = yaml.safe_load((FOLDER / "otel-collector.yaml").read_text())
    for pipeline in config["service"]["pipelines"].values():
        for section in ("receivers", "processors", "exporters"):
            for name in pipeline.get(section, []):
                assert name in config[section], f"{name} is used but not defined"
    traces = config["service"]["pipelines"]["traces"]["exporters"]
    assert set(traces) == {"otlp/jaeger", "otlphttp/langfuse"}
    langfuse = config["exporters"]["otlphttp/langfuse"]
    assert langfuse["traces_endpoint"].endswith("/api/public/otel/v1/traces")
    assert langfuse["headers"]["x-langfuse-ingestion-version"] == "4"
    assert langfuse["headers"]["Authorization"].startswith("Basic ")
    receiver_endpoint = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert load_env("collector.env")["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(
        receiver_endpoint.rsplit(":", 1)[1]
    )


def test_the_readme_table_names_every_setting_configure_reads() -> None:
    text = (FOLDER / "README.md").read_text()
    table = "\n".join(line for line in text.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`(SPANLEDGER_[A-Z_]+)", table))
    assert named == set(configuration.SETTING_VARIABLES)


def test_an_otlp_only_langfuse_gets_one_trace_with_usage_and_cost(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """What Langfuse's OTLP endpoint would be sent, decoded off the wire: the request span
    over its calls, observation types, usage and cost details as JSON strings."""
    from spanledger.ledger import example_prices_path
    from spanledger.providers import CohereReranker

    env = {  # Langfuse's OTLP endpoint and Basic auth, no Langfuse SDK
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.traces_url,
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "Authorization=Basic%20cGstbGY6c2stbGY=",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "rag",
        "SPANLEDGER_PRICES": str(example_prices_path()),
    }
    recorder = spanledger.configure(environ=env, install=False)
    with StandIn() as standin, spanledger.use(recorder), spanledger.request("turn-9"):
        one_call(standin)
        with CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere")) as reranker:
            reranker.rerank("tides", ["moon", "sea"])
    recorder.shutdown()

    spans = {span["name"]: span for span in receiver.wait_for_spans(3)}
    assert receiver.trace_posts[0].basic_credentials() == "pk-lf:sk-lf"
    root, embed, rerank = (
        spans["request"],
        spans["embeddings embed-v4.0"],
        spans["rerank rerank-v3.5"],
    )
    assert {embed["parent_span_id"], rerank["parent_span_id"]} == {root["span_id"]}
    assert root["resource_attributes"]["openinference.project.name"] == "rag"
    assert embed["attributes"]["langfuse.observation.type"] == "embedding"
    assert rerank["attributes"]["langfuse.observation.type"] == "generation"
    usage = json.loads(embed["attributes"]["langfuse.observation.usage_details"])
    assert usage == {"input": embed["attributes"]["gen_ai.usage.input_tokens"]}
    assert json.loads(rerank["attributes"]["langfuse.observation.usage_details"]) == {
        "search_units": 1
    }
    cost = json.loads(rerank["attributes"]["langfuse.observation.cost_details"])
    assert cost == {"total": 0.002}
