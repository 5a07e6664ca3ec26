"""The process-wide switch for in-process models: every model, made before or after it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger.capture.imports import when_imported
from spanledger.instrumentation import instrumented_sdks

from .conftest import FLASHRANK_MODEL, Tape

TEXTS = ["a tick is a small arachnid", "ticks feed on blood"]


def test_models_made_before_and_after_the_switch_record(
    embedder: Any, minilm_path: Path, tape: Tape
) -> None:
    from sentence_transformers import CrossEncoder

    spanledger.instrument(sdks=["sentence_transformers"])
    assert instrumented_sdks() == ("sentence_transformers",)
    embedder.encode(TEXTS)
    made_after = CrossEncoder(str(minilm_path), device="cpu")
    made_after.rank("tick", TEXTS)
    assert [event.kind for event in tape.events] == ["embedding", "rerank"]
    assert all(event.usage is not None for event in tape.events)


def test_switched_off_nothing_records_and_the_classes_are_bare(embedder: Any, tape: Tape) -> None:
    from sentence_transformers import SentenceTransformer

    bare = vars(SentenceTransformer)["encode"]
    spanledger.instrument(sdks=["sentence_transformers"])
    assert vars(SentenceTransformer)["encode"] is not bare
    spanledger.uninstrument()
    assert vars(SentenceTransformer)["encode"] is bare
    embedder.encode(TEXTS)
    assert tape.events == []


def test_a_model_instrumented_by_hand_under_the_switch_records_once(
    embedder: Any, tape: Tape
) -> None:
    spanledger.instrument(embedder)
    spanledger.instrument(sdks=["sentence_transformers"])
    embedder.encode(TEXTS)
    spanledger.uninstrument()
    embedder.encode(TEXTS)  # still instrumented by hand
    assert len(tape.events) == 2
    assert tape.events[0].usage == tape.events[1].usage


def test_flashrank_under_the_switch(ranker: Any, tape: Tape) -> None:
    from flashrank.Ranker import RerankRequest  # type: ignore[import-untyped]

    original = ranker.tokenizer
    spanledger.instrument(sdks=["flashrank"])
    ranker.rerank(RerankRequest(query="tick", passages=[{"text": "a"}, {"text": "b"}]))
    spanledger.uninstrument()
    assert ranker.tokenizer is original
    (event,) = tape.events
    assert event.model == FLASHRANK_MODEL
    assert event.usage is not None


def test_the_default_switch_names_both_and_imports_neither() -> None:
    """Patching waits for the program's own import: torch is not loaded by the switch."""
    code = textwrap.dedent(
        """
        import sys
        import spanledger
        spanledger.instrument()
        names = spanledger.instrumentation.instrumented_sdks()
        assert "sentence_transformers" in names and "flashrank" in names, names
        for module in ("sentence_transformers", "torch", "flashrank.Ranker"):
            assert module not in sys.modules, module
        from flashrank.Ranker import Ranker
        assert hasattr(Ranker.rerank, "__wrapped__"), "not patched on import"
        spanledger.uninstrument()
        assert not hasattr(Ranker.rerank, "__wrapped__"), "still patched"
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_default_switch_skips_a_library_that_is_not_installed() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["flashrank"] = None  # as if it were not installed
        sys.modules["sentence_transformers"] = None
        import spanledger
        spanledger.instrument()
        names = spanledger.instrumentation.instrumented_sdks()
        assert "flashrank" not in names and "sentence_transformers" not in names, names
        assert "openai" in names, names
        spanledger.uninstrument()
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_wait_fires_once_the_module_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spanledger_probe_module.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    waiting = when_imported("spanledger_probe_module", lambda module: seen.append(module.VALUE))
    assert waiting is not None
    assert seen == []
    try:
        import spanledger_probe_module  # type: ignore[import-not-found]

        assert spanledger_probe_module.VALUE == 7
        assert seen == [7]
        assert waiting not in sys.meta_path
        assert when_imported("spanledger_probe_module", lambda m: seen.append(0)) is None
        assert seen == [7, 0]
    finally:
        sys.modules.pop("spanledger_probe_module", None)


def test_an_undone_wait_never_fires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spanledger_probe_other.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[object] = []
    waiting = when_imported("spanledger_probe_other", seen.append)
    assert waiting is not None
    waiting.undo()
    try:
        import spanledger_probe_other  # type: ignore[import-not-found]  # noqa: F401

        assert seen == []
    finally:
        sys.modules.pop("spanledger_probe_other", None)
