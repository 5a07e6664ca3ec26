"""Google: the Gemini API and Vertex AI, which share ``embedContent``.

``usageMetadata`` spells its details ``promptTokenDetails`` on the Gemini API and
``promptTokensDetails`` (with a total) on Vertex; Vertex's ``:predict`` counts tokens per
prediction and reports the characters it bills, and its ranking API reports no usage. Vertex
answers its regional and global routes (``projects/{p}/locations/{l}/…``) and, in express
mode, the same routes without project or location (``/v1/publishers/google/models/…``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from spanledger.testing._errors import _GOOGLE_JSON
from spanledger.testing.answers import (
    _Answer,
    _dig,
    _dimensions,
    _reports,
    _score,
    _tokens,
    _usage_value,
    standin_vector,
)
from spanledger.testing.routes import Route, _built_in, _figure, _usage_route
from spanledger.wire.endpoints import Vendor

__all__ = [
    "ROUTES",
    "gemini_embed_content",
    "gemini_embeddings",
    "vertex_batch_embed_contents",
    "vertex_embed_content",
    "vertex_embeddings",
    "vertex_express_embed_content",
    "vertex_express_embeddings",
    "vertex_rank",
]

_GEMINI_MODEL = "/{version}/models/{model}"
_VERTEX_LOCATION = "/{version}/projects/{project}/locations/{location}"
_VERTEX_MODEL = _VERTEX_LOCATION + "/publishers/google/models/{model}"
_VERTEX_EXPRESS_MODEL = "/{version}/publishers/google/models/{model}"


def _parts_text(content: object) -> str:
    """The text of a Google ``content``: its text parts, joined (one vector for them all)."""
    parts = _dig(content, "parts")
    if not isinstance(parts, list):
        return ""
    return " ".join(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)


def _google_usage(model: str, tokens: int, vertex: bool) -> dict[str, Any]:
    details = [{"modality": "TEXT", "tokenCount": tokens}]
    usage: dict[str, Any] = {"promptTokenCount": _usage_value(model, tokens)}
    if vertex:
        usage |= {"promptTokensDetails": details, "totalTokenCount": tokens}
    else:
        usage["promptTokenDetails"] = details
    return {"usageMetadata": usage}


def _gemini_batch(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    vertex: bool = False,
) -> _Answer:
    requests = [r for r in body.get("requests") or [] if isinstance(r, dict)]
    texts = [_parts_text(r.get("content")) for r in requests]
    options = [_dig(r, "embedContentConfig") if vertex else r for r in requests]
    embeddings = [
        {"values": standin_vector(t, _dimensions(_dig(o, "outputDimensionality")))}
        for t, o in zip(texts, options, strict=True)
    ]
    payload: dict[str, Any] = {"embeddings": embeddings}
    if _reports(model, report):  # one figure for the whole batch
        tokens = sum(map(_tokens, texts)) if figure is None else figure
        payload |= _google_usage(model, tokens, vertex=vertex)
    return 200, payload, dict(_GOOGLE_JSON)


def _embed_content(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    vertex: bool = False,
) -> _Answer:
    text = _parts_text(body.get("content"))
    vector = standin_vector(text, _dimensions(body.get("outputDimensionality")))
    payload: dict[str, Any] = {"embedding": {"values": vector}}
    if _reports(model, report):
        payload |= _google_usage(model, _tokens(text) if figure is None else figure, vertex)
    return 200, payload, dict(_GOOGLE_JSON)


def _spread(total: int, count: int) -> list[int]:
    """``total`` split over ``count`` items as evenly as whole numbers allow (sums to it)."""
    each, extra = divmod(total, count) if count else (0, 0)
    return [each + (1 if i < extra else 0) for i in range(count)]


def _billable_characters(texts: list[str]) -> int:
    """The characters Google bills for ``texts``: every one but whitespace."""
    return sum(len("".join(text.split())) for text in texts)


def _vertex_predict(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    characters: int | None = None,
) -> _Answer:
    instances = body.get("instances") or []
    texts = [str(_dig(i, "content") or "") for i in instances]
    dims = _dimensions(_dig(body, "parameters", "outputDimensionality"))
    counts = [_tokens(t) for t in texts] if figure is None else _spread(figure, len(texts))
    reported = _reports(model, report)
    predictions = []
    for n, (text, count) in enumerate(zip(texts, counts, strict=True)):
        embeddings: dict[str, Any] = {}
        if reported:  # usage-malformed: the first prediction's count is garbage
            token_count = _usage_value(model, count) if n == 0 else count
            embeddings["statistics"] = {"token_count": token_count, "truncated": False}
        embeddings["values"] = standin_vector(text, dims)
        predictions.append({"embeddings": embeddings})
    payload: dict[str, Any] = {"predictions": predictions}
    if reported:
        billed = _billable_characters(texts) if characters is None else characters
        payload["metadata"] = {"billableCharacterCount": _usage_value(model, billed)}
    return 200, payload, dict(_GOOGLE_JSON)


def _vertex_rank(body: dict[str, Any], model: str) -> _Answer:
    query = str(body.get("query") or "")
    records = [r for r in body.get("records") or [] if isinstance(r, dict)]
    bare = bool(body.get("ignoreRecordDetailsInResponse"))
    answered = []
    for record in records:
        text = f"{record.get('title') or ''} {record.get('content') or ''}".strip()
        result: dict[str, Any] = {"id": str(record.get("id", "")), "score": _score(query, text)}
        if not bare:
            result |= {key: record[key] for key in ("title", "content") if key in record}
        answered.append(result)
    answered.sort(key=lambda r: -r["score"])
    limit = body.get("topN")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        answered = answered[:limit]
    return 200, {"records": answered}, dict(_GOOGLE_JSON)


def gemini_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Gemini API ``POST /v1beta/models/{model}:batchEmbedContents`` (any API version):
    ``embeddings[{values}]``, one per request (its text parts joined), sized by each request's
    ``outputDimensionality``; reports ``tokens`` for the whole batch as
    ``usageMetadata.promptTokenCount`` (by default counted from the texts; the real API sends
    it for gemini-embedding-2 only), or no ``usageMetadata`` when ``report_usage`` is False."""
    figure, path = _figure("tokens", tokens), _GEMINI_MODEL + ":batchEmbedContents"
    return _usage_route(Vendor.GEMINI, path, _gemini_batch, figure, report_usage)


def gemini_embed_content(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Gemini API ``POST /v1beta/models/{model}:embedContent`` (any API version): one
    ``embedding.values``; figures as ``gemini_embeddings``."""
    figure, path = _figure("tokens", tokens), _GEMINI_MODEL + ":embedContent"
    return _usage_route(Vendor.GEMINI, path, _embed_content, figure, report_usage)


def vertex_embeddings(
    *, tokens: int | None = None, characters: int | None = None, report_usage: bool = True
) -> Route:
    """Vertex AI ``POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:predict``
    (any API version, e.g. ``v1beta1``; ``l`` may be ``global``): ``predictions[{embeddings:
    {values, statistics: {token_count, truncated}}}]`` and ``metadata.billableCharacterCount``;
    ``tokens`` is spread over the predictions' ``token_count`` (by default each counted from
    its text); ``characters`` is the billable count (by default the texts' characters less
    whitespace, as Google counts them); with ``report_usage`` False there are no
    ``statistics`` and no ``metadata``."""
    return _predict_route(_VERTEX_MODEL, tokens, characters, report_usage)


def vertex_express_embeddings(
    *, tokens: int | None = None, characters: int | None = None, report_usage: bool = True
) -> Route:
    """Vertex AI express mode ``POST /v1/publishers/google/models/{m}:predict`` (no project or
    location; any API version): answered and configured as ``vertex_embeddings``."""
    return _predict_route(_VERTEX_EXPRESS_MODEL, tokens, characters, report_usage)


def _predict_route(
    model_path: str, tokens: int | None, characters: int | None, report_usage: bool
) -> Route:
    figure = _figure("tokens", tokens)
    answer = functools.partial(_vertex_predict, characters=_figure("characters", characters))
    return _usage_route(Vendor.VERTEX, model_path + ":predict", answer, figure, report_usage)


def vertex_embed_content(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Vertex AI ``POST .../publishers/google/models/{m}:embedContent``: Gemini's answer, with
    Vertex's ``usageMetadata`` (``promptTokenCount``, ``promptTokensDetails``,
    ``totalTokenCount``); figures as ``gemini_embeddings``."""
    figure, path = _figure("tokens", tokens), _VERTEX_MODEL + ":embedContent"
    answer = functools.partial(_embed_content, vertex=True)
    return _usage_route(Vendor.VERTEX, path, answer, figure, report_usage)


def vertex_batch_embed_contents(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Vertex AI ``POST .../publishers/google/models/{m}:batchEmbedContents`` (google-genai 3's
    route for several contents of a Gemini model): Gemini's batch answer, each request's
    ``embedContentConfig.outputDimensionality`` sizing its vector, with Vertex's
    ``usageMetadata``; figures as ``gemini_embeddings``."""
    figure, path = _figure("tokens", tokens), _VERTEX_MODEL + ":batchEmbedContents"
    answer = functools.partial(_gemini_batch, vertex=True)
    return _usage_route(Vendor.VERTEX, path, answer, figure, report_usage)


def vertex_express_embed_content(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Vertex AI express mode ``POST /v1/publishers/google/models/{m}:embedContent``:
    answered and configured as ``vertex_embed_content``."""
    figure, path = _figure("tokens", tokens), _VERTEX_EXPRESS_MODEL + ":embedContent"
    answer = functools.partial(_embed_content, vertex=True)
    return _usage_route(Vendor.VERTEX, path, answer, figure, report_usage)


def vertex_rank() -> Route:
    """Vertex AI ranking ``POST /v1/projects/{p}/locations/{l}/rankingConfigs/{c}:rank``
    (``query``, ``records[{id, title?, content}]``, ``topN``): ``records[{id, score, title?,
    content?}]`` best first, without title and content when ``ignoreRecordDetailsInResponse``;
    no usage, ever."""
    return _built_in(
        Vendor.VERTEX, _VERTEX_LOCATION + "/rankingConfigs/{config}:rank", _vertex_rank
    )


ROUTES: tuple[Callable[[], Route], ...] = (
    gemini_embeddings,
    gemini_embed_content,
    vertex_embeddings,
    vertex_embed_content,
    vertex_batch_embed_contents,
    vertex_express_embeddings,
    vertex_express_embed_content,
    vertex_rank,
)
"""The Gemini API and Vertex AI routes a fresh ``StandIn`` answers."""
