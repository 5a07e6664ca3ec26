"""``spanledger prices check`` and ``spanledger report``, in process and as a subprocess, over
an event log written by real calls through the stand-in."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spanledger import JsonlSink, Recorder, read_events, use
from spanledger.cli import main
from spanledger.costs import CostStatus
from spanledger.errors import ProviderError
from spanledger.ledger import PriceTable
from spanledger.providers import CohereReranker, JinaReranker, OpenAIEmbeddings
from spanledger.testing import StandIn

from .conftest import EXAMPLE_PRICES, REPO_ROOT

RECORDING_PRICES = """
currency = "USD"

[[prices]]
provider = "openai"
model = "text-embedding-3-small"
input_per_mtok = "0.02"

[[prices]]
provider = "openai"
model = "usage-*"
input_per_mtok = "0.02"
per_request = "0.0005"

[[prices]]
provider = "cohere"
model = "rerank-v3.5"
per_search_unit = "0.002"

[[prices]]
provider = "cohere"
model = "slow-*"
per_search_unit = "0.0025"
"""

# The same shape with every rate doubled: a report priced with it must say so.
REPRICING = RECORDING_PRICES.replace('"0.02"', '"0.04"').replace('"0.002"', '"0.004"')
REPRICING = REPRICING.replace('"0.0025"', '"0.005"').replace('"0.0005"', '"0.001"')

STATUS_COUNTS = {"priced": 3, "estimated": 1, "unpriced": 2, "unmetered": 1, "not_billed": 1}


@dataclass(frozen=True)
class Recorded:
    log: Path
    prices: Path
    repricing: Path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, standin: StandIn) -> Recorded:
    """Eight real calls, one JSONL log, priced as they were emitted."""
    folder = tmp_path_factory.mktemp("report")
    prices = folder / "prices.toml"
    prices.write_text(RECORDING_PRICES, encoding="utf-8")
    repricing = folder / "repricing.toml"
    repricing.write_text(REPRICING, encoding="utf-8")
    log = folder / "events.jsonl"
    sink = JsonlSink(log)
    recorder = Recorder([sink], prices=prices)
    with use(recorder):
        with OpenAIEmbeddings(
            "text-embedding-3-small", base_url=standin.base_url("openai")
        ) as embedder:
            embedder.embed(["hello world"] * 3)  # 9 tokens
            embedder.embed(["hello world"] * 3)  # 9 tokens
        with CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere")) as cohere:
            cohere.rerank("q", [f"d{n}" for n in range(250)])  # 3 search units
        with (
            CohereReranker("slow-1500", base_url=standin.base_url("cohere")) as slow,
            pytest.raises(ProviderError),
        ):
            slow.rerank("q", [f"d{n}" for n in range(150)], timeout=0.2)  # ~2 units
        with JinaReranker("jina-unlisted", base_url=standin.base_url("jina")) as jina:
            jina.rerank("q", ["a", "b"])
            jina.rerank("q", ["c"])
        with OpenAIEmbeddings("usage-missing", base_url=standin.base_url("openai")) as blind:
            blind.embed(["x"])
        with (
            OpenAIEmbeddings("fail-500", base_url=standin.base_url("openai")) as failing,
            pytest.raises(ProviderError),
        ):
            failing.embed(["x"])
    recorder.shutdown()
    return Recorded(log, prices, repricing)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def _run_failing(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """A command that fails: its status and its one line of standard error (stdout empty)."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    return code, captured.err


def _report_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out = _run(capsys, "report", *argv, "--json")
    assert code == 0
    data: dict[str, Any] = json.loads(out)
    return data


def _row(data: dict[str, Any], model: str, status: str) -> dict[str, Any]:
    (row,) = [r for r in data["rows"] if r["model"] == model and r["status"] == status]
    assert isinstance(row, dict)
    return row


# --------------------------------------------------------------------------- the log itself


def test_the_log_holds_a_cost_line_for_every_call(recorded: Recorded) -> None:
    log = read_events(recorded.log)
    assert log.problems == []
    assert len(log.events) == 8
    statuses = [event.cost.status.value for event in log.events if event.cost is not None]
    assert len(statuses) == 8
    assert {status: statuses.count(status) for status in STATUS_COUNTS} == STATUS_COUNTS


# --------------------------------------------------------------------------- report --json


def test_json_report_with_prices_has_exact_figures(
    capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    data = _report_json(capsys, str(recorded.log), "--prices", str(recorded.prices))
    assert data["events"] == 8
    assert data["status_counts"] == STATUS_COUNTS
    small = _row(data, "text-embedding-3-small", "priced")
    assert small["calls"] == 2
    assert small["input_tokens"] == 18
    assert isinstance(small["amount"], str)
    assert Decimal(small["amount"]) == Decimal("0.00000036")
    cohere = _row(data, "rerank-v3.5", "priced")
    assert Decimal(cohere["amount"]) == Decimal("0.006")
    assert cohere["search_units"] == 3
    estimated = _row(data, "slow-1500", "estimated")
    assert Decimal(estimated["amount"]) == Decimal("0.005")
    failed = _row(data, "fail-500", "not_billed")
    assert Decimal(failed["amount"]) == 0
    unpriced = _row(data, "jina-unlisted", "unpriced")
    assert unpriced["calls"] == 2
    assert unpriced["amount"] is None
    assert unpriced["currency"] is None
    assert data["spend"] == {"USD": data["spend"]["USD"]}
    assert Decimal(data["spend"]["USD"]) == Decimal("0.01100036")
    assert data["unpriced_models"] == [
        {"provider": "jina", "model": "jina-unlisted", "reason": "no_price_entry", "calls": 2},
        {
            "provider": "openai",
            "model": "usage-missing",
            "reason": "usage_not_reported",
            "calls": 1,
        },
    ]


def test_json_report_without_prices_uses_the_recorded_cost_lines(
    capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    recorded_view = _report_json(capsys, str(recorded.log))
    priced_view = _report_json(capsys, str(recorded.log), "--prices", str(recorded.prices))
    assert recorded_view["status_counts"] == STATUS_COUNTS
    assert recorded_view["spend"] == priced_view["spend"]
    assert recorded_view["rows"] == priced_view["rows"]


def test_json_report_with_other_prices_reprices_every_event(
    capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    data = _report_json(capsys, str(recorded.log), "--prices", str(recorded.repricing))
    assert Decimal(data["spend"]["USD"]) == 2 * Decimal("0.01100036")
    assert data["status_counts"] == STATUS_COUNTS


def test_report_of_a_log_without_cost_lines_counts_them_unpriced(
    capsys: pytest.CaptureFixture[str], recorded: Recorded, tmp_path: Path
) -> None:
    stripped = tmp_path / "bare.jsonl"
    lines = []
    for line in recorded.log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record["cost"] = None
        lines.append(json.dumps(record))
    stripped.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = _report_json(capsys, str(stripped))
    # the failure the provider cannot have billed needs no price; the rest are unpriced
    assert data["status_counts"]["unpriced"] == 7
    assert data["status_counts"]["not_billed"] == 1
    assert data["spend"] == {}
    repriced = _report_json(capsys, str(stripped), "--prices", str(recorded.prices))
    assert repriced["status_counts"] == STATUS_COUNTS


# --------------------------------------------------------------------------- report (text)


def test_text_report_prints_counts_spend_and_unpriced_models(
    capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    code, out = _run(capsys, "report", str(recorded.log), "--prices", str(recorded.prices))
    assert code == 0
    assert "8 calls" in out
    for status, count in STATUS_COUNTS.items():
        assert f"{status}: {count}" in out
    assert "0.01100036 USD" in out
    rows = {tuple(line.split()[:3]) for line in out.splitlines() if line.strip()}
    for provider, model, status in [
        ("openai", "text-embedding-3-small", "priced"),
        ("cohere", "rerank-v3.5", "priced"),
        ("cohere", "slow-1500", "estimated"),
        ("jina", "jina-unlisted", "unpriced"),
        ("openai", "usage-missing", "unmetered"),
        ("openai", "fail-500", "not_billed"),
    ]:
        assert (provider, model, status) in rows
    assert "jina/jina-unlisted: 2 calls" in out
    assert "openai/usage-missing: 1 call (" in out


def test_text_report_rows_show_the_same_amounts_as_json(
    capsys: pytest.CaptureFixture[str], recorded: Recorded
) -> None:
    data = _report_json(capsys, str(recorded.log), "--prices", str(recorded.prices))
    _, out = _run(capsys, "report", str(recorded.log), "--prices", str(recorded.prices))
    lines = out.splitlines()
    for row in data["rows"]:
        if row["amount"] is None:
            continue
        (line,) = [
            text
            for text in lines
            if text.split()[:3] == [row["provider"], row["model"], row["status"]]
        ]
        shown = Decimal(line.split()[4])
        assert shown == Decimal(row["amount"]), f"{row['model']}: {line!r} vs {row['amount']}"


def test_report_with_an_invalid_price_table_fails_naming_it(
    capsys: pytest.CaptureFixture[str], recorded: Recorded, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[prices]]\nprovider = "p"\nmodel = "m"\nper_request = "abc"\n')
    code, err = _run_failing(capsys, "report", str(recorded.log), "--prices", str(bad))
    assert code == 1
    assert err.startswith("error: ")
    assert str(bad) in err
    assert "per_request" in err


def test_report_of_a_missing_log_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    code, err = _run_failing(capsys, "report", str(missing))
    assert code == 1
    assert err == f"error: {missing}: No such file or directory\n"


# --------------------------------------------------------------------------- prices check


def test_example_table_validates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "prices", "check", str(EXAMPLE_PRICES))
    assert code == 0
    assert f"{len(PriceTable.load(EXAMPLE_PRICES).entries)} entries, valid" in out
    assert "invalid" not in out


def _dated_table(tmp_path: Path) -> Path:
    today = datetime.now(UTC).date()
    path = tmp_path / "dated.toml"
    path.write_text(
        f"""
[[prices]]
provider = "openai"
model = "text-embedding-3-small"
input_per_mtok = "0.02"
checked = {today - timedelta(days=3)}

[[prices]]
provider = "openai"
model = "text-embedding-*"
input_per_mtok = "0.1"
checked = {today - timedelta(days=30)}

[[prices]]
provider = "cohere"
model = "rerank-v3.5"
per_search_unit = "0.002"

[[prices]]
provider = "jina"
model = "jina-reranker-*"
input_per_mtok = "0.02"
checked = {today - timedelta(days=10)}

[[prices]]
provider = "jina"
model = "jina-embeddings-*"
input_per_mtok = "0.02"
checked = {today - timedelta(days=11)}
""",
        encoding="utf-8",
    )
    return path


def test_check_reports_overlapping_patterns_and_stale_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _dated_table(tmp_path)
    code, out = _run(capsys, "prices", "check", str(path), "--stale-days", "10")
    assert code == 0
    assert "5 entries, valid" in out
    overlaps = [line for line in out.splitlines() if line.startswith("overlap")]
    assert len(overlaps) == 1
    assert "openai/text-embedding-3-small" in overlaps[0]
    assert "openai/text-embedding-*" in overlaps[0]
    stale = [line for line in out.splitlines() if line.startswith("stale")]
    stale_labels = {line.split()[1] for line in stale}
    assert stale_labels == {
        "openai/text-embedding-*",
        "cohere/rerank-v3.5",
        "jina/jina-embeddings-*",
    }
    assert any("never" in line for line in stale if "cohere/rerank-v3.5" in line)


def test_check_with_a_generous_stale_window_lists_only_unchecked_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _run(capsys, "prices", "check", str(_dated_table(tmp_path)), "--stale-days", "365")
    assert code == 0
    stale = [line for line in out.splitlines() if line.startswith("stale")]
    assert len(stale) == 1
    assert "cohere/rerank-v3.5" in stale[0]


def test_check_of_an_invalid_table_exits_1_naming_file_entry_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "prices": [
                    {"provider": "openai", "model": "a", "input_per_mtok": "0.1"},
                    {"provider": "jina", "model": "b", "input_per_ktok": "0.1"},
                ]
            }
        ),
        encoding="utf-8",
    )
    code, out = _run(capsys, "prices", "check", str(path))
    assert code == 1
    assert str(path) in out
    assert "prices[1]" in out
    assert "jina/b" in out
    assert "input_per_ktok" in out
    assert "valid\n" not in out.replace("invalid", "")


def test_check_of_a_missing_file_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _run(capsys, "prices", "check", str(tmp_path / "absent.toml"))
    assert code == 1
    assert "absent.toml" in out


def _subprocess(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spanledger.cli", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO_ROOT,
        check=False,
    )


def test_check_as_a_subprocess(tmp_path: Path) -> None:
    valid = _subprocess("prices", "check", str(EXAMPLE_PRICES))
    assert valid.returncode == 0, valid.stderr
    assert f"{len(PriceTable.load(EXAMPLE_PRICES).entries)} entries, valid" in valid.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[prices]]\nprovider = "p"\nmodel = "m"\ninput_per_mtok = -1\n')
    invalid = _subprocess("prices", "check", str(bad))
    assert invalid.returncode == 1
    assert str(bad) in invalid.stdout
    assert "prices[0] (p/m)" in invalid.stdout
    assert "input_per_mtok" in invalid.stdout


def test_by_request_keeps_its_columns_for_calls_outside_any_request(
    capsys: pytest.CaptureFixture[str], recorded: Recorded, tmp_path: Path
) -> None:
    """The calls of no request are a row of their own, ``(none)``, in the same columns as a
    request's rows (its empty key once shifted every figure left)."""
    log = tmp_path / "mixed.jsonl"
    lines = recorded.log.read_text(encoding="utf-8").splitlines()
    inside = [  # other calls (a call id counts once), made inside a request
        json.loads(line) | {"request_id": "turn-7", "call_id": f"inside-{n}"}
        for n, line in enumerate(lines[:2])
    ]
    log.write_text("\n".join([*lines, *map(json.dumps, inside)]) + "\n", encoding="utf-8")
    _, out = _run(capsys, "report", str(log), "--by", "request")
    table = out.split("\n\n")[1].splitlines()
    header, rows = table[0], table[1:]
    assert header.split()[:3] == ["request", "status", "calls"]
    assert any(row.startswith("(none) ") for row in rows)
    assert any(row.startswith("turn-7 ") for row in rows)
    status_at = header.index("status")
    for row in rows:
        assert row[status_at:].split()[0] in {s.value for s in CostStatus}
