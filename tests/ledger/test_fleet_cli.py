"""``spanledger report`` and ``spanledger export`` over many logs: files, directories and globs,
``--by``, ``--since`` / ``--until``, CSV, skipped lines counted on standard error, a failing
status when nothing was readable, and Parquet that holds what the report totals."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from spanledger.cli import main
from spanledger.eventlog import event_line
from spanledger.events import Event, RerankUsage
from spanledger.fleet.progress import reading_progress
from tests.ledger.conftest import EXAMPLE_PRICES, embedding_event, rerank_event

DAY = datetime(2026, 11, 3, tzinfo=UTC)
SENTINEL = "SENTINEL-fleet-77d1"


def events_on(day: int, count: int, request: str) -> list[Event]:
    at = DAY + timedelta(days=day, hours=1)
    found: list[Event] = [
        embedding_event("text-embedding-3-small", tokens=100 + n, started_at=at, request_id=request)
        for n in range(count)
    ]
    found.append(rerank_event(usage=RerankUsage(search_units=1), started_at=at, request_id=request))
    return found


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Three hosts' logs in nested directories, one with a corrupt line and a blank line."""
    root = tmp_path / "fleet"
    for host, day in (("a", 0), ("b", 1), ("c", 2)):
        folder = root / host
        folder.mkdir(parents=True)
        lines = b"".join(event_line(e) for e in events_on(day, 3, f"req-{host}"))
        if host == "b":
            lines += b'{"schema": 1, "kind": "embedding", "model": "' + SENTINEL.encode() + b'"}\n'
            lines += b"\nnot json " + SENTINEL.encode() + b"\n"
        (folder / f"events-{host}.jsonl").write_bytes(lines)
    (root / "notes.txt").write_text("not a log")
    return root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_directory_is_read_whole_and_skipped_lines_are_counted_on_stderr(
    capsys: pytest.CaptureFixture[str], fleet: Path
) -> None:
    status, out, err = run(capsys, "report", str(fleet), "--json", "--prices", str(EXAMPLE_PRICES))

    data = json.loads(out)
    assert status == 0
    assert data["events"] == 12
    invalid = (
        "invalid embedding event (fields: call_id, input_count, latency_ms, provider, started_at)"
    )
    assert data["skipped_lines"] == {invalid: 1, "not valid JSON": 1}  # read_events' reasons
    assert err.splitlines() == [f"skipped 1 line: {invalid}", "skipped 1 line: not valid JSON"]
    assert SENTINEL not in out + err


def test_files_and_globs_name_the_logs(capsys: pytest.CaptureFixture[str], fleet: Path) -> None:
    _, by_glob, _ = run(capsys, "report", str(fleet / "*" / "events-[ab].jsonl"), "--json")
    _, by_files, _ = run(
        capsys, "report", str(fleet / "a" / "events-a.jsonl"), str(fleet / "b"), "--json"
    )
    assert json.loads(by_glob)["events"] == json.loads(by_files)["events"] == 8


def test_rows_by_day_and_by_request(capsys: pytest.CaptureFixture[str], fleet: Path) -> None:
    _, out, _ = run(capsys, "report", str(fleet), "--json", "--by", "day,provider")
    days = {(row["day"], row["provider"]): row["calls"] for row in json.loads(out)["rows"]}
    assert days == {
        ("2026-11-03", "openai"): 3,
        ("2026-11-03", "cohere"): 1,
        ("2026-11-04", "openai"): 3,
        ("2026-11-04", "cohere"): 1,
        ("2026-11-05", "openai"): 3,
        ("2026-11-05", "cohere"): 1,
    }
    _, out, _ = run(capsys, "report", str(fleet), "--json", "--by", "request")
    requests = {row["request"]: row["input_tokens"] for row in json.loads(out)["rows"]}
    assert requests == {"req-a": 303, "req-b": 303, "req-c": 303}


def test_since_and_until_keep_calls_started_in_between(
    capsys: pytest.CaptureFixture[str], fleet: Path
) -> None:
    _, out, _ = run(
        capsys, "report", str(fleet), "--json", "--since", "2026-11-04", "--until", "2026-11-05"
    )
    assert json.loads(out)["events"] == 4


def test_csv_rows_carry_the_grouping_and_the_figures(
    capsys: pytest.CaptureFixture[str], fleet: Path
) -> None:
    _, out, _ = run(capsys, "report", str(fleet), "--csv", "--prices", str(EXAMPLE_PRICES))
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["provider"] for row in rows] == ["cohere", "openai"]
    assert rows[1]["calls"] == "9"
    assert rows[1]["input_tokens"] == str(3 * 303)
    assert rows[1]["status"] == "priced"


def test_nothing_readable_fails_with_a_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text("garbage\n")
    status, _, err = run(capsys, "report", str(log))
    assert status == 1
    assert err.splitlines()[-1] == "no readable event in 1 file"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--by", "model,week"], "--by"),
        (["--by", "model,model"], "--by"),
        (["--since", "yesterday"], "--since"),
    ],
)
def test_a_bad_option_is_one_sentence_naming_it(
    capsys: pytest.CaptureFixture[str], fleet: Path, argv: list[str], named: str
) -> None:
    status, _, err = run(capsys, "report", str(fleet), *argv)
    assert status == 1
    assert err.startswith(f"error: {named} ")
    assert len(err.splitlines()) == 1


def test_a_pattern_matching_nothing_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = run(capsys, "report", str(tmp_path / "*.jsonl"))
    assert status == 1
    assert err == f"error: {tmp_path / '*.jsonl'}: no file matches this pattern\n"


def test_export_writes_day_partitions_that_hold_what_the_report_totals(
    capsys: pytest.CaptureFixture[str], fleet: Path, tmp_path: Path
) -> None:
    target = tmp_path / "parquet"
    status, out, err = run(capsys, "export", str(fleet), "--parquet", str(target))
    _, report, _ = run(capsys, "report", str(fleet), "--json")

    assert status == 0
    assert out == f"exported 12 events and 0 attribution records over 3 days to {target}\n"
    assert "skipped 1 line: not valid JSON" in err  # read_events' words
    assert sorted(p.name for p in (target / "events").iterdir()) == [
        "day=2026-11-03",
        "day=2026-11-04",
        "day=2026-11-05",
    ]
    connection = duckdb.connect()
    [(calls, tokens, units)] = connection.execute(
        "SELECT count(*), sum(input_tokens), sum(search_units) FROM "
        f"read_parquet('{target}/events/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    totals = json.loads(report)["rows"]
    assert calls == json.loads(report)["events"]
    assert tokens == sum(row["input_tokens"] or 0 for row in totals)  # null: none reported
    assert units == sum(row["search_units"] or 0 for row in totals)
    written = b"".join(path.read_bytes() for path in target.rglob("*.parquet"))
    assert SENTINEL.encode() not in written


def test_export_refuses_a_directory_that_is_not_empty(
    capsys: pytest.CaptureFixture[str], fleet: Path, tmp_path: Path
) -> None:
    target = tmp_path / "parquet"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    status, _, err = run(capsys, "export", str(fleet), "--parquet", str(target))
    assert status == 1
    assert "new or empty directory" in err
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_on_a_terminal_for_a_long_read_and_then_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spanledger.fleet.progress as progress

    log = tmp_path / "events.jsonl"
    log.write_bytes(b"x" * 2048)
    monkeypatch.setattr(progress, "SHOWN_FROM_BYTES", 1024)
    monkeypatch.setattr(progress, "_EVERY_SECONDS", 0.01)
    shown, quiet = Terminal(), io.StringIO()
    with reading_progress([log], shown):
        __import__("time").sleep(0.05)
    with reading_progress([log], quiet):
        pass
    assert "reading 1 file (0 MB)" in shown.getvalue()
    assert shown.getvalue().endswith("\r\033[K")
    assert quiet.getvalue() == ""


def test_export_keeps_what_each_call_is_billed_by(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A warehouse reading the Parquet can tell a local or a rule-billed call as the ledger
    does: the billing column travels with every event (null where the log never said)."""
    log = tmp_path / "logs" / "events.jsonl"
    log.parent.mkdir()
    local = embedding_event("nomic-embed-text", tokens=5, started_at=DAY).model_copy(
        update={"provider": "ollama", "billing": "local"}
    )
    unsaid = embedding_event("text-embedding-3-small", tokens=7, started_at=DAY)
    log.write_bytes(event_line(local) + event_line(unsaid))
    target = tmp_path / "parquet"
    status, _, _ = run(capsys, "export", str(log.parent), "--parquet", str(target))
    assert status == 0
    rows = duckdb.execute(
        "SELECT provider, billing FROM "
        f"read_parquet('{target}/events/**/*.parquet', hive_partitioning = true) ORDER BY provider"
    ).fetchall()
    assert rows == [("ollama", "local"), ("openai", None)]
