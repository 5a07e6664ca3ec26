"""Azure OpenAI: OpenAI's body, answered by a deployment (or ``/openai/v1``'s body ``model``)
with the model behind it."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import _Answer, _answer_id
from spanledger.testing.openai import _openai_shaped
from spanledger.testing.routes import Route, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = ["ROUTES", "azure_embeddings", "azure_v1_embeddings"]

_AZURE_DEFAULT_MODEL = "text-embedding-3-small"


def _azure_model(name: str) -> str:
    """The model an Azure deployment named ``name`` answers with: itself when it is named after
    an OpenAI embedding model (ada-002 as Azure names it, ``ada``), else text-embedding-3-small.
    """
    if name == "text-embedding-ada-002":
        return "ada"
    return name if name.startswith("text-embedding-") else _AZURE_DEFAULT_MODEL


def _azure_embed(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    response_model: str | None = None,
    v1: bool = False,
) -> _Answer:
    answered = response_model or _azure_model(model)
    payload, _ = _openai_shaped(body, model, answered, figure, report)
    if v1:  # the /openai/v1 route adds an id and a zero completion count
        payload = {"id": _answer_id(body.get("input")), **payload}
        if "usage" in payload:
            payload["usage"]["completion_tokens"] = 0
    return 200, payload, {"apim-request-id": _answer_id([model, body.get("input")])}


def azure_embeddings(
    *, tokens: int | None = None, report_usage: bool = True, response_model: str | None = None
) -> Route:
    """Azure OpenAI ``POST /openai/deployments/{deployment}/embeddings?api-version=...``:
    OpenAI's body (``usage.prompt_tokens`` / ``total_tokens``; figures as
    ``openai_embeddings``) naming the model behind the deployment: ``response_model``, or by
    default the deployment's own name when it is an OpenAI embedding model's
    (``text-embedding-ada-002`` answered as ``ada``, as Azure does), else
    ``text-embedding-3-small``. The body's ``model`` is ignored, as Azure ignores it."""
    figure = _figure("tokens", tokens)
    answer = functools.partial(_azure_embed, response_model=response_model)
    path = "/openai/deployments/{deployment}/embeddings"
    return _usage_route(Vendor.AZURE, path, answer, figure, report_usage)


def azure_v1_embeddings(
    *, tokens: int | None = None, report_usage: bool = True, response_model: str | None = None
) -> Route:
    """Azure OpenAI ``POST /openai/v1/embeddings``: the deployment is the body's ``model``;
    answered as ``azure_embeddings``, plus an ``id`` and ``usage.completion_tokens`` 0."""
    figure = _figure("tokens", tokens)
    answer = functools.partial(_azure_embed, response_model=response_model, v1=True)
    return _usage_route(Vendor.AZURE, "/openai/v1/embeddings", answer, figure, report_usage)


ROUTES: tuple[Callable[[], Route], ...] = (azure_embeddings, azure_v1_embeddings)
"""The Azure OpenAI routes a fresh ``StandIn`` answers."""
