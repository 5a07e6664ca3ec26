"""Mistral's embeddings: OpenAI's body with an ``id``, ``output_dimension`` for the width, the
usage keys Mistral sends as null, and the token figure in a rate-limit header too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import _Answer, _answer_id
from spanledger.testing.openai import _openai_shaped
from spanledger.testing.routes import Route, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = ["ROUTES", "mistral_embeddings"]

_MISTRAL_NULL_USAGE = (
    "prompt_audio_seconds",
    "request_count",
    "prompt_token_details",
    "prompt_tokens_details",
    "completion_tokens_details",
    "service_tier",
)


def _mistral_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    payload, tokens = _openai_shaped(
        body, model, model, figure, report, dimensions_key="output_dimension"
    )
    payload = {"id": _answer_id(body.get("input")).replace("-", ""), **payload}
    if tokens is None:
        return 200, payload, {}
    payload["usage"] |= {"completion_tokens": 0, **dict.fromkeys(_MISTRAL_NULL_USAGE)}
    return 200, payload, {"x-ratelimit-tokens-query-cost": str(tokens)}


def mistral_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Mistral ``POST /v1/embeddings``: OpenAI's body with an ``id``, ``output_dimension`` for
    the width, and ``usage`` {``prompt_tokens``: ``tokens`` (by default counted from the
    input), ``total_tokens``, ``completion_tokens``: 0, and the keys Mistral sends as null},
    with the same figure in ``x-ratelimit-tokens-query-cost``; no usage when ``report_usage``
    is False."""
    figure = _figure("tokens", tokens)
    return _usage_route(Vendor.MISTRAL, "/v1/embeddings", _mistral_embed, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (mistral_embeddings,)
"""The Mistral routes a fresh ``StandIn`` answers."""
