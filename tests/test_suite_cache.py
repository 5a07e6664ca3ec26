"""The suite's report cache is its own: a test never reads what an earlier run left in the
user's cache folder, and never writes there."""

from __future__ import annotations

import os
from pathlib import Path

from spanledger.fleet.report_cache import cache_root


def test_the_report_cache_is_the_runs_own() -> None:
    root = cache_root()
    assert not root.is_relative_to(Path.home() / ".cache")
    assert root.parent.parent == Path(os.environ["XDG_CACHE_HOME"])
    assert not root.parent.is_symlink()


def test_other_tools_caches_are_linked_in_as_they_are() -> None:
    home = Path.home() / ".cache"
    if not home.is_dir():
        return
    ours = Path(os.environ["XDG_CACHE_HOME"])
    for entry in home.iterdir():
        if entry.name != "spanledger":
            assert (ours / entry.name).resolve() == entry.resolve()
