"""``spanledger export`` at fleet scale: a log of millions of calls on one UTC day exports within
the report's memory bound (300 MB peak RSS for the whole process), every row written; and
whether a log's rows fall on one day or on several (written by different paths), each
partition holds exactly what the log holds there, in the declared columns and types, one file
per day under ``<table>/day=YYYY-MM-DD/``, and nothing else is left in the export."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

import spanledger.fleet.progress as progress
from spanledger.costs import CostLine, CostStatus
from spanledger.errors import ErrorCategory
from spanledger.eventlog import event_line
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    RerankEvent,
    RerankUsage,
)
from spanledger.fleet import export
from spanledger.fleet.export import export_parquet
from spanledger.fleet.export_schema import PARTITION, TABLES
from spanledger.fleet.progress import progress_step, reading_progress
from tests.ledger.conftest import rerank_event

DAY = datetime(2026, 11, 3, tzinfo=UTC)
PEAK_MB = 300
"""The report's own bound on peak RSS, which an export must keep too."""
CALLS = 1_500_000
"""Calls in the big log (608 MB): enough that the export as it was (one ``PARTITION_BY`` copy
per table) peaked at 435 MB, where it now peaks near 180 MB; some 10 s to write and export."""
RECORD_EVERY = 16
"""One attribution record after every 16 calls in the big log."""


# --------------------------------------------------------------------------- at scale


def write_big_log(path: Path, calls: int) -> int:
    """``calls`` minimal embedding lines spread over one UTC day, and an attribution record
    after every ``RECORD_EVERY`` of them, written by templating one line of each; the records
    written."""
    stamp = "2026-11-03T00:00:00Z"
    call = event_line(
        EmbeddingEvent(
            call_id="@ID@",
            provider="openai",
            model="m",
            started_at=DAY,
            latency_ms=1.0,
            input_count=1,
        )
    )
    record = event_line(
        AttributionRecord(
            request_id="@ID@",
            at=DAY,
            frames_served=2,
            frames_rendered=2,
            frames_cited=1,
            rendered_tokens=10,
            cited_tokens=5,
            uncited_rendered_tokens=5,
            reconcilable=True,
            calls=1,
            billed_input_tokens=7,
            billed_search_units=0,
            calls_without_usage=0,
            spend_complete=False,
        )
    )
    templates = [
        line.decode().replace("%", "%%").replace("@ID@", "%s").replace(stamp, "%s")
        for line in (call, record)
    ]
    step = 86_400_000_000 // calls
    records = 0
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, calls, 100_000):
            chunk = []
            for number in range(start, min(calls, start + 100_000)):
                seconds, micros = divmod(number * step, 1_000_000)
                minutes, second = divmod(seconds, 60)
                at = f"2026-11-03T{minutes // 60:02d}:{minutes % 60:02d}:{second:02d}.{micros:06d}Z"
                chunk.append(templates[0] % (f"call-{number}", at))
                if number % RECORD_EVERY == RECORD_EVERY - 1:
                    chunk.append(templates[1] % (f"request-{number}", at))
                    records += 1
            out.write("".join(chunk))
    return records


PEAK = """
import runpy, sys
peak, *arguments = sys.argv[1:]
sys.argv = ["spanledger", *arguments]
try:
    runpy.run_module("spanledger.cli", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as status, open(peak, "w") as out:
        out.write(status.read().split("VmHWM:")[1].split()[0])
"""
"""Runs the CLI and writes the process's peak RSS (KiB) to a file: the kernel's high-water
mark of its own memory. Not ``ru_maxrss``, which a child starts from the RSS of the process
that forked it (this test run's, easily some hundreds of MB)."""


def export_measured(log: Path, target: Path, tmp_path: Path) -> tuple[int, float, str, str]:
    """``spanledger export log --parquet target`` in a child process: its exit status, its
    peak RSS in MB, and what it wrote on standard output and on standard error."""
    peak = tmp_path / "peak"
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(peak), "export", str(log), "--parquet", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, int(peak.read_text()) / 1024, done.stdout, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak from /proc")
def test_a_day_of_millions_of_calls_exports_within_the_reports_memory_bound(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    records = write_big_log(log, CALLS)
    target = tmp_path / "parquet"
    status, peak, said, warned = export_measured(log, target, tmp_path)
    log.unlink()
    assert status == 0, warned
    assert said == (
        f"exported {CALLS} events and {records} attribution records over 1 day to {target}\n"
    )
    assert peak <= PEAK_MB, f"peak RSS {peak:.0f} MB"
    connection = duckdb.connect()
    try:
        for table, rows in (("events", CALLS), ("attribution", records)):
            files = list((target / table).rglob("*.parquet"))
            assert {file.parent.name for file in files} == {"day=2026-11-03"}
            [(count,)] = connection.execute(
                f"SELECT count(*) FROM read_parquet('{target}/{table}/**/*.parquet')"
            ).fetchall()
            assert count == rows, table
    finally:
        connection.close()


# --------------------------------------------------------------------------- one day or many


def turn(number: int, at: datetime) -> list[bytes]:
    """One request's lines: calls of every shape (with usage, with search units, failed with
    an estimate, with a cost line), then its attribution record."""
    request = f"turn-{number}"
    cost = CostLine(CostStatus.PRICED, Decimal("0.000000000000000000123"), "USD", price_entry="e")
    calls: list[EmbeddingEvent | RerankEvent | EmbeddingFailedEvent] = [
        EmbeddingEvent(
            call_id=f"{request}-a",
            request_id=request,
            provider="openai",
            model="text-embedding-3-small",
            started_at=at,
            latency_ms=3.25,
            server_address="127.0.0.1",
            server_port=8080,
            input_count=2,
            input_type="document",
            dimensions=16,
            usage=EmbeddingUsage(input_tokens=40 + number, billable_characters=120),
            cost=cost,
            billing="tokens",
        ),
        rerank_event(
            call_id=f"{request}-b",
            request_id=request,
            started_at=at + timedelta(seconds=1),
            top_k=2,
            usage=RerankUsage(search_units=1),
        ),
        EmbeddingFailedEvent(
            call_id=f"{request}-c",
            request_id=request,
            provider="voyageai",
            model="voyage-3.5",
            started_at=at + timedelta(seconds=2),
            latency_ms=500.0,
            input_count=1,
            error_category=ErrorCategory.RATE_LIMIT,
            error_type="RateLimitError",
            status_code=429,
            retry_after=1.5,
            estimated_usage=EmbeddingUsage(input_tokens=9),
            attempt=2,
            retried=True,
            logical_call_id=f"{request}-logical",
        ),
    ]
    record = AttributionRecord(
        request_id=request,
        at=at + timedelta(seconds=3),
        frames_served=3,
        frames_rendered=2,
        frames_cited=1,
        rendered_tokens=14,
        cited_tokens=7,
        uncited_rendered_tokens=7,
        cited_token_share=0.5,
        reconcilable=number % 2 == 0,
        calls=3,
        billed_input_tokens=49 + number,
        billed_search_units=1,
        calls_without_usage=0,
        spend=Decimal("0.00003"),
        currency="USD",
        spend_complete=True,
        spend_per_cited_token=Decimal("0.000004285714285714285714285714286"),
        model_calls=1,
        quoted_tokens=0,
        cited_by={"provider_citation": 1},
        context_spend=Decimal("0.00002"),
        cited_context_spend=Decimal("0.00001"),
        unused_context_spend=Decimal("0.00001"),
        context_currency="USD",
        capture_cut={"frames": number},
    )
    return [*(event_line(call) for call in calls), event_line(record)]


_NESTED = {
    "input_tokens": ("usage", "input_tokens"),
    "search_units": ("usage", "search_units"),
    "billable_characters": ("usage", "billable_characters"),
    "estimated_input_tokens": ("estimated_usage", "input_tokens"),
    "estimated_search_units": ("estimated_usage", "search_units"),
    "cost_status": ("cost", "status"),
    "cost_amount": ("cost", "amount"),
    "cost_currency": ("cost", "currency"),
    "cost_code": ("cost", "code"),
    "price_entry": ("cost", "price_entry"),
}
"""Where a flattened ``events`` column sits in a logged line (the rest are top-level keys)."""


def reference(lines: Sequence[bytes]) -> dict[str, list[tuple[Any, ...]]]:
    """What each table must hold for ``lines``, read straight from their JSON: each declared
    column's value (times as UTC datetimes) and the row's UTC day, rows sorted."""
    tables: dict[str, list[tuple[Any, ...]]] = {table: [] for table in TABLES}
    for line in lines:
        data = json.loads(line)
        table = "attribution" if data["kind"] == "attribution" else "events"
        row: list[Any] = []
        for name in TABLES[table]:
            outer, inner = _NESTED.get(name, (name, "")) if table == "events" else (name, "")
            value = (data.get(outer) or {}).get(inner) if inner else data.get(outer)
            if name in ("started_at", "at"):
                value = moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            row.append(value)
        tables[table].append((*row, moment.astimezone(UTC).date()))
    return {table: sorted(rows, key=repr) for table, rows in tables.items()}


def exported(target: Path) -> Iterator[tuple[str, list[tuple[Any, ...]], list[tuple[str, str]]]]:
    """Each table of the export at ``target``: its rows with their day (sorted), and the
    columns and types DuckDB reads from its partition tree."""
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    try:
        for table in TABLES:
            read = f"read_parquet('{target}/{table}/**/*.parquet', hive_partitioning = true)"
            rows = connection.execute(f"SELECT * FROM {read}").fetchall()
            described = connection.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()
            yield table, sorted(rows, key=repr), [(str(n), str(k)) for n, k, *_ in described]
    finally:
        connection.close()


@pytest.mark.parametrize("days", [1, 3], ids=["one-day", "three-days"])
def test_each_day_holds_exactly_what_the_log_holds_in_the_declared_columns(
    tmp_path: Path, days: int
) -> None:
    """One day is written straight from the log, several through a staged copy: both give
    the log's rows, values and types, one file per day, and leave nothing else behind."""
    lines = [
        line
        for number in range(12)
        for line in turn(number, DAY + timedelta(days=number % days, hours=number))
    ]
    log = tmp_path / "logs" / "events.jsonl"
    log.parent.mkdir()
    log.write_bytes(b"".join(lines) + b"not json\n")
    target = tmp_path / "parquet"
    done = export_parquet([log], target)
    expected = reference(lines)
    assert (done.events, done.attribution_records, done.days) == (36, 12, days)
    assert sum(done.problems.values()) == 1  # the line that is not JSON, whatever its reason
    assert sorted(path.name for path in target.iterdir()) == sorted(TABLES)  # nothing staged left
    partitions = [f"day={(DAY + timedelta(days=day)).date().isoformat()}" for day in range(days)]
    for table, rows, columns in exported(target):
        files = sorted((target / table).rglob("*"))
        assert [path.relative_to(target / table).as_posix() for path in files] == [
            name for day in partitions for name in (day, f"{day}/data_0.parquet")
        ], table
        assert columns == [*TABLES[table].items(), PARTITION], table
        assert rows == expected[table], table
        assert {row[-1] for row in rows} == {
            date.fromisoformat(day.removeprefix("day=")) for day in partitions
        }


# --------------------------------------------------------------------------- progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_export_shows_the_step_it_is_at_and_how_far_along(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The progress line names the step the work is at and its percentage (none when the
    figure cannot be had), and outside a shown progress line a step is a no-op."""
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"x" * 2048)
    monkeypatch.setattr(progress, "SHOWN_FROM_BYTES", 1024)
    monkeypatch.setattr(progress, "_EVERY_SECONDS", 0.01)
    progress_step("nothing shown", lambda: 1.0)

    def broken() -> float:
        raise RuntimeError("closed")

    shown = Terminal()
    with reading_progress([log], shown):
        time.sleep(0.05)
        progress_step("writing events", lambda: 42.4)
        time.sleep(0.05)
        progress_step("staging attribution", broken)
        time.sleep(0.05)
    lines = shown.getvalue().split("\r")
    assert any(line.endswith("s, writing events 42%\033[K") for line in lines)
    assert any(line.endswith("s, staging attribution\033[K") for line in lines)
    assert shown.getvalue().endswith("\r\033[K")


@pytest.mark.parametrize(
    ("days", "steps"),
    [
        (1, ["judging lines", "counting lines", "writing events", "writing attribution", ""]),
        (
            2,
            [
                "judging lines",
                "counting lines",
                "staging events",
                "writing events, day 1 of 2",
                "writing events, day 2 of 2",
                "staging attribution",
                "writing attribution, day 1 of 2",
                "writing attribution, day 2 of 2",
                "",
            ],
        ),
    ],
    ids=["one-day", "two-days"],
)
def test_the_export_names_each_step_for_the_progress_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: int, steps: list[str]
) -> None:
    named: list[str] = []
    monkeypatch.setattr(export, "progress_step", lambda name, percent=None: named.append(name))
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        b"".join(line for day in range(days) for line in turn(day, DAY + timedelta(days=day)))
    )
    export.export_parquet([log], tmp_path / "parquet")
    assert named == steps
