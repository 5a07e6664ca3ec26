"""The command behaves as users expect: ``--version``, help when run bare, the example price
table on demand (so the demo's closing command works as pasted), counts that agree with their
nouns, columns as wide as their longest value, and a failure that was not billed needs no price."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import spanledger
from spanledger.cli import main
from spanledger.errors import ErrorCategory
from spanledger.eventlog import event_line
from spanledger.events import EmbeddingEvent, EmbeddingFailedEvent, EmbeddingUsage
from spanledger.ledger import PriceTable, example_prices_path

LONG_MODEL = "jina-reranker-v2-base-multilingual-with-a-very-long-suffix"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_version_and_bare_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spanledger.cli", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (0, f"spanledger {spanledger.__version__}\n")
    bare = subprocess.run([sys.executable, "-m", "spanledger.cli"], capture_output=True, text=True)
    assert bare.returncode == 0
    assert "usage: spanledger" in bare.stdout
    assert "report" in bare.stdout
    assert "demo" in bare.stdout


def test_prices_example_prints_a_table_that_loads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(capsys, "prices", "example")
    table = tmp_path / "prices.toml"
    table.write_text(out)
    assert status == 0
    assert out == example_prices_path().read_text(encoding="utf-8")
    assert PriceTable.load(table).entries


def test_the_demos_closing_commands_work_as_pasted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, out, _ = run(capsys, "demo", "--events", "events.jsonl")
    assert status == 0
    assert ", 1 search unit\n" in out  # counts agree in the request's report too
    assert "  cost estimated     1 call   0.00000795 USD\n" in out
    commands = [line[2:] for line in out.splitlines() if line.startswith("$ spanledger ")]
    assert commands == [
        "spanledger prices example > prices.toml",
        "spanledger report events.jsonl --prices prices.toml",
    ]
    status, table, _ = run(capsys, "prices", "example")
    (tmp_path / "prices.toml").write_text(table)
    status, report, _ = run(capsys, "report", "events.jsonl", "--prices", "prices.toml")
    assert status == 0
    assert "4 calls" in report


def test_two_demo_runs_keep_their_requests_apart(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "events.jsonl"
    run(capsys, "demo", "--events", str(log))
    monkeypatch.setattr(
        "spanledger.demo.datetime",
        type("Later", (), {"now": staticmethod(lambda tz: datetime(2030, 1, 1, tzinfo=UTC))}),
    )
    run(capsys, "demo", "--events", str(log))
    requests = {record.request_id for record in spanledger.read_events(log).attributions}
    assert len(requests) == 2


def event(model: str, **fields: object) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"c1-{model}",  # one call per model: the report counts a call id once
        provider="jina",
        model=model,
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=3),
        **fields,
    )


def test_counts_agree_and_long_model_names_keep_the_columns_aligned(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(event_line(event(LONG_MODEL)) + event_line(event("m")))
    _, out, _ = run(capsys, "report", str(log))
    lines = out.splitlines()
    assert lines[0] == "2 calls"
    header = next(line for line in lines if line.startswith("provider"))
    rows = [line for line in lines if line.startswith("jina ")]
    assert len(rows) == 2
    status_column = header.index("status")
    assert all(row[status_column:].startswith("unpriced") for row in rows)
    assert f"jina/{LONG_MODEL}: 1 call (no_price_entry)" in out


def test_a_failure_that_was_not_billed_needs_no_price(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    refused = EmbeddingFailedEvent(
        call_id="c2",
        provider="voyageai",
        model="fail-429",
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=1.0,
        input_count=1,
        error_category=ErrorCategory.RATE_LIMIT,
        error_type="http_429",
        status_code=429,
    )
    log = tmp_path / "events.jsonl"
    log.write_bytes(event_line(refused))
    _, out, _ = run(capsys, "report", str(log))
    assert "not_billed: 1" in out
    assert "not priced" not in out  # nothing to add to the price table
