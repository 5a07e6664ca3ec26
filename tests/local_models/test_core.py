"""The in-process recording core on a stand-in library: when a count is usage and when it is
unknown, how a model is named, and what a failure carries. No model is loaded here."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import spanledger
from spanledger import Recorder
from spanledger.capture.local import Library, LocalSpec, counting
from spanledger.errors import ErrorCategory
from spanledger.recording.facts import EmbedFacts, Figures
from spanledger.recording.names import model_label

from .conftest import SENTINEL, Tape


class FakeModel:
    """Tokenizes each batch of two through ``tokenize``; ``rows`` says what a batch reports."""

    def __init__(self, report: Any = None) -> None:
        self.report = report

    def tokenize(self, batch: list[str]) -> list[str]:
        return batch

    def encode(self, texts: list[str]) -> list[list[float]]:
        if not isinstance(texts, list):
            raise TypeError(SENTINEL)
        for start in range(0, len(texts), 2):
            self.tokenize(texts[start : start + 2])
        return [[0.0, 1.0, 2.0] for _ in texts]


def _facts(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[EmbedFacts, int]:
    texts = args[0]
    count = len(texts) if isinstance(texts, list) else 1
    return EmbedFacts(provider="fake", model="m", input_count=count, billing="local"), count


def _read(model: FakeModel) -> Any:
    def read(batch: list[str]) -> tuple[int, int] | None:
        if model.report == "unknown":
            return None
        if model.report == "raise":
            raise RuntimeError(SENTINEL)
        rows = len(batch) - 1 if model.report == "short" else len(batch)
        return rows, sum(len(text.split()) for text in batch)

    return read


def _counting_tokenize(original: Any) -> Any:
    def tokenize(self: FakeModel, batch: list[str]) -> Any:
        return counting(self, lambda: original(self, batch), _read(self))

    return tokenize


@pytest.fixture
def library() -> Iterator[Library]:
    module = types.ModuleType("spanledger_fake_models")
    module.FakeModel = FakeModel  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    bare = dict(vars(FakeModel))
    found = Library(
        module.__name__,
        lambda m: [
            (m.FakeModel, "tokenize", _counting_tokenize),
            (m.FakeModel, "encode", LocalSpec(_facts, lambda r, f: Figures(dimensions=3))),
        ],
    )
    yield found
    found.switch_off()
    for model in list(found.chosen):
        found.release(model)
    assert dict(vars(FakeModel)) == bare
    del sys.modules[module.__name__]


TEXTS = ["one two", "three", "four five six"]


def test_every_batch_counted_is_the_usage(library: Library, tape: Tape) -> None:
    model = FakeModel()
    library.choose(model)
    model.encode(TEXTS)
    (event,) = tape.events
    assert event.usage.input_tokens == 6
    assert event.usage_source == "tokenizer"
    assert event.dimensions == 3


@pytest.mark.parametrize("report", ["short", "unknown", "raise"])
def test_a_count_that_does_not_cover_every_input_is_unknown(
    library: Library, tape: Tape, report: str
) -> None:
    model = FakeModel(report)
    library.choose(model)
    model.encode(TEXTS)
    (event,) = tape.events
    assert event.usage is None
    assert event.usage_source is None


def test_a_tokenizer_run_inside_a_counted_one_counts_once(library: Library, tape: Tape) -> None:
    model = FakeModel()
    library.choose(model)
    original = FakeModel.tokenize

    def nested(self: FakeModel, batch: list[str]) -> Any:
        return counting(self, lambda: original(self, batch), _read(self))

    FakeModel.tokenize = nested  # type: ignore[method-assign]  # counts, around the counting one
    try:
        model.encode(TEXTS)
    finally:
        FakeModel.tokenize = original  # type: ignore[method-assign]
    (event,) = tape.events
    assert event.usage.input_tokens == 6


def test_another_models_tokenizer_is_not_counted(library: Library, tape: Tape) -> None:
    model, other = FakeModel(), FakeModel()
    library.choose(model)
    library.choose(other)
    original = FakeModel.tokenize

    def borrowing(self: FakeModel, batch: list[str]) -> Any:
        original(other, ["extra words here"])  # the counting tokenizer, of another model
        return original(self, batch)

    FakeModel.tokenize = borrowing  # type: ignore[method-assign]
    try:
        model.encode(TEXTS)
    finally:
        FakeModel.tokenize = original  # type: ignore[method-assign]
    (event,) = tape.events
    assert event.usage.input_tokens == 6


def test_a_failure_carries_the_class_only(library: Library, tape: Tape) -> None:
    model = FakeModel()
    library.choose(model)
    with pytest.raises(TypeError, match=SENTINEL):
        model.encode("not a list")  # type: ignore[arg-type]
    (event,) = tape.events
    assert event.error_category is ErrorCategory.INVALID_REQUEST
    assert event.error_type == "TypeError"
    assert SENTINEL not in event.model_dump_json()
    assert SENTINEL not in event.error_message


def test_a_model_not_chosen_passes_through(library: Library, tape: Tape) -> None:
    library.choose(FakeModel())
    FakeModel().encode(TEXTS)
    assert tape.events == []


def test_the_switch_records_every_model(library: Library, tape: Tape) -> None:
    library.switch_on()
    FakeModel().encode(TEXTS)
    library.switch_off()
    FakeModel().encode(TEXTS)
    assert len(tape.events) == 1


def test_nothing_is_recorded_by_an_inactive_recorder(library: Library) -> None:
    model = FakeModel()
    library.choose(model)
    with spanledger.use(Recorder([])):
        assert model.encode(TEXTS) == [[0.0, 1.0, 2.0]] * 3


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
        ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
        ("/home/alice/models/my-embedder", "my-embedder"),
        ("/home/alice/models/my-embedder/", "my-embedder"),
        ("./models/reranker", "reranker"),
        ("~/models/reranker", "reranker"),
        ("C:\\Users\\alice\\models\\e5-small", "e5-small"),
        (
            "/home/alice/.cache/huggingface/hub/models--BAAI--bge-small-en-v1.5/snapshots/5c38ec7",
            "BAAI/bge-small-en-v1.5",
        ),
        ("", None),
        (None, None),
    ],
)
def test_a_model_is_named_without_its_path(given: object, named: str | None) -> None:
    assert model_label(given) == named
