"""A whole no-framework turn (rerank, then OpenAI, Anthropic and Cohere chat calls read over the
wire) with a sentinel in every document, the query and every answer: the sentinel appears in
no span, no Langfuse observation, no log line, no event-log record and no exception, even when
the capture itself breaks on a text that holds it.
"""

from __future__ import annotations

import io
import logging
import uuid
from pathlib import Path
from typing import Any

import anthropic
import cohere
import openai
import pytest
import structlog
from langfuse import Langfuse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import ConsoleSink, JsonlSink, Recorder
from spanledger.attribution.context import ContextCapture
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import (
    StandIn,
    anthropic_messages,
    cohere_chat,
    openai_chat_completions,
)

from .conftest import API_KEY, PASSAGES, QUESTION, SENTINEL, PostRecorder

DOCS = [passage.replace(" ", f" {SENTINEL} ", 1) for passage in PASSAGES]
ASK = f"{QUESTION} {SENTINEL}"
ANSWER = f"The moon drives the tides [1]; so says {SENTINEL}."


def spans_text(exporter: InMemorySpanExporter) -> str:
    return repr(
        [
            (
                span.name,
                dict(span.attributes or {}),
                [dict(e.attributes or {}) for e in span.events],
            )
            for span in exporter.get_finished_spans()
        ]
    )


def test_the_sentinel_appears_nowhere(
    standin: StandIn,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    post_recorder: PostRecorder,
) -> None:
    standin.reset()
    standin.route(openai_chat_completions(answer=ANSWER))
    standin.route(anthropic_messages(answer=ANSWER))
    standin.route(cohere_chat(answer=ANSWER))
    otel_spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(otel_spans))
    langfuse_spans = InMemorySpanExporter()
    langfuse_tracing = TracerProvider()
    langfuse = Langfuse(
        public_key=f"pk-lf-test-{uuid.uuid4().hex}",
        secret_key="sk-lf-test",
        base_url=post_recorder.url,
        tracer_provider=langfuse_tracing,
        span_exporter=langfuse_spans,
    )
    console = io.StringIO()
    log_path = tmp_path / "events.jsonl"
    recorder = Recorder(
        [
            JsonlSink(log_path),
            ConsoleSink(console),
            OtelExporter(tracer_provider=tracing, enable_metrics=False),
            LangfuseExporter(langfuse),
        ]
    )
    raised: list[BaseException] = []
    spanledger.instrument(sdks=["cohere", "openai"], http=True)
    try:
        with (
            spanledger.use(recorder),
            caplog.at_level(logging.DEBUG),
            structlog.testing.capture_logs() as logs,
        ):
            with spanledger.request("turn-private"):
                co = cohere.ClientV2(api_key=API_KEY, base_url=standin.base_url("cohere"))
                ranked = co.rerank(model="rerank-v3.5", query=ASK, documents=DOCS, top_n=2)
                chosen = [DOCS[result.index] for result in ranked.results]
                prompt = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(chosen, 1))
                openai.OpenAI(
                    api_key=API_KEY, base_url=standin.base_url("openai") + "/v1"
                ).chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": f"{prompt}\n{ASK}"}]
                )
                documents = [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": text},
                        "title": f"title {SENTINEL}",
                        "citations": {"enabled": True},
                    }
                    for text in chosen
                ]
                asked: Any = [
                    {"role": "user", "content": [*documents, {"type": "text", "text": ASK}]}
                ]
                anthropic.Anthropic(
                    api_key=API_KEY, base_url=standin.base_url("anthropic")
                ).messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=asked)
                co.chat(
                    model="command-a-03-2025",
                    messages=[cohere.UserChatMessageV2(content=ASK)],
                    documents=chosen,
                )

                def broken(*args: object, **kwargs: object) -> None:
                    raise RuntimeError(f"capture broke reading {SENTINEL}")

                monkeypatch.setattr(ContextCapture, "answered", broken)
                try:  # the capture breaks on a text that holds the sentinel: the call goes on
                    co.chat(
                        model="command-a-03-2025", messages=[cohere.UserChatMessageV2(content=ASK)]
                    )
                except BaseException as exc:  # pragma: no cover - the failure this test is for
                    raised.append(exc)
            recorder.flush()
    finally:
        spanledger.uninstrument()
        langfuse.flush()
    assert raised == []
    records = log_path.read_text(encoding="utf-8")
    assert '"kind": "attribution"' in records or '"kind":"attribution"' in records
    surfaces = {
        "spans": spans_text(otel_spans),
        "langfuse": spans_text(langfuse_spans),
        "event log": records,
        "console": console.getvalue(),
        "structlog": repr(logs),
        "logging": repr(
            [
                record.getMessage()
                for record in caplog.records
                if record.name.startswith("spanledger")
            ]
        ),
        "langfuse scores": repr([post.body for post in post_recorder.posts]),
    }
    assert post_recorder.posts  # the request's score went out
    assert langfuse_spans.get_finished_spans()
    assert otel_spans.get_finished_spans()
    assert any(entry.get("error_type") == "RuntimeError" for entry in logs)
    for name, text in surfaces.items():
        assert SENTINEL not in text, f"the sentinel reached the {name}"
    langfuse.shutdown()
    langfuse_tracing.shutdown()
    tracing.shutdown()
