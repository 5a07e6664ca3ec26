"""``report()`` hands the request's attribution record to the current recorder's sinks: the JSONL
log, OTel span attributes and histogram, and a Langfuse score. Payload never goes with it.

Provider calls go to the loopback stand-in; OTel and Langfuse run on private SDK providers with
in-memory span exporters; Langfuse's score POSTs land on a 127.0.0.1 recorder.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langfuse import Langfuse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import JsonlSink, Recorder, read_events
from spanledger.attribution import RequestReport, RequestScope, ServedFrame
from spanledger.events import AttributionRecord
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import example_prices_path

from .conftest import PASSAGES, QUESTION, SENTINEL, PostRecorder, Providers

SCORES_PATH = "/api/public/scores"
SHARE_METRIC = "spanledger.attribution.cited_token_share"
SECRET_PASSAGES = [f"{passage} {SENTINEL}" for passage in PASSAGES]
SECRET_QUESTION = f"{QUESTION} {SENTINEL}"
SECRET_ANSWER = f"The moon drives the tides [1], says {SENTINEL}; spring tides [2]."


def retrieval_turn(
    req: RequestScope, providers: Providers, *, render: int = 3, answer: str = SECRET_ANSWER
) -> list[ServedFrame]:
    """Embed, rerank and serve the secret passages; render the top ``render``; cite by text."""
    embedder = providers.embedder()
    embedder.embed(SECRET_PASSAGES, input_type="document")
    embedder.embed([SECRET_QUESTION], input_type="query")
    response = providers.reranker().rerank(SECRET_QUESTION, SECRET_PASSAGES, top_k=4)
    frames = req.serve(response, SECRET_PASSAGES, provider_id="kb")
    req.render(frames[:render])
    if render:
        req.cite_from_text(answer, frames[:render])
    return frames


def without_time(record: AttributionRecord) -> dict[str, Any]:
    return record.model_dump(exclude={"at"})


# --------------------------------------------------------------------------- JSONL


def test_the_jsonl_log_holds_the_record_and_read_events_returns_it(
    tmp_path: Path, providers: Providers
) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)], prices=example_prices_path())
    with spanledger.use(recorder), spanledger.request("turn-42") as req:
        retrieval_turn(req, providers)
        report = req.report()
    recorder.shutdown()

    log = read_events(path)
    assert log.problems == []
    assert [e.kind for e in log.events] == ["embedding", "embedding", "rerank"]
    [record] = log.attributions
    expected = report.record()
    assert without_time(record) == without_time(expected)
    assert record.request_id == "turn-42"
    assert record.cited_token_share is not None
    assert 0 < record.cited_token_share < 1
    assert record.spend_complete
    assert record.spend_per_cited_token is not None

    lines = path.read_text(encoding="utf-8").splitlines()
    written = json.loads(lines[-1])
    assert written["kind"] == "attribution"
    assert written["schema"] == 1
    assert SENTINEL not in "\n".join(lines)


def test_answer_text_in_an_unmatched_label_stays_out_of_the_log(
    tmp_path: Path, providers: Providers
) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)], prices=example_prices_path())
    answer = f"The moon drives the tides [1] and [{SENTINEL}]."
    with spanledger.use(recorder), spanledger.request("turn-42") as req:
        retrieval_turn(req, providers, answer=answer)
        report = req.report()
    recorder.shutdown()

    assert [p.kind.value for p in report.attribution.problems()] == ["unknown_label"]
    [record] = read_events(path).attributions
    assert not record.reconcilable
    assert len(record.problems) == 1
    assert SENTINEL not in path.read_text(encoding="utf-8"), "answer text written to the log"


def test_every_report_call_writes_a_record(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    with spanledger.use(recorder), spanledger.request("turn-42") as req:
        frames = req.serve(SECRET_PASSAGES[:2], provider_id="kb")
        req.render(frames)
        req.report()
        req.cite(frames[:1])
        req.report()
        req.report(emit=False)
    recorder.shutdown()

    records = read_events(path).attributions
    assert [r.cited_token_share for r in records] == [
        0.0,
        frames[0].token_cost / (frames[0].token_cost + frames[1].token_cost),
    ]


# --------------------------------------------------------------------------- sink isolation


class ExplodingSink:
    def emit(self, event: spanledger.Event) -> None:
        """Takes calls fine."""

    def attribution(self, record: AttributionRecord) -> None:
        raise RuntimeError(f"boom {SENTINEL}")


def test_a_sink_whose_attribution_raises_is_isolated_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([ExplodingSink(), JsonlSink(path)])
    with spanledger.use(recorder), spanledger.request("turn-42") as req:
        req.render(req.serve(["a passage"], provider_id="kb"))
        report = req.report()
        req.report()
    recorder.shutdown()

    assert isinstance(report, RequestReport)
    stats = recorder.stats
    assert stats["0:ExplodingSink"].failed == 2
    assert stats["0:ExplodingSink"].failures_by_type == {"RuntimeError": 2}
    assert stats["1:JsonlSink"].failed == 0
    assert len(read_events(path).attributions) == 2


def test_a_closed_jsonl_sink_is_isolated(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "events.jsonl")
    sink.shutdown()
    recorder = Recorder([sink])
    with spanledger.use(recorder), spanledger.request("turn-42") as req:
        req.report()
    assert recorder.stats["0:JsonlSink"].failures_by_type == {"RuntimeError": 1}


# --------------------------------------------------------------------------- OpenTelemetry


@dataclass
class Otel:
    recorder: Recorder
    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def span(self, name: str) -> ReadableSpan:
        [found] = [s for s in self.spans.get_finished_spans() if s.name == name]
        return found

    def share_points(self) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        points: list[HistogramDataPoint] = []
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == SHARE_METRIC:
                        points.extend(
                            p for p in metric.data.data_points if isinstance(p, HistogramDataPoint)
                        )
        return points


@pytest.fixture
def otel() -> Iterator[Otel]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    exporter = OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)
    recorder = Recorder([exporter], prices=example_prices_path())
    yield Otel(recorder, tracer_provider, spans, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def test_attribution_lands_on_the_request_span(otel: Otel, providers: Providers) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    with (
        spanledger.use(otel.recorder),
        tracer.start_as_current_span("request"),
        spanledger.request("turn-42") as req,
    ):
        retrieval_turn(req, providers)
        record = req.report().record()

    attributes = dict(otel.span("request").attributes or {})
    prefix = "spanledger.attribution."
    assert record.cited_token_share is not None
    assert record.spend is not None
    assert record.spend_per_cited_token is not None
    assert attributes["spanledger.request_id"] == "turn-42"
    assert attributes[prefix + "cited_token_share"] == record.cited_token_share
    assert attributes[prefix + "frames_served"] == 4
    assert attributes[prefix + "frames_rendered"] == 3
    assert attributes[prefix + "frames_cited"] == 2
    assert attributes[prefix + "rendered_tokens"] == record.rendered_tokens
    assert attributes[prefix + "cited_tokens"] == record.cited_tokens
    assert attributes[prefix + "uncited_rendered_tokens"] == record.uncited_rendered_tokens
    assert attributes[prefix + "reconcilable"] is True
    assert attributes[prefix + "spend_complete"] is True
    assert attributes[prefix + "spend"] == float(record.spend)
    assert attributes[prefix + "spend_per_cited_token"] == float(record.spend_per_cited_token)

    call_spans = [s for s in otel.spans.get_finished_spans() if s.name != "request"]
    assert len(call_spans) == 3
    for span in call_spans:
        assert not any(key.startswith(prefix) for key in span.attributes or {})

    [point] = otel.share_points()
    assert point.count == 1
    assert point.sum == record.cited_token_share


def test_the_histogram_skips_requests_with_no_share(otel: Otel, providers: Providers) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    shares: list[float | None] = []
    for request_id, render in (("cited", 3), ("nothing-rendered", 0), ("also-cited", 2)):
        with (
            spanledger.use(otel.recorder),
            tracer.start_as_current_span(request_id),
            spanledger.request(request_id) as req,
        ):
            retrieval_turn(req, providers, render=render)
            shares.append(req.report().record().cited_token_share)

    assert shares[1] is None
    known = [s for s in shares if s is not None]
    assert len(known) == 2
    [point] = otel.share_points()
    assert point.count == 2
    assert point.sum == pytest.approx(sum(known))
    assert point.min == min(known)
    assert point.max == max(known)

    empty = dict(otel.span("nothing-rendered").attributes or {})
    assert "spanledger.attribution.cited_token_share" not in empty
    assert empty["spanledger.attribution.frames_served"] == 4
    assert empty["spanledger.attribution.rendered_tokens"] == 0


def test_a_zero_share_is_recorded_not_skipped(otel: Otel, providers: Providers) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    with (
        spanledger.use(otel.recorder),
        tracer.start_as_current_span("request"),
        spanledger.request("turn-42") as req,
    ):
        retrieval_turn(req, providers, answer="no citations at all")
        record = req.report().record()

    assert record.cited_token_share == 0.0
    attributes = dict(otel.span("request").attributes or {})
    assert attributes["spanledger.attribution.cited_token_share"] == 0.0
    [point] = otel.share_points()
    assert point.count == 1
    assert point.sum == 0.0


def test_no_payload_reaches_span_attributes_or_metrics(otel: Otel, providers: Providers) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    with (
        spanledger.use(otel.recorder),
        tracer.start_as_current_span("request"),
        spanledger.request("turn-42") as req,
    ):
        retrieval_turn(req, providers)
        req.report()

    rendered = []
    for span in otel.spans.get_finished_spans():
        rendered.append(span.name)
        rendered.extend(f"{k}={v!r}" for k, v in (span.attributes or {}).items())
        rendered.extend(event.name for event in span.events)
    data = otel.reader.get_metrics_data()
    assert data is not None
    rendered.append(data.to_json())
    assert SENTINEL not in "\n".join(rendered)
    assert all(passage not in "\n".join(rendered) for passage in PASSAGES)


# --------------------------------------------------------------------------- Langfuse


@dataclass
class LangfuseRig:
    client: Langfuse
    recorder: Recorder
    spans: InMemorySpanExporter
    scores: PostRecorder

    def posted_scores(self) -> list[dict[str, Any]]:
        self.client.flush()
        found: list[dict[str, Any]] = []
        for post in self.scores.posts:
            if post.path == SCORES_PATH:
                found.extend(post.json())
        return found


@pytest.fixture
def langfuse(post_recorder: PostRecorder) -> Iterator[LangfuseRig]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    client = Langfuse(
        public_key=f"pk-lf-attribution-{uuid.uuid4().hex}",  # one resource manager per key
        secret_key="sk-lf-test",
        base_url=post_recorder.url,
        tracer_provider=tracer_provider,
        span_exporter=spans,
    )
    recorder = Recorder([LangfuseExporter(client)], prices=example_prices_path())
    yield LangfuseRig(client, recorder, spans, post_recorder)
    client.shutdown()
    tracer_provider.shutdown()


def test_langfuse_scores_the_trace_of_the_requests_observations(
    langfuse: LangfuseRig, providers: Providers
) -> None:
    with (
        spanledger.use(langfuse.recorder),
        langfuse.client.start_as_current_observation(name="turn") as turn,
        spanledger.request("turn-42") as req,
    ):
        retrieval_turn(req, providers)
        record = req.report().record()

    [score] = langfuse.posted_scores()
    assert score["name"] == "spanledger.cited_token_share"
    assert score["value"] == record.cited_token_share
    assert score["dataType"] == "NUMERIC"
    assert score["traceId"] == turn.trace_id
    finished = langfuse.spans.get_finished_spans()
    [request] = [s for s in finished if s.name == "request"]
    observations = [s for s in finished if s.name not in ("turn", "request")]
    assert len(observations) == 3
    assert {format(s.context.trace_id, "032x") for s in observations if s.context} == {
        turn.trace_id
    }
    assert request.parent is not None  # the request nests under the application's turn
    assert format(request.parent.span_id, "016x") == turn.id
    assert request.context is not None
    assert {s.parent.span_id for s in observations if s.parent} == {request.context.span_id}


def test_langfuse_scores_a_single_call_request_without_an_enclosing_trace(
    langfuse: LangfuseRig, providers: Providers
) -> None:
    with spanledger.use(langfuse.recorder), spanledger.request("turn-7") as req:
        response = providers.reranker().rerank(SECRET_QUESTION, SECRET_PASSAGES, top_k=2)
        frames = req.serve(response, SECRET_PASSAGES, provider_id="kb")
        req.render(frames)
        req.cite(frames)
        req.report()

    [score] = langfuse.posted_scores()
    call, request = langfuse.spans.get_finished_spans()  # the call ends first
    assert request.name == "request"
    assert call.context is not None
    assert score["traceId"] == format(call.context.trace_id, "032x")
    assert score["value"] == 1.0


def test_langfuse_gets_no_score_without_a_share(
    langfuse: LangfuseRig, providers: Providers
) -> None:
    with spanledger.use(langfuse.recorder), spanledger.request("turn-42") as req:
        retrieval_turn(req, providers, render=0)
        record = req.report().record()

    assert record.cited_token_share is None
    assert langfuse.posted_scores() == []
    assert len(langfuse.spans.get_finished_spans()) == 3 + 1  # the calls and the request


def test_langfuse_gets_a_zero_score(langfuse: LangfuseRig, providers: Providers) -> None:
    with spanledger.use(langfuse.recorder), spanledger.request("turn-42") as req:
        retrieval_turn(req, providers, answer="no citations at all")
        record = req.report().record()

    assert record.cited_token_share == 0.0
    [score] = langfuse.posted_scores()
    assert score["name"] == "spanledger.cited_token_share"
    assert score["value"] == 0.0


def test_no_payload_reaches_langfuse(langfuse: LangfuseRig, providers: Providers) -> None:
    with (
        spanledger.use(langfuse.recorder),
        langfuse.client.start_as_current_observation(name="turn"),
        spanledger.request("turn-42") as req,
    ):
        retrieval_turn(req, providers)
        req.report()

    scores = langfuse.posted_scores()
    assert len(scores) == 1
    sent = "\n".join(post.body.decode("utf-8") for post in langfuse.scores.posts)
    sent += "\n".join(
        f"{k}={v!r}"
        for s in langfuse.spans.get_finished_spans()
        for k, v in (s.attributes or {}).items()
    )
    assert SENTINEL not in sent
    assert all(passage not in sent for passage in PASSAGES)
