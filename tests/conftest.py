"""``tests/older_sdks`` needs the SDK versions some frameworks pin (cohere 5.x, voyageai 0.3.x,
openai 2.x), which cannot share a venv with the dev extra's: it runs in ``.venv-older``, started
by ``tests/frameworks/test_older_sdks.py``, and is left out of every other run."""

from __future__ import annotations

import gc
import os
import sys

import pytest

OLDER_SDKS_SUITE = "SPANLEDGER_OLDER_SDKS_SUITE"

collect_ignore = [] if os.environ.get(OLDER_SDKS_SUITE) == "1" else ["older_sdks"]


@pytest.fixture(autouse=True)
def _structlog_as_an_application_left_it() -> None:
    """Each test starts with structlog unconfigured, as a process that never configured it:
    ``structlog.testing.capture_logs`` leaves structlog marked configured when it restores the
    processors, and spanledger then logs through structlog rather than the standard library,
    which would hide a later test's log records from ``caplog``."""
    structlog = sys.modules.get("structlog")
    if structlog is not None and structlog.is_configured():
        structlog.reset_defaults()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported (every SDK and framework the suite drives, close to a
    million objects) out of the garbage collector: a full collection over it pauses the
    process for half a second, which would land in whatever a timing test happens to time."""
    gc.collect()
    gc.freeze()
