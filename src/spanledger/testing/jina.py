"""Jina's embeddings and rerank: OpenAI's list shape with ``usage.total_tokens`` only, which
Voyage answers too (with its own keys for the results and their limit)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import (
    DEFAULT_DIMENSIONS,
    _Answer,
    _as_list,
    _data_embeddings,
    _reports,
    _score,
    _tokens,
    _usage_value,
)
from spanledger.testing.routes import Route, _figure, _usage_route

__all__ = ["ROUTES", "jina_embeddings", "jina_rerank"]


def _token_usage(model: str, tokens: int, report: bool) -> dict[str, Any]:
    if not _reports(model, report):
        return {}
    return {"usage": {"total_tokens": _usage_value(model, tokens)}}


def _jina_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = _as_list(body.get("input"))
    dims = int(body.get("dimensions") or body.get("output_dimension") or DEFAULT_DIMENSIONS)
    tokens = sum(_tokens(t) for t in texts) if figure is None else figure
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": _data_embeddings(body, texts, dims),
        **_token_usage(model, tokens, report),
    }
    return 200, payload, {}


def _jina_rerank(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    *,
    results_key: str = "results",
    limit_key: str = "top_n",
) -> _Answer:
    """Jina's rerank answer. Voyage's is the same under its own keys (``data``, ``top_k``),
    echoing documents only when asked, each as itself rather than as ``{"text": ...}``."""
    query, documents = str(body.get("query", "")), list(body.get("documents") or [])
    echo = body.get("return_documents", results_key == "results")
    ranked = []
    for index, document in enumerate(documents):
        result: dict[str, Any] = {"index": index, "relevance_score": _score(query, document)}
        if echo:
            result["document"] = {"text": document} if results_key == "results" else document
        ranked.append(result)
    ranked.sort(key=lambda r: -r["relevance_score"])
    limit = body.get(limit_key)
    tokens = _tokens(query) * len(documents) + sum(_tokens(d) for d in documents)
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        results_key: ranked[:limit] if isinstance(limit, int) else ranked,
        **_token_usage(model, tokens if figure is None else figure, report),
    }
    return 200, payload, {}


def jina_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Jina ``POST /v1/embeddings``: reports ``tokens`` as ``usage.total_tokens`` (by default
    counted from the texts), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _usage_route("jina", "/v1/embeddings", _jina_embed, figure, report_usage)


def jina_rerank(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Jina ``POST /v1/rerank``: reports ``tokens`` as ``usage.total_tokens`` (by default the
    query counted once per document plus the documents), or none when ``report_usage`` is False.
    """
    figure = _figure("tokens", tokens)
    return _usage_route("jina", "/v1/rerank", _jina_rerank, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (jina_embeddings, jina_rerank)
"""The Jina routes a fresh ``StandIn`` answers."""
