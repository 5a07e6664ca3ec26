"""``tests/older_sdks`` needs the SDK versions some frameworks pin (cohere 5.x, voyageai 0.3.x,
openai 2.x), which cannot share a venv with the dev extra's: it runs in ``.venv-older``, started
by ``tests/frameworks/test_older_sdks.py``, and is left out of every other run."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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


TESTS = Path(__file__).parent
SLOW_FOLDERS = frozenset(
    {
        "differential",
        "e2e",
        "e2e_langfuse",
        "fleet_html",
        "frameworks",
        "local_models",
        "older_sdks",
        "packaging",
        "reliability",
        "standin",
    }
)
"""Folders whose tests start real backends, browsers, models, other venvs or fuzzers."""
SLOW_FILES = frozenset(
    {
        "test_demo.py",
        "test_fast_path.py",
        "test_docs_site.py",
        "test_layers.py",
        "test_peer_matrix.py",
        "test_readme_examples.py",
        # Each of these spends seconds waiting out deadlines, retries and timeouts on purpose,
        # or serves recorded traffic through every tool and path:
        "test_caller_deadlines.py",
        "test_deadlines.py",
        "test_fleet_report_totals.py",
        "test_loopback.py",
        "test_never_raises.py",
        "test_sdk_edges.py",
        "test_sdk_retries.py",
        "test_served_by_tools.py",
        "test_testing_module.py",
        "test_untested_versions.py",
    }
)
"""Files of other folders that build the docs, run every example, drive peers' SDKs, or wait
out time on purpose."""


def _slow(path: Path) -> bool:
    parts = path.relative_to(TESTS).parts
    return bool(parts) and (parts[0] in SLOW_FOLDERS or path.name in SLOW_FILES)


_TEST_CACHE = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The run's report cache starts empty and is its own: ``XDG_CACHE_HOME`` points at a fresh
    folder (children inherit it), so no test's outcome depends on what an earlier run left in
    the user's cache, and the run leaves nothing there. Every other tool's cache folder is
    linked in as it is (LlamaIndex's downloaded data, for one), so only spanledger's is new."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    isolated = Path(tempfile.mkdtemp(prefix="spanledger-test-cache-"))
    if home.is_dir():
        for entry in home.iterdir():
            if entry.name != "spanledger":
                (isolated / entry.name).symlink_to(entry)
    os.environ["XDG_CACHE_HOME"] = str(isolated)
    config.stash[_TEST_CACHE] = isolated


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's own cache folder goes (the links in it, never what they point at)."""
    isolated = config.stash.get(_TEST_CACHE, None)
    if isolated is not None:
        shutil.rmtree(isolated, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark what the contributors' fast run leaves out (``pytest -m "not slow"``)."""
    for item in items:
        if _slow(item.path):
            item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast run, do not even import what it leaves out (the frameworks, torch): the
    imports alone would take a good part of its two minutes."""
    if config.getoption("markexpr", "") != "not slow":
        return None
    try:
        return _slow(collection_path) or None
    except ValueError:  # a path outside tests/
        return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection imported (every SDK and framework the suite drives, close to a
    million objects) out of the garbage collector: a full collection over it pauses the
    process for half a second, which would land in whatever a timing test happens to time."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def where_modes_bind(tmp_path: Path) -> list[str]:
    """The command prefix under which mode bits stop this user: none for a user; for root,
    ``setpriv`` without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH. Skips, saying why, when
    root cannot shed them here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root reads every file whatever its mode, and setpriv is not installed")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]
    probe = tmp_path / "probe"
    probe.write_text("")
    probe.chmod(0)
    done = subprocess.run(
        [*prefix, sys.executable, "-c", f"open({str(probe)!r}).close()"],
        capture_output=True,
        check=False,
    )
    probe.unlink()
    if done.returncode == 0:
        pytest.skip("root reads every file whatever its mode, even without the DAC capabilities")
    return prefix
