"""The report reads a log as ``read_events`` does: generated logs, good and corrupt, give the
same calls, figures, spend and skipped lines both ways, line for line.

The reference side is the library's own: ``read_events`` per file, each call id counted once
across the files, priced from the cost lines it recorded by ``build_spend_report``.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanledger.costs import CostLine, CostStatus
from spanledger.errors import ErrorCategory
from spanledger.eventlog import event_line, read_events
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankUsage,
)
from spanledger.fleet import lines as reader
from spanledger.ledger.report import build_spend_report
from spanledger.reporting import run_report

DAY = datetime(2026, 11, 3, tzinfo=UTC)
SENTINEL = "SENTINEL-one-reader-5be2"

_FIGURES = st.one_of(st.none(), st.integers(min_value=0, max_value=10**6))
_AMOUNTS = st.one_of(st.none(), st.sampled_from(["0", "0.000012", "1.5", "0.002"]))


@st.composite
def _events(draw: st.DrawFn, number: int) -> Event:
    """A sound event of any kind, with or without usage and a recorded cost."""
    kind = draw(st.sampled_from(["embedding", "embedding_failed", "rerank"]))
    amount = draw(_AMOUNTS)
    status = CostStatus.PRICED if amount is not None else draw(st.sampled_from(list(CostStatus)))
    cost = draw(
        st.one_of(
            st.none(),
            st.just(
                CostLine(status, Decimal(amount) if amount else None, "USD" if amount else None)
            ),
        )
    )
    common: dict[str, Any] = {
        "call_id": f"call-{number}",
        "provider": draw(st.sampled_from(["openai", "cohere", "voyageai"])),
        "model": draw(st.sampled_from(["m-1", "m-2"])),
        "started_at": DAY + timedelta(minutes=draw(st.integers(0, 3000))),
        "latency_ms": 3.0,
        "cost": cost,
    }
    if kind == "embedding":
        tokens, characters = draw(_FIGURES), draw(_FIGURES)
        usage = (
            EmbeddingUsage(input_tokens=tokens, billable_characters=characters)
            if tokens is not None or characters is not None
            else None
        )
        return EmbeddingEvent(**common, input_count=1, usage=usage)
    if kind == "embedding_failed":
        return EmbeddingFailedEvent(
            **common, input_count=1, error_category=ErrorCategory.UNAVAILABLE
        )
    tokens, units = draw(_FIGURES), draw(_FIGURES)
    usage_r = (
        RerankUsage(input_tokens=tokens, search_units=units)
        if tokens is not None or units is not None
        else None
    )
    return RerankEvent(**common, query_length=4, document_count=3, result_count=2, usage=usage_r)


_CORRUPTIONS: list[tuple[tuple[str, ...], Any]] = [
    (("usage", "input_tokens"), "1000"),
    (("usage", "input_tokens"), 1000.7),
    (("usage", "input_tokens"), True),
    (("usage", "input_tokens"), "abc"),
    (("usage", "input_tokens"), -5000),
    (("usage", "search_units"), 1.0),
    (("schema",), True),
    (("schema",), "1"),
    (("schema",), 1.0),
    (("schema",), 2),
    (("started_at",), "2026-11-03T24:00:00Z"),
    (("started_at",), "2026-11-03 10:00:00 EST"),
    (("started_at",), 1762164000),
    (("started_at",), "1762164000"),
    (("started_at",), "2026-11-03T10:00:00"),
    (("started_at",), "2026-11-03 10:00:00+02:00"),
    (("cost", "amount"), "abc"),
    (("cost", "amount"), "1e999999999"),
    (("cost", "amount"), "NaN"),
    (("cost", "amount"), "-1"),
    (("cost", "amount"), "1_000"),
    (("cost", "status"), "free"),
    (("provider",), 7),
    (("latency_ms",), -1),
    (("kind",), "embeddings"),
    (("newer_field",), {"added": "later"}),
    (("cost", "newer_field"), 1),
]


@st.composite
def _line(draw: st.DrawFn, number: int) -> bytes:
    """One line: a sound event as written, the same with spaces, a corrupted one, or noise."""
    event = draw(_events(number))
    written = event_line(event)
    shape = draw(st.sampled_from(["written", "written", "spaced", "corrupt", "noise", "blank"]))
    if shape == "written":
        return written
    data = json.loads(written)
    if shape == "spaced":
        return json.dumps(data).encode() + b"\n"
    if shape == "corrupt":
        path, value = draw(st.sampled_from(_CORRUPTIONS))
        target = data
        for key in path[:-1]:
            if not isinstance(target.get(key), dict):
                target[key] = {}
            target = target[key]
        target[path[-1]] = value
        return json.dumps(data, separators=(",", ":")).encode() + b"\n"
    if shape == "noise":
        return draw(
            st.sampled_from(
                [
                    f"not json {SENTINEL}\n".encode(),
                    b"[1, 2]\n",
                    b'{"schema": 1}\n',
                    b'{"kind": "embedding"}\n',
                    f'{{"schema":1,"kind":"rerank","model":"{SENTINEL}"}}\n'.encode(),
                    b'{"schema":1,"latency_ms":NaN}\n',
                ]
            )
        )
    return b"   \n"


@st.composite
def _logs(draw: st.DrawFn) -> list[bytes]:
    """Two or three files of lines; some lines copied into another file (a rotated copy), and
    sometimes a last line cut short (a writer still writing)."""
    files = draw(st.integers(2, 3))
    numbers = iter(range(10_000))
    contents = [
        [draw(_line(next(numbers))) for _ in range(draw(st.integers(0, 8)))] for _ in range(files)
    ]
    copied = draw(st.lists(st.integers(0, 7), max_size=3))
    for index in copied:
        if contents[0] and index < len(contents[0]):
            contents[1].append(contents[0][index])
    blobs = [b"".join(lines) for lines in contents]
    if draw(st.booleans()) and blobs[-1]:
        blobs[-1] = blobs[-1][: draw(st.integers(1, max(1, len(blobs[-1]) - 1)))]
    return blobs


def _expected(paths: list[Path]) -> dict[str, Any]:
    """What the library's own reading says: rows, events, skipped lines and duplicates."""
    seen: set[str] = set()
    events: list[Event] = []
    problems: Counter[str] = Counter()
    duplicates = 0
    for path in paths:
        log = read_events(path)
        problems.update(problem.reason for problem in log.problems)
        for event in log.events:
            if event.call_id in seen:
                duplicates += 1
                continue
            seen.add(event.call_id)
            events.append(event)
    report = build_spend_report(events).to_json()
    return {
        "rows": report["rows"],
        "spend": report["spend"],
        "events": len(events),
        "skipped_lines": dict(problems),
        "duplicates": duplicates,
    }


def _reported(paths: list[Path]) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    run_report([str(path) for path in paths], None, as_json=True, out=out, err=err)
    data = json.loads(out.getvalue())
    assert SENTINEL not in out.getvalue() + err.getvalue()
    return {
        "rows": data["rows"],
        "spend": data["spend"],
        "events": data["events"],
        "skipped_lines": data["skipped_lines"],
        "duplicates": data["duplicate_calls_dropped"],
    }


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(blobs=_logs())
def test_the_report_reads_every_log_as_read_events_does(
    tmp_path_factory: pytest.TempPathFactory, blobs: list[bytes]
) -> None:
    folder = tmp_path_factory.mktemp("logs")
    paths = []
    for index, blob in enumerate(blobs):
        path = folder / f"host-{index}.jsonl"
        path.write_bytes(blob)
        paths.append(path)
    expected = _expected(paths)
    if expected["events"] == 0 and not any(blobs):
        return
    assert _reported(paths) == expected


def test_judging_in_parallel_byte_ranges_keeps_every_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker processes each judging small byte ranges find what one process finds: no line
    lost or read twice at a range's edge, and a cut last line is still the truncated tail."""
    lines = [
        event_line(
            EmbeddingEvent(
                call_id=f"c{n}",
                provider="openai",
                model="m",
                started_at=DAY,
                latency_ms=1.0,
                input_count=1,
                usage=EmbeddingUsage(input_tokens=n),
            )
        )
        for n in range(400)
    ]
    lines[17] = b'{"schema":1,"kind":"embedding","usage":{"input_tokens":"1000"}}\n'
    log = tmp_path / "big.jsonl"
    log.write_bytes(b"".join(lines) + lines[0][:30])
    (tmp_path / "serial").mkdir()
    serial = reader.read_logs([log], tmp_path / "serial", workers=1)
    monkeypatch.setattr(reader, "_RANGE_BYTES", 997)  # ranges end mid-line, often
    monkeypatch.setattr(reader, "_PARALLEL_BYTES", 0)
    (tmp_path / "parallel").mkdir()
    parallel = reader.read_logs([log], tmp_path / "parallel", workers=2)
    assert parallel.lines == serial.lines == 401
    assert (
        parallel.problems
        == serial.problems
        == {
            "invalid embedding event (fields: call_id, input_count, latency_ms, model, provider, "
            "started_at, usage)": 1,
            reader.TRUNCATED: 1,
        }
    )
    kept = b"".join(path.read_bytes() for path in parallel.sources)
    assert kept.count(b"\n") == 399
    assert kept == b"".join(line for n, line in enumerate(lines) if n != 17)


def test_two_different_lines_with_one_call_id_count_one_call(tmp_path: Path) -> None:
    """A call id met twice counts one call even when the two lines differ (a copy edited, a
    retry logged twice): the report keeps one of them, and says it dropped the other."""
    first = EmbeddingEvent(
        call_id="same",
        provider="openai",
        model="m",
        started_at=DAY,
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=10),
    )
    second = first.model_copy(update={"usage": EmbeddingUsage(input_tokens=30)})
    (tmp_path / "a.jsonl").write_bytes(event_line(first))
    (tmp_path / "b.jsonl").write_bytes(event_line(second))
    reported = _reported([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    assert reported["events"] == 1
    assert reported["duplicates"] == 1
    [row] = reported["rows"]
    assert (row["calls"], row["input_tokens_calls"]) == (1, 1)
    assert row["input_tokens"] in (10, 30)


def test_names_with_glob_characters_are_read_literally(tmp_path: Path) -> None:
    """DuckDB expands any name it is given as a pattern: ``a[1].jsonl`` must not read
    ``a1.jsonl``, and ``c*.jsonl`` must not read ``c-other.jsonl`` a second time."""

    def log(path: Path, calls: int, model: str) -> None:
        path.write_bytes(
            b"".join(
                event_line(
                    EmbeddingEvent(
                        call_id=f"{path.name}-{n}",
                        provider="openai",
                        model=model,
                        started_at=DAY,
                        latency_ms=1.0,
                        input_count=1,
                    )
                )
                for n in range(calls)
            )
        )

    log(tmp_path / "a[1].jsonl", 1, "bracketed")
    log(tmp_path / "a1.jsonl", 5, "plain")
    assert [row["model"] for row in _reported([tmp_path / "a[1].jsonl"])["rows"]] == ["bracketed"]
    other = tmp_path / "other"
    other.mkdir()
    log(other / "c*.jsonl", 3, "m")
    log(other / "c-other.jsonl", 3, "m")
    assert _reported(sorted(other.iterdir()))["events"] == 6


def test_a_line_still_being_written_is_the_truncated_tail(tmp_path: Path) -> None:
    """A writer mid-line leaves a last line without its newline: counted as the truncated
    tail, in ``read_events``' words; a whole last record without its newline still counts."""
    whole = [
        event_line(
            EmbeddingEvent(
                call_id=f"c{n}",
                provider="openai",
                model="m",
                started_at=DAY,
                latency_ms=1.0,
                input_count=1,
            )
        )
        for n in range(3)
    ]
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(whole[0] + whole[1] + whole[2][:40])
    reported = _reported([cut])
    assert read_events(cut).problems[-1].reason == reader.TRUNCATED
    assert (reported["events"], reported["skipped_lines"]) == (2, {reader.TRUNCATED: 1})
    kept = tmp_path / "kept.jsonl"
    kept.write_bytes(whole[0] + whole[1] + whole[2].rstrip(b"\n"))
    assert (_reported([kept])["events"], _reported([kept])["skipped_lines"]) == (3, {})


def test_the_export_holds_what_read_events_keeps_each_call_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``spanledger export`` writes exactly the calls ``read_events`` keeps, a rotated copy's
    calls once, and counts the skipped lines by ``read_events``' reasons."""
    import duckdb

    from spanledger.cli import main

    events = [
        EmbeddingEvent(
            call_id=f"c{n}",
            provider="openai",
            model="m",
            started_at=DAY + timedelta(hours=n),
            latency_ms=1.0,
            input_count=1,
            usage=EmbeddingUsage(input_tokens=n + 1),
        )
        for n in range(4)
    ]
    written = [event_line(event) for event in events]
    bad = json.loads(written[0]) | {"call_id": "bad", "usage": {"input_tokens": "1000"}}
    (tmp_path / "logs").mkdir()
    first = tmp_path / "logs" / "a.jsonl"
    first.write_bytes(b"".join(written) + json.dumps(bad).encode() + b"\n")
    rotated = tmp_path / "logs" / "a.jsonl.1.jsonl"
    rotated.write_bytes(written[1] + written[2])  # a rotated copy of two calls
    capsys.readouterr()
    assert main(["export", str(tmp_path / "logs"), "--parquet", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    [reason] = [problem.reason for problem in read_events(first).problems]
    assert f"skipped 1 line: {reason}" in err
    assert "counted once: 2 lines repeating a call already counted" in err
    rows = (
        duckdb.connect()
        .execute(
            f"SELECT call_id, input_tokens FROM read_parquet('{tmp_path}/out/events/**/*.parquet')"
        )
        .fetchall()
    )
    assert sorted(rows) == [(f"c{n}", n + 1) for n in range(4)]
