"""Hugging Face Text Embeddings Inference: bare arrays, no model on the wire and no usage, and
a 413 above the server's batch limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import DEFAULT_DIMENSIONS, _Answer, _score, standin_vector
from spanledger.testing.routes import Route, _built_in, _error
from spanledger.wire.endpoints import Vendor

__all__ = ["ROUTES", "TEI_MAX_BATCH", "tei_embeddings", "tei_rerank"]

TEI_MAX_BATCH = 32
"""How many inputs a TEI route takes in one request before answering 413, as TEI does."""


def _tei_embed(body: dict[str, Any], model: str, max_batch: int = TEI_MAX_BATCH) -> _Answer:
    texts = body.get("inputs")
    texts = [texts] if isinstance(texts, str) else list(texts or [])
    if len(texts) > max_batch:
        return 413, _error(Vendor.TEI, "/embed", 413).body, {}
    dims = int(body.get("dimensions") or DEFAULT_DIMENSIONS)
    return 200, [standin_vector(t, dims) for t in texts], {}


def _tei_rerank(body: dict[str, Any], model: str, max_batch: int = TEI_MAX_BATCH) -> _Answer:
    query, texts = str(body.get("query", "")), list(body.get("texts") or [])
    if len(texts) > max_batch:
        return 413, _error(Vendor.TEI, "/embed", 413).body, {}
    results = []
    for index, text in enumerate(texts):
        result: dict[str, Any] = {"index": index, "score": _score(query, text)}
        if body.get("return_text"):
            result["text"] = text
        results.append(result)
    results.sort(key=lambda r: -r["score"])
    return 200, results, {}


def _batch(max_batch: int) -> int:
    if isinstance(max_batch, bool) or max_batch < 1:
        raise ValueError(f"max_batch must be a whole number >= 1, not {max_batch!r}")
    return max_batch


def tei_embeddings(*, max_batch: int = TEI_MAX_BATCH) -> Route:
    """TEI ``POST /embed``: a bare array of vectors and no usage (TEI reports none); more than
    ``max_batch`` inputs get TEI's 413."""
    limit = _batch(max_batch)
    return _built_in("tei", "/embed", lambda b, m: _tei_embed(b, m, limit))


def tei_rerank(*, max_batch: int = TEI_MAX_BATCH) -> Route:
    """TEI ``POST /rerank``: a bare array of scored indices and no usage; more than
    ``max_batch`` texts get TEI's 413."""
    limit = _batch(max_batch)
    return _built_in("tei", "/rerank", lambda b, m: _tei_rerank(b, m, limit))


ROUTES: tuple[Callable[[], Route], ...] = (tei_embeddings, tei_rerank)
"""The TEI routes a fresh ``StandIn`` answers."""
