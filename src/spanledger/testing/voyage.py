"""Voyage's embeddings and rerank: Jina's answers, the ranked results under ``data`` and cut
at ``top_k``."""

from __future__ import annotations

import functools
from collections.abc import Callable

from spanledger.testing.jina import _jina_embed, _jina_rerank
from spanledger.testing.routes import Route, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = ["ROUTES", "voyage_embeddings", "voyage_rerank"]


def voyage_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Voyage ``POST /v1/embeddings``: reports ``tokens`` as ``usage.total_tokens`` (by default
    counted from the texts), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _usage_route(Vendor.VOYAGE, "/v1/embeddings", _jina_embed, figure, report_usage)


def voyage_rerank(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Voyage ``POST /v1/rerank``: reports ``tokens`` as ``usage.total_tokens`` (counted as for
    Jina by default), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    answer = functools.partial(_jina_rerank, results_key="data", limit_key="top_k")
    return _usage_route(Vendor.VOYAGE, "/v1/rerank", answer, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (voyage_embeddings, voyage_rerank)
"""The Voyage routes a fresh ``StandIn`` answers."""
