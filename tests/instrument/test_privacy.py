"""Nothing instrumentation produces carries inputs, queries, documents, error bodies or keys."""

from __future__ import annotations

import io
from pathlib import Path

import cohere
import httpx
import openai
import pytest
import structlog
import voyageai.error
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import ConsoleSink, JsonlSink, Recorder
from spanledger.events import FailedEvent
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, OPS, Tape, openai_over

SENTINEL = "SENTINEL-7b1d-private"


def leaking(request: httpx.Request) -> httpx.Response:
    return httpx.Response(500, json={"message": f"echo {SENTINEL} {API_KEY}"})


class Exploding:
    def emit(self, event: spanledger.Event) -> None:
        raise RuntimeError(f"sink saw {SENTINEL}")


def test_the_sentinel_and_the_key_appear_nowhere(standin: StandIn, tmp_path: Path) -> None:
    tape = Tape()
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    console = io.StringIO()
    log_path = tmp_path / "events.jsonl"
    recorder = Recorder(
        [
            tape,
            JsonlSink(log_path),
            ConsoleSink(console),
            OtelExporter(tracer_provider=tracing, enable_metrics=False),
            Exploding(),
        ]
    )
    text = f"passage {SENTINEL}"
    leaky = httpx.Client(transport=httpx.MockTransport(leaking))

    with spanledger.use(recorder), structlog.testing.capture_logs() as logs:
        oai = spanledger.instrument(OPS[0].client(standin))
        oai.embeddings.create(model="m", input=[text], user=SENTINEL)
        co = spanledger.instrument(OPS[1].client(standin))
        co.rerank(model="m", query=SENTINEL, documents=[text])
        v1 = spanledger.instrument(OPS[5].client(standin))
        v1.embed(model="m", texts=[text] * 100, input_type="search_document")  # two batches
        v1.rerank(model="m", query=SENTINEL, documents=[{"text": text}], return_documents=True)
        vo = spanledger.instrument(OPS[3].client(standin))
        vo.embed([text], model="voyage-3")
        with pytest.raises(voyageai.error.InvalidRequestError):
            vo.rerank(SENTINEL, [text], model="fail-400")

        failing = spanledger.instrument(openai_over(httpx.MockTransport(leaking), max_retries=0))
        with pytest.raises(openai.InternalServerError):
            failing.embeddings.create(model="m", input=[text])
        failing_co = spanledger.instrument(
            cohere.ClientV2(api_key=API_KEY, max_retries=0, httpx_client=leaky)
        )
        with pytest.raises(cohere.core.api_error.ApiError):
            failing_co.rerank(model="m", query=SENTINEL, documents=[text])

        with (
            pytest.raises(ValueError, match="boom"),
            spanledger.record_embedding(
                provider="acme", model="m", inputs=[text], extras={"note": SENTINEL}
            ),
        ):
            raise ValueError(f"boom {SENTINEL}")
        with httpx.Client(
            transport=spanledger.instrumentation.transport(httpx.MockTransport(leaking))
        ) as raw:
            raw.post("https://api.jina.ai/v1/rerank", json={"query": SENTINEL, "documents": [text]})

    recorder.flush()
    failures = [event for event in tape.events if isinstance(event, FailedEvent)]
    assert len(tape.events) == 11
    assert len(failures) == 5
    assert all(event.fingerprint is not None for event in failures if event.status_code == 500)
    surfaces = [
        log_path.read_text(),
        console.getvalue(),
        repr(logs),
        *(event.model_dump_json() for event in tape.events),
        *(repr(event) for event in tape.events),
        *(str(span.to_json()) for span in spans.get_finished_spans()),
    ]
    for surface in surfaces:
        assert SENTINEL not in surface
        assert API_KEY not in surface
    assert any(entry["event"] == "sink_failed" for entry in logs)
