"""OpenAI's ``/v1/embeddings``, and the body it answers with, which Azure OpenAI, Mistral and
Ollama's compatible route answer too (each with its own usage)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import (
    DEFAULT_DIMENSIONS,
    _Answer,
    _as_list,
    _data_embeddings,
    _dimensions,
    _reports,
    _tokens,
    _usage_value,
)
from spanledger.testing.routes import Route, _figure, _usage_route

__all__ = ["ROUTES", "openai_embeddings"]


def _openai_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = _as_list(body.get("input"))
    tokens = sum(_tokens(t) for t in texts) if figure is None else figure
    payload: dict[str, Any] = {
        "object": "list",
        "data": _data_embeddings(body, texts, int(body.get("dimensions") or DEFAULT_DIMENSIONS)),
        "model": model,
    }
    if _reports(model, report):
        payload["usage"] = {"prompt_tokens": _usage_value(model, tokens), "total_tokens": tokens}
    return 200, payload, {}


def _openai_shaped(
    body: dict[str, Any],
    model: str,
    answered_model: str,
    figure: int | None,
    report: bool,
    *,
    dimensions_key: str = "dimensions",
    base64_ok: bool = True,
) -> tuple[dict[str, Any], int | None]:
    """OpenAI's body naming ``answered_model``, with ``usage`` when reported; and the figure."""
    texts = _as_list(body.get("input"))
    dims = _dimensions(body.get(dimensions_key))
    payload: dict[str, Any] = {
        "object": "list",
        "data": _data_embeddings(body, [str(t) for t in texts], dims, base64_ok),
        "model": answered_model,
    }
    if not _reports(model, report):
        return payload, None
    tokens = sum(_tokens(str(t)) for t in texts) if figure is None else figure
    payload["usage"] = {"prompt_tokens": _usage_value(model, tokens), "total_tokens": tokens}
    return payload, tokens


def openai_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """OpenAI ``POST /v1/embeddings``: reports ``tokens`` as ``usage.prompt_tokens`` (by
    default a token per four UTF-8 bytes of input), or no usage when ``report_usage`` is False.
    """
    figure = _figure("tokens", tokens)
    return _usage_route("openai", "/v1/embeddings", _openai_embed, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (openai_embeddings,)
"""The OpenAI routes a fresh ``StandIn`` answers."""
