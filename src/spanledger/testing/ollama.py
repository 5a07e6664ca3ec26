"""Ollama: the native ``/api/embed`` (durations in nanoseconds, tokens as
``prompt_eval_count``), the legacy ``/api/embeddings`` (the vector alone), and the
OpenAI-compatible ``/v1/embeddings``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import (
    DEFAULT_DIMENSIONS,
    _Answer,
    _as_list,
    _dimensions,
    _reports,
    _tokens,
    _usage_value,
    standin_vector,
)
from spanledger.testing.openai import _openai_shaped
from spanledger.testing.routes import Route, _built_in, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = ["ROUTES", "ollama_embed", "ollama_embeddings", "ollama_openai_embeddings"]

_OLLAMA_JSON = {"content-type": "application/json; charset=utf-8"}


def _ollama_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = [str(t) for t in _as_list(body.get("input"))]
    dims = _dimensions(body.get("dimensions"))
    load = 2_000_000
    payload: dict[str, Any] = {
        "model": model,
        "embeddings": [standin_vector(t, dims) for t in texts],
        "total_duration": load + 500_000 * (len(texts) + 1),
        "load_duration": load,  # never 0, even warm
    }
    if _reports(model, report):
        tokens = sum(map(_tokens, texts)) if figure is None else figure
        payload["prompt_eval_count"] = _usage_value(model, tokens)
    return 200, payload, dict(_OLLAMA_JSON)


def _ollama_legacy_embed(body: dict[str, Any], model: str) -> _Answer:
    vector = standin_vector(str(body.get("prompt") or ""), DEFAULT_DIMENSIONS)
    return 200, {"embedding": vector}, dict(_OLLAMA_JSON)


def _ollama_openai_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    payload, _ = _openai_shaped(body, model, model, figure, report, base64_ok=False)
    return 200, payload, {"content-type": "application/json"}


def ollama_embed(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Ollama ``POST /api/embed`` (``input``: one string or a list; ``dimensions``):
    ``{model, embeddings, total_duration, load_duration, prompt_eval_count}``, durations in
    whole nanoseconds, ``tokens`` as ``prompt_eval_count`` (by default counted from the input;
    left out when ``report_usage`` is False)."""
    figure = _figure("tokens", tokens)
    return _usage_route(Vendor.OLLAMA, "/api/embed", _ollama_embed, figure, report_usage)


def ollama_embeddings() -> Route:
    """Ollama's legacy ``POST /api/embeddings`` (``prompt``): ``{"embedding": [...]}`` only, no
    model, no counts, no durations."""
    return _built_in(Vendor.OLLAMA, "/api/embeddings", _ollama_legacy_embed)


def ollama_openai_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Ollama's OpenAI-compatible ``POST /v1/embeddings``: OpenAI's body with no ``id``, float
    vectors even when base64 is asked for (as Ollama answers), figures as
    ``openai_embeddings``; its errors are OpenAI's error object (``type: "api_error"``)."""
    figure = _figure("tokens", tokens)
    return _usage_route(Vendor.OLLAMA, "/v1/embeddings", _ollama_openai_embed, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (
    ollama_embed,
    ollama_embeddings,
    ollama_openai_embeddings,
)
"""The Ollama routes a fresh ``StandIn`` answers."""
