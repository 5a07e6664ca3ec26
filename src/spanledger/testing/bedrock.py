"""AWS Bedrock: the runtime's ``InvokeModel``, which answers by the body (Titan, Cohere embed,
Nova, Cohere rerank) on one path, and the Agent Runtime's ``/rerank``.

None of them names the model in its answer; token figures travel in a header (and in Titan's
body), and every answer carries a request id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import (
    DEFAULT_DIMENSIONS,
    _Answer,
    _answer_id,
    _dig,
    _dimensions,
    _document_text,
    _ranked,
    _reports,
    _tokens,
    _usage_value,
    standin_vector,
)
from spanledger.testing.routes import Route, _built_in, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = [
    "ROUTES",
    "bedrock_cohere_embeddings",
    "bedrock_cohere_rerank",
    "bedrock_nova_embeddings",
    "bedrock_rerank",
    "bedrock_titan_embeddings",
]

_BEDROCK_INVOKE = "/model/{model+}/invoke"
_TITAN_V1 = re.compile(r"titan-embed-(?:text|image)-v1|titan-embed-g1")


def _bedrock_headers(tokens: object = None) -> dict[str, str]:
    """Bedrock's success headers: latency in milliseconds, and the token figure when given."""
    headers = {"X-Amzn-Bedrock-Invocation-Latency": "12"}
    if tokens is not None:
        headers["X-Amzn-Bedrock-Input-Token-Count"] = str(tokens)
    return headers


def _with_request_id(headers: dict[str, str], seed: object) -> dict[str, str]:
    return {**headers, "x-amzn-RequestId": _answer_id(seed)}


def _bedrock_titan(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    text = str(body.get("inputText") or "")
    vector = standin_vector(text, int(body.get("dimensions") or DEFAULT_DIMENSIONS))
    payload: dict[str, Any] = {"embedding": vector}
    if not _TITAN_V1.search(model):  # v2 also sends the vector by type, asked for or not
        payload["embeddingsByType"] = {"float": vector}
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, _tokens(text) if figure is None else figure)
        payload["inputTextTokenCount"] = tokens
    return 200, payload, _with_request_id(_bedrock_headers(tokens), text)


def _bedrock_cohere_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = [str(t) for t in body.get("texts") or []]
    dims = int(body.get("output_dimension") or DEFAULT_DIMENSIONS)
    vectors = [standin_vector(t, dims) for t in texts]
    by_type = bool(body.get("embedding_types")) or "embed-v4" in model
    payload = {
        "embeddings": {"float": vectors} if by_type else vectors,
        "id": _answer_id(texts),
        "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
        "texts": [t.lower() for t in texts] if "-v3" in model else texts,  # v3 echoes lowercased
    }
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, sum(map(_tokens, texts)) if figure is None else figure)
    return 200, payload, _with_request_id(_bedrock_headers(tokens), texts)


def _bedrock_nova(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    params = body.get("singleEmbeddingParams")
    text = str(_dig(params, "text", "value") or "")
    dims = _dimensions(_dig(params, "embeddingDimension"))
    payload = {"embeddings": [{"embedding": standin_vector(text, dims), "embeddingType": "TEXT"}]}
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, _tokens(text) if figure is None else figure)
    return 200, payload, _with_request_id(_bedrock_headers(tokens), text)


def _bedrock_cohere_rerank(body: dict[str, Any], model: str, units: int | None = None) -> _Answer:
    query = str(body.get("query") or "")
    documents = [_document_text(d) for d in body.get("documents") or []]
    payload: dict[str, Any] = {
        "id": _answer_id([query, documents]),
        "results": _ranked(query, documents, "index", "relevance_score", body.get("top_n")),
    }
    if units is not None and model != "usage-missing":  # never seen from Bedrock: opt-in
        payload["meta"] = {"billed_units": {"search_units": _usage_value(model, units)}}
    return 200, payload, _with_request_id(_bedrock_headers(), query)


def _bedrock_agent_rerank(body: dict[str, Any], model: str) -> _Answer:
    query = str(_dig(body, "queries", 0, "textQuery", "text") or "")
    sources = body.get("sources") or []
    documents = [
        str(_dig(s, "inlineDocumentSource", "textDocument", "text") or "") for s in sources
    ]
    configuration = ("rerankingConfiguration", "bedrockRerankingConfiguration")
    limit = _dig(body, *configuration, "numberOfResults")
    payload = {"results": _ranked(query, documents, "index", "relevanceScore", limit)}
    return 200, payload, {"x-amzn-RequestId": _answer_id([query, documents])}


def _invoke(
    answer: Callable[[dict[str, Any], str, int | None, bool], _Answer],
    figure: int | None,
    report_usage: bool,
    selects: tuple[str, ...],
) -> Route:
    """An ``InvokeModel`` route for the bodies that carry one of ``selects``."""
    return _usage_route(Vendor.BEDROCK, _BEDROCK_INVOKE, answer, figure, report_usage, selects)


def bedrock_titan_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Titan body (``inputText``): ``embedding``
    (and ``embeddingsByType.float`` but for a Titan v1 model), reporting ``tokens`` (by
    default counted from the text) both as ``inputTextTokenCount`` and in the
    ``X-Amzn-Bedrock-Input-Token-Count`` header; neither when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _invoke(_bedrock_titan, figure, report_usage, ("inputText", "inputImage"))


def bedrock_cohere_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Cohere Embed body (``texts``): Cohere's v1
    body with no usage in it (float vectors themselves, or by type when ``embedding_types`` is
    sent or the model is Embed v4), ``tokens`` only in the ``X-Amzn-Bedrock-Input-Token-Count``
    header (by default counted from the texts), which ``report_usage=False`` leaves out."""
    figure = _figure("tokens", tokens)
    return _invoke(_bedrock_cohere_embed, figure, report_usage, ("texts", "images"))


def bedrock_nova_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for an Amazon Nova body
    (``singleEmbeddingParams``): ``embeddings[{embeddingType: "TEXT", embedding}]``, ``tokens``
    only in the ``X-Amzn-Bedrock-Input-Token-Count`` header (left out when ``report_usage`` is
    False)."""
    figure = _figure("tokens", tokens)
    return _invoke(_bedrock_nova, figure, report_usage, ("singleEmbeddingParams",))


def bedrock_cohere_rerank(*, search_units: int | None = None) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Cohere Rerank body (``query``):
    ``{id, results[{index, relevance_score}]}`` cut at ``top_n``, with no usage, as Bedrock was
    seen answering; ``search_units`` adds ``meta.billed_units.search_units`` (Cohere's own
    shape, never recorded from Bedrock) for a test of a reader that looks there."""
    units = _figure("search_units", search_units)
    return _built_in(
        Vendor.BEDROCK,
        _BEDROCK_INVOKE,
        lambda b, m: _bedrock_cohere_rerank(b, m, units),
        ("query",),
    )


def bedrock_rerank() -> Route:
    """Bedrock Agent Runtime ``POST /rerank`` (``queries``, ``sources``,
    ``rerankingConfiguration``): ``results[{index, relevanceScore}]``, best first, cut at
    ``numberOfResults``; no usage, ever (Bedrock bills it per query)."""
    return _built_in(Vendor.BEDROCK, "/rerank", _bedrock_agent_rerank)


ROUTES: tuple[Callable[[], Route], ...] = (
    bedrock_titan_embeddings,
    bedrock_cohere_embeddings,
    bedrock_nova_embeddings,
    bedrock_cohere_rerank,
    bedrock_rerank,
)
"""The Bedrock routes a fresh ``StandIn`` answers, in mount order: where two ``InvokeModel``
routes select one body, the later answers."""
