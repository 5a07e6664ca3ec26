"""A chain rendered: one ``rerank_chain`` span with each provider call's span as its child and
one event per attempt, its outcome counted; the request report counts chains by status; no
text of the request anywhere."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import spanledger
from spanledger import JsonlSink, Recorder, read_events
from spanledger.breakers import Breakers
from spanledger.providers.fallback import CancelToken, awith_fallback, with_fallback
from spanledger.providers.steps import step

from .conftest import DOCUMENTS, QUERY, SENTINEL, Otel, Providers, good


def _text(spans: Sequence[ReadableSpan]) -> str:
    parts: list[str] = []
    for span in spans:
        parts += [span.name, str(span.status.description)]
        parts += [f"{k}={v!r}" for k, v in (span.attributes or {}).items()]
        for event in span.events:
            parts.append(event.name)
            parts += [f"{k}={v!r}" for k, v in (event.attributes or {}).items()]
    return "\n".join(parts)


def _chains(otel: Otel) -> list[ReadableSpan]:
    return [span for span in otel.spans() if span.name == "rerank_chain"]


def _raising(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise RuntimeError(SENTINEL)


def test_one_span_per_chain_with_provider_calls_as_children(
    otel: Otel, providers: Providers
) -> None:
    failing = providers.cohere("fail-503", recorder=otel.recorder)
    answering = providers.cohere(recorder=otel.recorder)
    breakers = Breakers(failures=5)
    outcome = with_fallback(
        [failing, step(good, gate=lambda check: False), answering, good],
        QUERY,
        DOCUMENTS,
        top_k=2,
        breakers=breakers,
        recorder=otel.recorder,
    )
    assert outcome.status == "degraded"
    (chain,) = _chains(otel)
    calls = [span for span in otel.spans() if span is not chain]
    assert len(calls) == 2
    assert chain.context is not None
    for call in calls:
        assert call.parent is not None
        assert call.parent.span_id == chain.context.span_id
        assert call.context is not None
        assert call.context.trace_id == chain.context.trace_id

    attributes = dict(chain.attributes or {})
    assert attributes["spanledger.chain.status"] == "degraded"
    assert attributes["spanledger.chain.answered_by"] == 3
    assert attributes["spanledger.chain.attempts"] == 3
    assert attributes["gen_ai.provider.name"] == "cohere"
    assert attributes["gen_ai.request.model"] == "rerank-v3.5"
    assert attributes["spanledger.rerank.document_count"] == 4
    assert attributes["gen_ai.request.top_k"] == 2
    assert chain.status.status_code is not StatusCode.ERROR

    events = [e for e in chain.events if e.name == "spanledger.chain.attempt"]
    assert len(events) == 3
    seen = [dict(e.attributes or {}) for e in events]
    assert [e["spanledger.attempt"] for e in seen] == [1, 2, 3]
    assert [e["spanledger.attempt.status"] for e in seen] == ["failed", "skipped", "ok"]
    assert [e.get("spanledger.attempt.reason") for e in seen] == [
        "provider_unavailable",
        "gate_declined",
        None,
    ]
    assert [e["spanledger.attempt.kind"] for e in seen] == ["provider", "callable", "provider"]
    assert [e.get("spanledger.breaker.state") for e in seen] == ["closed"] * 3
    assert SENTINEL not in _text(otel.spans())


def test_an_invalid_request_is_an_error_span_without_text(otel: Otel) -> None:
    outcome = with_fallback([good], QUERY, [SENTINEL, 3], recorder=otel.recorder)  # type: ignore[list-item]
    assert outcome.status == "invalid_request"
    (chain,) = _chains(otel)
    assert chain.status.status_code is StatusCode.ERROR
    assert (chain.attributes or {})["spanledger.chain.status"] == "invalid_request"
    assert chain.events == ()
    assert SENTINEL not in _text(otel.spans())


def test_a_failed_step_puts_no_message_on_the_span(otel: Otel) -> None:
    with spanledger.use(otel.recorder):
        outcome = with_fallback([_raising, good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    (chain,) = _chains(otel)
    first = dict(chain.events[0].attributes or {})
    assert first["spanledger.attempt.status"] == "failed"
    assert first["spanledger.attempt.reason"] == "step_error"
    assert SENTINEL not in _text(otel.spans())


def test_the_async_chain_is_one_span_too(otel: Otel, providers: Providers) -> None:
    async def run() -> Any:
        failing = providers.cohere("fail-500", recorder=otel.recorder)
        try:
            return await awith_fallback([failing, good], QUERY, DOCUMENTS, recorder=otel.recorder)
        finally:
            await failing.aclose()

    outcome = asyncio.run(run())
    assert outcome.status == "degraded"
    (chain,) = _chains(otel)
    (call,) = [span for span in otel.spans() if span is not chain]
    assert call.parent is not None
    assert chain.context is not None
    assert call.parent.span_id == chain.context.span_id
    assert len(chain.events) == 2


def test_chain_outcomes_are_counted(otel: Otel) -> None:
    with spanledger.use(otel.recorder):
        with_fallback([good], QUERY, DOCUMENTS)
        with_fallback([_raising, good], QUERY, DOCUMENTS)
        with_fallback([good], " ", DOCUMENTS)
    counted = {
        attributes["spanledger.chain.status"]: value
        for attributes, value in otel.points("spanledger.rerank_chain.outcomes")
    }
    assert counted == {"ok": 1, "degraded": 1, "invalid_request": 1}


def test_the_request_report_counts_chains_by_status(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    with spanledger.use(recorder), spanledger.request("turn-7") as turn:
        with_fallback([good], QUERY, DOCUMENTS)
        with_fallback([_raising, good], QUERY, DOCUMENTS)
        with_fallback([_raising], QUERY, DOCUMENTS)
        with_fallback([good], QUERY, [])
        report = turn.report()
    recorder.shutdown()

    assert [o.status for o in turn.outcomes] == ["ok", "degraded", "degraded", "skipped"]
    assert report.chains_by_status() == {"ok": 1, "degraded": 2, "skipped": 1}
    rendered = report.render()
    assert "  rerank chains: 2 degraded, 1 ok, 1 skipped" in rendered.splitlines()
    assert SENTINEL not in rendered

    [record] = read_events(path).attributions
    assert record.chains_by_status == {"ok": 1, "degraded": 2, "skipped": 1}
    assert record.model_dump(exclude={"at"}) == report.record().model_dump(exclude={"at"})
    written = path.read_text(encoding="utf-8")
    assert SENTINEL not in written
    assert json.loads(written.splitlines()[-1])["kind"] == "attribution"


def test_a_report_without_chains_prints_no_chain_line() -> None:
    with spanledger.request("turn-8") as turn:
        report = turn.report(emit=False)
    assert report.chains_by_status() == {}
    assert "rerank chains" not in report.render()


def test_calls_run_on_worker_threads_are_children_too(otel: Otel, providers: Providers) -> None:
    """With a cancel token every step runs on a worker thread, which carries the chain's
    context."""
    token = CancelToken()
    outcome = with_fallback(
        [providers.cohere("fail-502", recorder=otel.recorder), good],
        QUERY,
        DOCUMENTS,
        cancel=token,
        recorder=otel.recorder,
    )
    assert outcome.status == "degraded"
    (chain,) = _chains(otel)
    (call,) = [span for span in otel.spans() if span is not chain]
    assert chain.context is not None
    assert call.parent is not None
    assert call.parent.span_id == chain.context.span_id
