"""Cohere's embed and rerank, v2 (``cohere.ClientV2``) and the older v1 (``cohere.Client``):
billed units under ``meta``, tokens for embed and search units for rerank."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import (
    DEFAULT_DIMENSIONS,
    _Answer,
    _document_text,
    _reports,
    _score,
    _tokens,
    _usage_value,
    standin_vector,
)
from spanledger.testing.routes import Route, _figure, _usage_route

__all__ = [
    "ROUTES",
    "cohere_embeddings",
    "cohere_rerank",
    "cohere_v1_embeddings",
    "cohere_v1_rerank",
]


def _cohere_embed(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    version: str = "2",
) -> _Answer:
    texts = list(body.get("texts") or [])
    dims = int(body.get("output_dimension") or DEFAULT_DIMENSIONS)
    vectors = [standin_vector(t, dims) for t in texts]
    payload: dict[str, Any] = {
        "id": f"standin-{hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]}",
        "embeddings": {"float": vectors},
        "texts": texts,
        "meta": {"api_version": {"version": version}},
    }
    if version == "1":  # v1 answers a plain request with the vectors themselves
        by_type = bool(body.get("embedding_types"))
        payload["embeddings"] = {"float": vectors} if by_type else vectors
        payload["response_type"] = "embeddings_by_type" if by_type else "embeddings_floats"
    if _reports(model, report):
        tokens = sum(_tokens(t) for t in texts) if figure is None else figure
        payload["meta"]["billed_units"] = {"input_tokens": _usage_value(model, tokens)}
    return 200, payload, {}


def _cohere_rerank(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    version: str = "2",
) -> _Answer:
    query = str(body.get("query", ""))
    documents = [_document_text(d) for d in body.get("documents") or []]
    echo = version == "1" and bool(body.get("return_documents"))
    ranked: list[dict[str, Any]] = sorted(
        (
            {"index": i, "relevance_score": _score(query, d)}
            | ({"document": {"text": d}} if echo else {})
            for i, d in enumerate(documents)
        ),
        key=lambda r: -r["relevance_score"],
    )
    top_n = body.get("top_n")
    results = ranked[:top_n] if isinstance(top_n, int) else ranked
    payload: dict[str, Any] = {
        "id": "standin-rerank",
        "results": results,
        "meta": {"api_version": {"version": version}},
    }
    if _reports(model, report):
        units = math.ceil(len(documents) / 100) if figure is None else figure
        payload["meta"]["billed_units"] = {"search_units": _usage_value(model, units)}
    return 200, payload, {}


def cohere_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Cohere ``POST /v2/embed``: reports ``tokens`` as ``meta.billed_units.input_tokens`` (by
    default counted from the texts), or no billed units when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _usage_route("cohere", "/v2/embed", _cohere_embed, figure, report_usage)


def cohere_rerank(*, search_units: int | None = None, report_usage: bool = True) -> Route:
    """Cohere ``POST /v2/rerank``: reports ``search_units`` as billed (by default one per 100
    documents), or no billed units when ``report_usage`` is False."""
    figure = _figure("search_units", search_units)
    return _usage_route("cohere", "/v2/rerank", _cohere_rerank, figure, report_usage)


def cohere_v1_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Cohere's older ``POST /v1/embed`` (``cohere.Client``): the float vectors as
    ``embeddings`` itself unless ``embedding_types`` was sent; figures as ``cohere_embeddings``.
    """
    figure = _figure("tokens", tokens)
    answer = functools.partial(_cohere_embed, version="1")
    return _usage_route("cohere", "/v1/embed", answer, figure, report_usage)


def cohere_v1_rerank(*, search_units: int | None = None, report_usage: bool = True) -> Route:
    """Cohere's older ``POST /v1/rerank`` (``cohere.Client``): echoes each document as
    ``{"text": ...}`` when ``return_documents`` is set; figures as ``cohere_rerank``."""
    figure = _figure("search_units", search_units)
    answer = functools.partial(_cohere_rerank, version="1")
    return _usage_route("cohere", "/v1/rerank", answer, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (
    cohere_embeddings,
    cohere_rerank,
    cohere_v1_embeddings,
    cohere_v1_rerank,
)
"""The Cohere routes a fresh ``StandIn`` answers."""
