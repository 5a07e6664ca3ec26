"""``spanledger report`` asked again over logs unchanged since prints what it printed before,
byte for byte (output, warnings and status), without scanning or pricing (what it imports:
``tests/reliability/test_cli_imports.py``); anything else it depends on (the groupings, the
window, the output form, the price table's path or bytes, a log's change) is another question
and runs in full; a damaged, foreign or mistyped answer is never trusted; a page,
``--no-cache`` and a skipped log always run in full.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from spanledger import cli
from spanledger.ledger.prices import PriceTable
from tests.ledger.conftest import (
    COMMON_MEMO_DAMAGE,
    LOG_CHANGES,
    REPO_ROOT,
    change_log,
    damage_memo,
    rewrite_memo,
)
from tests.ledger.test_log_sources import refuse
from tests.ledger.test_one_reader import SENTINEL
from tests.ledger.test_report_cache import lines

EXAMPLE_PRICES = REPO_ROOT / "src" / "spanledger" / "data" / "example-prices.toml"
SMALL = 'model = "text-embedding-3-small"\ninput_per_mtok = "0.02"'
DEARER = 'model = "text-embedding-3-small"\ninput_per_mtok = "20"'


pytestmark = pytest.mark.usefixtures("cache_dir")


@pytest.fixture
def full_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many reports ran in full (priced a scan) since the test began."""
    from spanledger.fleet import report

    ran: list[int] = []
    price_scan = report.price_scan

    def counted(*args: Any, **kwargs: Any) -> Any:
        ran.append(1)
        return price_scan(*args, **kwargs)

    monkeypatch.setattr(report, "price_scan", counted)
    return ran


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Any:
    """``spanledger ARGS`` in this process: its status, standard output and standard error."""

    def ran(*args: str | Path) -> tuple[int, str, str]:
        status = cli.main([str(arg) for arg in args])
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return ran


def logs(tmp_path: Path) -> tuple[Path, Path]:
    log, other = tmp_path / "events.jsonl", tmp_path / "other.jsonl"
    log.write_bytes(lines(0, 30) + b"not json\n" + lines(10, 5))  # skipped, repeated
    other.write_bytes(lines(28, 4) + b'{"schema": 1}\n')
    return log, other


def answers(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "answers").glob("*.json"))


@pytest.mark.parametrize("form", [(), ("--json",), ("--csv",)])
@pytest.mark.parametrize("priced", [False, True])
def test_a_report_asked_again_prints_the_same_bytes_without_running(
    tmp_path: Path, run: Any, full_runs: list[int], form: tuple[str, ...], priced: bool
) -> None:
    log, other = logs(tmp_path)
    asked = [
        "report",
        log,
        other,
        *form,
        *(("--prices", EXAMPLE_PRICES) if priced else ()),
        "--by",
        "day,model",
    ]
    fresh = run(*asked, "--no-cache")
    assert fresh[0] == 0
    assert "skipped 1 line: not valid JSON" in fresh[2]
    assert run(*asked) == fresh
    assert len(full_runs) == 2
    assert run(*asked) == fresh
    assert run(*asked) == fresh
    assert len(full_runs) == 2  # answered from what was printed


def test_a_report_of_nothing_readable_keeps_its_status(
    tmp_path: Path, run: Any, full_runs: list[int]
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"not json\n" * 3)
    first = run("report", log, "--json")
    assert first[0] == 1
    assert "no readable event in 1 file" in first[2]
    assert run("report", log, "--json") == first
    assert len(full_runs) == 1


def test_each_question_has_its_own_answer(tmp_path: Path, run: Any, full_runs: list[int]) -> None:
    log, other = logs(tmp_path)
    prices = tmp_path / "prices.toml"
    shutil.copy(EXAMPLE_PRICES, prices)
    moved = tmp_path / "moved.toml"
    shutil.copy(EXAMPLE_PRICES, moved)
    questions: list[tuple[str | Path, ...]] = [
        (),
        ("--json",),
        ("--csv",),
        ("--by", "model"),
        ("--by", "request"),
        ("--since", "2026-11-03T00:10"),
        ("--until", "2026-11-03T00:10"),
        ("--prices", prices),
        ("--prices", moved),  # the same bytes under another name
    ]
    printed = [run("report", log, other, *asked) for asked in questions]
    assert len({out for _, out, _ in printed}) == len(questions) - 1  # the two tables agree
    assert len(answers(tmp_path / "xdg" / "spanledger" / "report-cache")) == len(questions)
    again = [run("report", log, other, *asked) for asked in questions]
    assert again == printed
    assert len(full_runs) == len(questions)
    assert run("report", other, log) == run("report", other, log, "--no-cache")  # order too


def test_a_price_table_edited_in_place_is_another_question(
    tmp_path: Path, run: Any, full_runs: list[int]
) -> None:
    log, other = logs(tmp_path)
    prices = tmp_path / "prices.toml"
    shutil.copy(EXAMPLE_PRICES, prices)
    before = run("report", log, other, "--json", "--prices", prices)
    stamp = prices.stat().st_mtime_ns
    prices.write_text(EXAMPLE_PRICES.read_text().replace(SMALL, DEARER))
    os.utime(prices, ns=(stamp, stamp))  # the same time: only its bytes say it changed
    after = run("report", log, other, "--json", "--prices", prices)
    assert after == run("report", log, other, "--json", "--prices", prices, "--no-cache")
    assert json.loads(after[1])["spend"] != json.loads(before[1])["spend"]
    assert len(full_runs) == 3


def test_a_table_changed_while_the_report_ran_is_not_remembered(
    tmp_path: Path, cache_dir: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, other = logs(tmp_path)
    prices = tmp_path / "prices.toml"
    shutil.copy(EXAMPLE_PRICES, prices)
    load = PriceTable.load

    def loaded_then_edited(path: Path) -> Any:
        table = load(path)
        path.write_text(path.read_text().replace(SMALL, DEARER))
        return table

    monkeypatch.setattr(PriceTable, "load", loaded_then_edited)
    run("report", log, other, "--json", "--prices", prices)
    assert answers(cache_dir) == []
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert run("report", log, other, "--json", "--prices", prices) == run(
        "report", log, other, "--json", "--prices", prices, "--no-cache"
    )


@pytest.mark.parametrize("change", LOG_CHANGES)
def test_a_changed_log_runs_in_full_and_is_counted(
    tmp_path: Path, run: Any, full_runs: list[int], change: str
) -> None:
    log, other = logs(tmp_path)
    read = json.loads(run("report", log, other, "--json")[1])["lines_read"]
    run("report", log, other, "--json")
    change_log(log, change, lines(100, 3))
    changed = run("report", log, other, "--json")
    assert changed == run("report", log, other, "--json", "--no-cache")
    assert len(full_runs) == 3
    if change == "append":
        assert json.loads(changed[1])["lines_read"] == read + len(lines(100, 3).splitlines())


@pytest.mark.parametrize(
    "damage",
    [
        *COMMON_MEMO_DAMAGE,
        "output changed",
        "status as text with its digest",
        "a key too many with its digest",
        "other key",
    ],
)
def test_a_damaged_or_foreign_answer_is_never_trusted(
    tmp_path: Path, cache_dir: Path, run: Any, full_runs: list[int], damage: str
) -> None:
    log, other = logs(tmp_path)
    expected = run("report", log, other, "--json")
    [where] = answers(cache_dir)
    head, _, payload = where.read_bytes().partition(b"\n")
    header = json.loads(head)
    stored = json.loads(payload)
    if damage in COMMON_MEMO_DAMAGE:
        damage_memo(where, damage)
    elif damage == "output changed":  # one digit, the digest left as it was
        where.write_bytes(head + b"\n" + payload.replace(b'\\"events\\": ', b'\\"events\\": 1', 1))
    elif damage == "status as text with its digest":
        rewrite_memo(where, header, json.dumps({**stored, "status": "0"}).encode(), vouch=True)
    elif damage == "a key too many with its digest":
        rewrite_memo(where, header, json.dumps({**stored, "exit": 0}).encode(), vouch=True)
    else:  # another question's answer put under this one's name
        run("report", log, other, "--csv")
        [theirs] = [path for path in answers(cache_dir) if path != where]
        theirs.replace(where)
    assert where.read_bytes() != head + b"\n" + payload
    before = len(full_runs)
    assert run("report", log, other, "--json") == expected
    assert len(full_runs) == before + 1
    assert run("report", log, other, "--json") == expected  # rewritten whole: answered again
    assert len(full_runs) == before + 1


@pytest.mark.parametrize("asked", ["--no-cache", "--html", "--skip-unreadable"])
def test_what_always_runs_in_full(
    tmp_path: Path,
    cache_dir: Path,
    run: Any,
    full_runs: list[int],
    asked: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, other = logs(tmp_path)
    locked = tmp_path / "locked.jsonl"
    locked.write_bytes(lines(50, 2))
    refuse(monkeypatch, locked)
    extra: list[str | Path] = [asked, tmp_path / "page.html"] if asked == "--html" else [asked]
    sources = [log, other, *([locked] if asked == "--skip-unreadable" else [])]
    first = run("report", *sources, *extra)
    assert first[0] == 0, first[2]
    assert ("unreadable path" in first[2]) == (asked == "--skip-unreadable")
    assert first == run("report", *sources, *extra)
    assert len(full_runs) == 2
    assert answers(cache_dir) == []


def test_no_payload_reaches_an_answer(tmp_path: Path, cache_dir: Path, run: Any) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        lines(0, 6)
        + f"not json {SENTINEL}\n".encode()
        + f'{{"schema":1,"kind":"rerank","model":"{SENTINEL}"}}\n'.encode()
    )
    for form in ((), ("--json",), ("--csv",)):
        first = run("report", log, "--by", "request", *form)
        assert run("report", log, "--by", "request", *form) == first
        assert SENTINEL not in first[1] + first[2]
    assert len(answers(cache_dir)) == 3
    assert all(SENTINEL.encode() not in path.read_bytes() for path in answers(cache_dir))


def test_a_log_skipped_as_unreadable_is_never_answered_for(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, other = logs(tmp_path)
    locked = tmp_path / "locked.jsonl"
    locked.write_bytes(lines(50, 2))
    readable = run("report", log, other, "--json")
    assert run("report", log, other, "--json") == readable
    refuse(monkeypatch, locked)
    skipping = run("report", log, other, locked, "--json", "--skip-unreadable")
    assert "skipped 1 unreadable path" in skipping[2]
    assert json.loads(skipping[1])["unreadable_paths"] == [str(locked)]


def test_a_bad_price_table_is_named_before_a_missing_log(tmp_path: Path, run: Any) -> None:
    log, other = logs(tmp_path)
    prices = tmp_path / "prices.toml"
    prices.write_text("not = [toml")
    run("report", log, other)
    status, out, err = run("report", log, tmp_path / "gone.jsonl", "--prices", prices)
    assert (status, out) == (1, "")
    assert str(prices) in err
    assert "gone.jsonl" not in err
