"""DuckDB running out of its working memory (its spill disk full, or a limit too small) is a
sentence naming the spill directory and the limit, as a full disk is: never an "unexpected
error, a bug in spanledger", and never DuckDB's own message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spanledger.cli import main
from spanledger.fleet import scan
from spanledger.fleet.export import export_parquet
from tests.ledger.test_report_cache import lines

TOO_LITTLE = "1MB"
"""Less than DuckDB needs for one query over the smallest log."""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_bytes(lines(0, 40))
    return path


def test_the_scan_says_which_directory_and_limit(log: Path) -> None:
    with pytest.raises(OSError, match="working memory") as raised:
        scan.scan_logs([log], memory_limit=TOO_LITTLE, cache=False)

    assert raised.value.filename == scan.spill_directory()
    assert raised.value.strerror is not None
    assert f"its {TOO_LITTLE} of working memory" in raised.value.strerror
    assert "TMPDIR" in raised.value.strerror


def test_the_export_says_it_too(log: Path, tmp_path: Path) -> None:
    with pytest.raises(OSError, match="working memory") as raised:
        export_parquet([log], tmp_path / "out", memory_limit=TOO_LITTLE)

    assert raised.value.filename == scan.spill_directory()


def test_the_report_command_prints_one_sentence(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    connect = scan.connect

    def starved(memory_limit: str) -> Any:
        return connect(TOO_LITTLE)

    monkeypatch.setattr(scan, "connect", starved)
    status = main(["report", "--json", "--no-cache", str(log)])
    err = capsys.readouterr().err

    assert status == 1
    assert err.splitlines() == [err.strip()]
    assert err.startswith(f"error: {scan.spill_directory()}: DuckDB ran out of its")
    assert "bug" not in err
    assert "Out of Memory Error" not in err  # DuckDB's own words stay out
