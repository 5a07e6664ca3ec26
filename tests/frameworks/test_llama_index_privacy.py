"""What spanledger hears of a LlamaIndex pipeline stays in the process: the texts it matches are
read in memory while the request is open, and no document, question or answer (each carries the
sentinel) reaches a span, a Langfuse observation or score, a log line, an event-log record, the
console or an exception, not even when the capture fails inside its handlers."""

from __future__ import annotations

import io
import logging
import uuid
from pathlib import Path

import pytest
from langfuse import Langfuse
from llama_index.core.query_engine import CitationQueryEngine
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import ConsoleSink, JsonlSink, Recorder
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.integrations.llama_index import pipeline
from spanledger.testing import StandIn, openai_chat_completions
from tests.attribution.conftest import PostRecorder
from tests.frameworks.llama_index_rig import (
    API_KEY,
    PRIVATE,
    QUESTION,
    SENTINEL,
    StandInLLM,
    answering,
    index_of,
)

__all__ = ["PRIVATE"]


def test_the_sentinel_reaches_no_surface(
    standin: StandIn,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="spanledger")
    standin.reset()
    standin.route(openai_chat_completions(answer=answering(0, "97")))
    llm = StandInLLM(base_url=standin.base_url("openai") + "/v1")
    engine = CitationQueryEngine.from_args(index_of(standin), llm=llm, similarity_top_k=3)

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    observations = InMemorySpanExporter()
    observed = TracerProvider()
    scores = PostRecorder()
    scores.start()
    langfuse = Langfuse(
        public_key=f"pk-lf-llamaindex-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url=scores.url,
        tracer_provider=observed,
        span_exporter=observations,
    )
    log = tmp_path / "events.jsonl"
    console = io.StringIO()
    recorder = Recorder(
        [
            JsonlSink(log),
            ConsoleSink(console),
            OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider),
            LangfuseExporter(langfuse),
        ]
    )

    def failing(nodes: object) -> list[object]:
        raise RuntimeError(f"cannot read {SENTINEL}")

    answers = []
    spanledger.instrument(sdks=["openai", "llama_index.core"])
    try:
        with spanledger.use(recorder):
            answers.append(str(engine.query(QUESTION)))  # a request of its own
            with spanledger.request("turn-9"):
                answers.append(str(engine.query(QUESTION)))
            monkeypatch.setattr(pipeline, "passages", failing)
            answers.append(str(engine.query(QUESTION)))  # the capture fails inside
    finally:
        spanledger.uninstrument()
        recorder.shutdown()
        langfuse.flush()
        scores.stop()

    assert all(SENTINEL in answer for answer in answers)  # the app still gets every answer
    records = spanledger.read_events(log).attributions
    assert len(records) == 3
    assert any(record.problems for record in records)  # the phantom label, counted
    assert "instrumentation_failed" in caplog.text
    assert "RuntimeError" in caplog.text
    surfaces = [log.read_text(), console.getvalue(), caplog.text]
    surfaces += [repr(record) for record in records]
    for span in [*spans.get_finished_spans(), *observations.get_finished_spans()]:
        surfaces += [span.name, repr(dict(span.attributes or {})), repr(span.events)]
        surfaces.append(repr(span.status))
    surfaces += [post.body.decode("utf-8", "replace") for post in scores.posts]
    assert len(spans.get_finished_spans()) >= 3
    for text in surfaces:
        for private in (SENTINEL, API_KEY):
            assert private not in text
    tracer_provider.shutdown()
    meter_provider.shutdown()
    langfuse.shutdown()
    observed.shutdown()
