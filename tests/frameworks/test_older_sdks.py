"""Runs ``tests/older_sdks`` in ``.venv-older``, where the SDK versions some frameworks pin are
installed (``.ci/install-older-sdks.sh`` makes it): cohere 5.x, voyageai 0.3.x, openai 2.x; and
ollama 0.5.4, below its tested range, for the untested-version rules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import OLDER_SDKS_SUITE
from tests.e2e.conftest import require_backend

ROOT = Path(__file__).parents[2]
PYTHON = ROOT / ".venv-older" / "bin" / "python"


def test_the_integrations_that_pin_older_sdks_pass_with_them() -> None:
    if not PYTHON.exists():
        require_backend("no .venv-older: run .ci/install-older-sdks.sh")
    finished = subprocess.run(
        [str(PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/older_sdks"],
        cwd=ROOT,
        env={**os.environ, OLDER_SDKS_SUITE: "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    tail = finished.stdout[-6000:] + finished.stderr[-2000:]
    assert finished.returncode == 0, tail
    summary = re.search(r"(\d+) passed", finished.stdout)
    assert summary is not None, tail
    assert int(summary.group(1)) >= 10, tail
    assert not re.search(r"\d+ (skipped|xfailed|deselected)", finished.stdout), tail
    assert sys.executable != str(PYTHON)
