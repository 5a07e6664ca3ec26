"""``iter_events`` streams a log with the same line rules as ``read_events``, and importing
spanledger never imports DuckDB (only the report and export commands do)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import spanledger
from spanledger.eventlog import LogProblem, event_line, iter_records, read_events
from spanledger.events import AttributionRecord, EmbeddingEvent, EmbeddingUsage


def event(number: int) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"call-{number}",
        provider="openai",
        model="m",
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=number),
    )


RECORD = AttributionRecord(
    request_id="r1",
    at=datetime(2026, 11, 1, tzinfo=UTC),
    frames_served=1,
    frames_rendered=1,
    frames_cited=1,
    rendered_tokens=10,
    cited_tokens=5,
    uncited_rendered_tokens=5,
    cited_token_share=0.5,
    reconcilable=True,
    calls=1,
    billed_input_tokens=3,
    billed_search_units=0,
    calls_without_usage=0,
    spend_complete=False,
)


def test_iter_events_yields_what_read_events_reads_in_order(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        event_line(event(1))
        + b"not json\n"
        + event_line(RECORD)
        + b"\n"
        + event_line(event(2))
        + b'{"schema": 1, "kind": "embedding"'  # torn last line
    )
    problems: list[LogProblem] = []

    streamed = list(spanledger.iter_events(log, problems.append))
    whole = read_events(log)

    assert [e.call_id for e in streamed] == ["call-1", "call-2"] == [e.call_id for e in whole]
    assert problems == whole.problems
    assert [p.line_number for p in problems] == [2, 6]
    assert whole.truncated_tail
    assert [type(r).__name__ for r in iter_records(log)] == [
        "EmbeddingEvent",
        "AttributionRecord",
        "EmbeddingEvent",
    ]


def test_iter_events_reads_lazily(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"".join(event_line(event(n)) for n in range(3)))
    stream = spanledger.iter_events(log)
    first = next(stream)
    with log.open("ab") as more:
        more.write(event_line(event(3)))  # written after the read began, still reached
    assert [first.call_id, *(e.call_id for e in stream)] == [f"call-{n}" for n in range(4)]


def test_importing_spanledger_does_not_import_duckdb() -> None:
    code = "import sys, spanledger, spanledger.cli; print('duckdb' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
