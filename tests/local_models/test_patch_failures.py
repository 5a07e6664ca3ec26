"""An in-process library whose classes cannot be patched (a release that moved a method) is
left exactly as it is, with one warning, whether it was imported before the switch or after;
the rest is switched on, and nothing is raised into the program or its import."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import spanledger
from spanledger.instrumentation import (
    SdkState,
    _skipped,
    instrumented_sdks,
    is_instrumented,
    sdk_status,
    sentence_transformers_model,
)

from .conftest import Tape


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    _skipped._forget_warnings()
    yield
    _skipped._forget_warnings()


def test_a_moved_method_leaves_the_imported_library_unpatched(
    embedder: Any, tape: Tape, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from sentence_transformers.base.model import BaseModel
    from sentence_transformers.sentence_transformer.model import SentenceTransformer

    library = sentence_transformers_model.LIBRARY
    declared = library.patches

    def with_a_moved_method(package: Any) -> Any:
        found = declared(package)
        return [*found, (SentenceTransformer, "encode_moved_away", found[1][2])]

    monkeypatch.setattr(library, "patches", with_a_moved_method)
    before = (vars(BaseModel).get("preprocess"), vars(SentenceTransformer).get("encode"))
    spanledger.instrument(sdks=["sentence_transformers", "openai"])
    spanledger.instrument(sdks=["sentence_transformers"])

    assert instrumented_sdks() == ("openai",)
    assert (vars(BaseModel).get("preprocess"), vars(SentenceTransformer).get("encode")) == before
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.getMessage().startswith("library_not_patched ")
    ]
    [warning] = warnings
    assert "package='sentence-transformers'" in warning
    assert "AttributeError" in warning
    assert sdk_status()["sentence_transformers"].state is SdkState.FAILED

    with pytest.raises(TypeError, match="could not be patched"):
        spanledger.instrument(embedder)
    assert not is_instrumented(embedder)
    embedder.encode(["a tick"])
    assert tape.events == []


IMPORTED_AFTER = """
from spanledger.integrations.flashrank import ranker

declared = ranker._patches

def with_a_moved_method(module):  # the declared patch, then one the release moved
    return [*declared(module), (module.Ranker, "rerank_moved_away", ranker._counted_rerank)]

ranker.LIBRARY.patches = with_a_moved_method
import spanledger
from spanledger.instrumentation import sdk_status
spanledger.instrument(sdks=["flashrank"])
import flashrank  # its import goes on, unpatched
assert not hasattr(vars(flashrank.Ranker)["rerank"], "__wrapped__"), "half-patched"
print(sdk_status()["flashrank"].state.value)
"""


def test_a_library_imported_after_the_switch_that_cannot_be_patched_is_left_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_AFTER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["failed"]
    [warning] = [line for line in done.stderr.splitlines() if "library_not_patched" in line]
    assert "package='flashrank'" in warning
    assert "AttributeError" in warning
    assert "rerank_moved_away" not in warning  # named by type, never by message
