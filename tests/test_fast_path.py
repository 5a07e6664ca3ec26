"""The contributors' fast run (``pytest -m "not slow"``) leaves out what starts backends,
browsers, models, other virtualenvs or waits out time, without importing it; the full run
(CI's) keeps everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collected(*options: str) -> list[str]:
    """The test ids pytest collects from a slow folder, a slow file and a core folder."""
    paths = ["tests/frameworks", "tests/chains/test_deadlines.py", "tests/attribution"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            *list(options),
            *paths,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_fast_run_leaves_the_slow_tests_out_and_keeps_the_core() -> None:
    fast = collected("-m", "not slow")
    assert fast
    assert all(test.startswith("tests/attribution/") for test in fast), fast[:5]


def test_the_full_run_keeps_every_test() -> None:
    full = collected()
    assert any(test.startswith("tests/frameworks/") for test in full)
    assert any(test.startswith("tests/chains/test_deadlines.py") for test in full)
    assert any(test.startswith("tests/attribution/") for test in full)
