from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import redirect_stdout
from decimal import Decimal
from pathlib import Path

import pytest

import spanledger
import spanledger.demo
from spanledger.cli import main
from spanledger.demo import PASSAGES, QUESTION


def test_demo_runs_a_priced_attributed_turn(tmp_path: Path) -> None:
    """The turn's attribution is captured with no hand-written call: the demo serves, renders
    and cites nothing itself (its source holds no such call)."""
    source = Path(spanledger.demo.__file__).read_text()
    assert re.search(r"\.(serve|select|render|cite\w*)\((?!\))", source) is None
    log_path = tmp_path / "events.jsonl"
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["demo", "--events", str(log_path)])
    text = out.getvalue()
    assert status == 0
    assert "STAND-IN" in text
    log = spanledger.read_events(log_path)
    assert log.problems == []
    assert [e.kind for e in log.events] == ["embedding", "embedding", "rerank_failed", "rerank"]
    timed_out = log.events[2]
    assert timed_out.cost is not None
    assert timed_out.cost.status.value == "estimated"  # abandoned after sending: estimated
    assert all(e.cost is not None and e.cost.status.value == "priced" for e in log.events[3:])
    [record] = log.attributions
    assert record.request_id.startswith("demo-turn-")
    assert {e.request_id for e in log.events} == {record.request_id}  # one id, fresh per run
    assert record.frames_served == 6  # the reranker's input, its top 3 selected
    assert record.frames_rendered == 3
    assert record.frames_cited == 2
    assert record.model_calls == 1
    assert record.cited_by == {"prompt_label": 2}  # the answer's [1] and [2]
    assert record.context_spend is not None
    assert record.context_spend > 0
    assert record.unused_context_spend is not None
    assert record.unused_context_spend > 0
    assert record.cited_token_share is not None
    assert 0 < record.cited_token_share < 1
    assert record.reconcilable
    assert record.spend_complete
    assert "cited token share: " in text
    assert "$ spanledger prices example > prices.toml\n" in text
    assert f"$ spanledger report {log_path} --prices prices.toml\n" in text
    assert "attribution over 1 request " in text
    raw_log = log_path.read_text()
    assert QUESTION not in raw_log
    assert all(passage not in raw_log for passage in PASSAGES)


def test_demo_tour_drives_every_provider(tmp_path: Path) -> None:
    log_path = tmp_path / "events.jsonl"
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["demo", "--tour", "--events", str(log_path)])
    text = out.getvalue()
    assert status == 0
    assert "STAND-IN" in text
    log = spanledger.read_events(log_path)
    assert log.problems == []
    kinds = [e.kind for e in log.events]
    assert kinds.count("embedding") == 13
    assert kinds.count("rerank") == 5
    assert kinds.count("rerank_failed") == 1
    assert {e.provider for e in log.events} == {
        "openai",
        "cohere",
        "jina",
        "tei",
        "voyageai",
        "gcp.gemini",
        "gcp.vertex_ai",
        "azure.ai.openai",
        "mistral_ai",
        "ollama",
    }
    chunked = [e for e in log.events if e.kind == "embedding" and e.input_count == 40]
    assert len(chunked) == 1
    malformed = [e for e in log.events if e.model == "usage-malformed"]
    assert malformed[0].usage is None  # type: ignore[union-attr]
    raw_log = log_path.read_text()
    assert QUESTION not in raw_log
    assert all(passage not in raw_log for passage in PASSAGES)
    assert len(text.splitlines()) >= 13


def test_console_script_is_installed(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "spanledger.cli", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "spanledger-events.jsonl").exists()


def test_the_demo_takes_the_settings_it_shows_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    prices = tmp_path / "mine.toml"
    prices.write_text(
        '[[prices]]\nprovider = "cohere"\nmodel = "*"\ninput_per_mtok = "0.2"\n'
        'per_search_unit = "0.003"\n',
        encoding="utf-8",
    )
    log = tmp_path / "logs" / "turns.jsonl"
    log.parent.mkdir()
    monkeypatch.setenv("SPANLEDGER_EVENTS", str(log))
    monkeypatch.setenv("SPANLEDGER_PRICES", str(prices))
    monkeypatch.setenv("SPANLEDGER_CONSOLE", "0")
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "settings from the environment: SPANLEDGER_EVENTS, SPANLEDGER_PRICES, " in out
    assert "prices: mine.toml" in out
    assert "embed  cohere" not in out  # SPANLEDGER_CONSOLE=0: no line per call
    assert f"$ spanledger report {log} --prices {prices}\n" in out
    assert not (tmp_path / "spanledger-events.jsonl").exists()
    events = spanledger.read_events(log).events
    rerank = next(e for e in events if e.kind == "rerank")
    assert rerank.cost is not None
    assert rerank.cost.amount == Decimal("0.003")  # the table given, not the example's


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SPANLEDGER_CONSOLE", "perhaps"),
        ("SPANLEDGER_PRICES", "/no/such/prices.toml"),
        ("SPANLEDGER_EVENTS", "/proc/no-such-dir/events.jsonl"),
    ],
)
def test_a_bad_setting_stops_the_demo_with_its_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    assert main(["demo"]) == 1
    assert capsys.readouterr().err.startswith(f"error: {variable} ")
