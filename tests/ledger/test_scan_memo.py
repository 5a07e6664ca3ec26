"""A report over logs unchanged since the last one is answered from the remembered scan: the
same figures as ``--no-cache``, with no line judged and DuckDB never started; any change to a
log or to what is asked is a scan of its own; a damaged, foreign or mistyped result is never
trusted; and results are bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spanledger.fleet import scan_memo
from spanledger.fleet.scan import Scan
from tests.ledger.conftest import (
    COMMON_MEMO_DAMAGE,
    LOG_CHANGES,
    REPO_ROOT,
    change_log,
    damage_memo,
    rewrite_memo,
)
from tests.ledger.test_one_reader import SENTINEL
from tests.ledger.test_report_cache import lines, report

pytestmark = pytest.mark.usefixtures("cache_dir")


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many scans really ran (DuckDB connections made) since the test began."""
    from spanledger.fleet import scan

    made: list[int] = []
    connect = scan.connect

    def counted(memory_limit: str) -> Any:
        made.append(1)
        return connect(memory_limit)

    monkeypatch.setattr(scan, "connect", counted)
    return made


def results(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "scans").glob("*.json"))


def logs(tmp_path: Path) -> tuple[Path, Path]:
    log, other = tmp_path / "events.jsonl", tmp_path / "other.jsonl"
    log.write_bytes(lines(0, 30) + b"not json\n" + lines(10, 5))  # repeated call ids
    other.write_bytes(lines(28, 4) + b'{"schema": 1}\n')  # repeats across files too
    return log, other


@pytest.mark.parametrize(
    "by", [("provider", "model"), ("request",), ("day", "provider"), ("model",)]
)
def test_an_unchanged_report_is_answered_without_scanning(
    tmp_path: Path, scans: list[int], by: tuple[str, ...]
) -> None:
    log, other = logs(tmp_path)
    fresh = report(log, other, cache=False, by=by)
    assert report(log, other, by=by) == fresh
    assert len(scans) == 2
    assert report(log, other, by=by) == fresh
    assert report(log, other, by=by) == fresh
    assert len(scans) == 2  # both answered from the result


def test_the_result_is_the_scan_exactly(tmp_path: Path) -> None:
    from spanledger.fleet.scan import scan_logs

    log, other = logs(tmp_path)
    scanned = scan_logs([log, other], by=("request",), windows=[datetime(2026, 11, 1, tzinfo=UTC)])
    assert scanned.attribution.by_request
    recalled = scan_logs([log, other], by=("request",), windows=[datetime(2026, 11, 1, tzinfo=UTC)])
    assert recalled == scanned
    assert recalled is not scanned


def test_each_question_has_its_own_result(tmp_path: Path, scans: list[int]) -> None:
    from spanledger.fleet.scan import scan_logs

    log, other = logs(tmp_path)
    asked: list[dict[str, Any]] = [
        {},
        {"by": ("model",)},
        {"since": datetime(2026, 11, 3, 0, 10, tzinfo=UTC)},
        {"until": datetime(2026, 11, 3, 0, 10, tzinfo=UTC)},
        {"windows": [datetime(2026, 11, 3, 0, 5, tzinfo=UTC)]},
        {"recorded_costs": True},
        {"daily": True},
    ]
    answers = [scan_logs([log, other], **options) for options in asked]
    assert len(scans) == len(asked)
    assert len(results(tmp_path / "xdg" / "spanledger" / "report-cache")) == len(asked)
    again = [scan_logs([log, other], **options) for options in asked]
    assert again == answers
    assert len(scans) == len(asked)
    assert scan_logs([other, log]) == scan_logs([other, log], cache=False)  # order is a key too


@pytest.mark.parametrize("change", LOG_CHANGES)
def test_a_changed_log_is_scanned_again(tmp_path: Path, scans: list[int], change: str) -> None:
    log, other = logs(tmp_path)
    report(log, other)
    change_log(log, change, lines(100, 3))
    before = len(scans)
    assert report(log, other) == report(log, other, cache=False)
    assert len(scans) == before + 2


@pytest.mark.parametrize(
    "damage",
    [*COMMON_MEMO_DAMAGE, "figure changed", "mistyped with its digest", "other key"],
)
def test_a_damaged_or_foreign_result_is_never_trusted(
    tmp_path: Path, cache_dir: Path, scans: list[int], damage: str
) -> None:
    log, other = logs(tmp_path)
    expected = report(log, other, cache=False)
    report(log, other)
    [where] = results(cache_dir)
    head, _, payload = where.read_bytes().partition(b"\n")
    header = json.loads(head)
    if damage in COMMON_MEMO_DAMAGE:
        damage_memo(where, damage)
    elif damage == "figure changed":  # one digit, the digest left as it was
        where.write_bytes(head + b"\n" + payload.replace(b'"lines":', b'"lines":1', 1))
    elif damage == "mistyped with its digest":  # a count as text, and a digest vouching for it
        payload = payload.replace(b'"events":', b'"events":"', 1)
        payload = payload.replace(b',"problems"', b'","problems"', 1)
        assert json.loads(payload)["events"].isdigit()
        rewrite_memo(where, header, payload, vouch=True)
    else:  # another question's result put under this one's name
        bigger = report(log, other, by=("request",))
        assert bigger != expected
        [mine] = [path for path in results(cache_dir) if path.name == where.name]
        [theirs] = [path for path in results(cache_dir) if path != mine]
        theirs.replace(mine)
    before = len(scans)
    assert report(log, other) == expected
    assert len(scans) == before + 1
    assert report(log, other) == expected  # rewritten whole: answered from it again
    assert len(scans) == before + 1


def test_results_are_bounded_and_go_with_their_logs(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, other = logs(tmp_path)
    monkeypatch.setattr(scan_memo, "KEPT", 2)
    for by in (("provider",), ("model",), ("provider", "model")):
        report(log, other, by=by)
    assert len(results(cache_dir)) == 2
    alone = tmp_path / "alone.jsonl"
    alone.write_bytes(lines(300, 3))
    report(alone)
    assert len(results(cache_dir)) == 2
    other.unlink()
    report(alone, by=("model",))
    left = [json.loads(path.read_bytes().partition(b"\n")[0]) for path in results(cache_dir)]
    assert len(left) == 2
    alone_key = f"{alone.stat().st_dev:x}-{alone.stat().st_ino:x}"
    assert all(header["entries"] == [alone_key] for header in left)  # the pair's went


def test_results_are_bounded_in_bytes_and_a_huge_one_is_not_kept(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, scans: list[int]
) -> None:
    log, other = logs(tmp_path)
    report(log, other)
    [first] = results(cache_dir)
    monkeypatch.setattr(scan_memo, "KEPT_BYTES", first.stat().st_size + 10)
    report(log, other, by=("model",))
    [newest] = results(cache_dir)
    assert newest != first
    monkeypatch.setattr(scan_memo, "LARGEST", 100)
    report(log, other, by=("provider",))
    assert results(cache_dir) == [newest]
    report(log, other, by=("provider",))
    assert len(scans) == 4  # the huge one was scanned each time


def test_a_report_answered_from_its_result_never_imports_duckdb(tmp_path: Path) -> None:
    log, other = logs(tmp_path)
    child = (
        "import sys, io\n"
        "from spanledger.cli import main\n"
        "sys.stdout = io.StringIO()\n"
        f"status = main(['report', '--json', {str(log)!r}, {str(other)!r}])\n"
        "sys.stdout = sys.__stdout__\n"
        "print(status, 'duckdb' in sys.modules)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}

    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", child],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
            env=env,
        )
        return done.stdout.strip()

    assert run() == "0 True"
    shutil.rmtree(tmp_path / "xdg" / "spanledger" / "report-cache" / "answers")
    assert run() == "0 False"  # answered from the scan it remembered


def test_no_payload_reaches_a_result(tmp_path: Path, cache_dir: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(
        lines(0, 6)
        + f"not json {SENTINEL}\n".encode()
        + f'{{"schema":1,"kind":"rerank","model":"{SENTINEL}"}}\n'.encode()
    )
    first = report(log, by=("request",))
    assert report(log, by=("request",)) == first
    [result] = results(cache_dir)
    assert SENTINEL.encode() not in result.read_bytes()


def test_a_full_disk_is_one_warning_and_the_same_report(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.ledger.test_report_cache import report_and_warnings

    log, other = logs(tmp_path)
    expected = report(log, other, cache=False)

    def full(target: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scan_memo, "write_atomically", full)
    data, err = report_and_warnings(log, other)
    assert data == expected
    assert err.count("cannot be written") == 1
    assert "No space left on device" in err
    assert results(cache_dir) == []
    assert report_and_warnings(log, other) == (expected, err)


def test_the_scan_round_trips_through_its_json_form() -> None:
    scan = Scan([], 0, 0, {}, _attribution(), 0)
    assert scan_memo._adapter(Scan).validate_json(scan_memo._adapter(Scan).dump_json(scan)) == scan


def _attribution() -> Any:
    from decimal import Decimal

    from spanledger.attribution.summary import AttributionFigures

    return AttributionFigures(requests=2, mean_share=0.1 + 0.2, spend=Decimal("0.000000001"))
