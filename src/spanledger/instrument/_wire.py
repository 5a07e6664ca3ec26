"""Where each vendor's response reports its figures, read by the figure rule.

These are the same places ``spanledger.providers`` reads (a test holds the two together), but
read without decoding the payload: only usage, ids, the echoed model, the vector width and the
result count are taken, so the cost does not grow with the number or size of inputs.
"""

from __future__ import annotations

from collections.abc import Callable

from spanledger import figures
from spanledger.events import EmbeddingUsage, builder_of
from spanledger.instrument._facts import Figures
from spanledger.figures import dig
from spanledger.wire.read import rerank_usage


def echoed_model(payload: object) -> str | None:
    return figures.response_model(dig(payload, "model"))

__all__ = [
    "BILLING",
    "VENDORS",
    "embedding_figures",
    "has_vectors",
    "reader",
    "rerank_figures",
]

VENDORS = ("openai", "cohere", "jina", "tei", "voyageai")

_embedding_usage = builder_of(EmbeddingUsage)

_EMBED_TOKENS: dict[str, tuple[str, ...]] = {
    "openai": ("usage", "prompt_tokens"),
    "cohere": ("meta", "billed_units", "input_tokens"),
    "jina": ("usage", "total_tokens"),
    "voyageai": ("usage", "total_tokens"),
}
_RERANK_UNITS: dict[str, tuple[str, ...]] = {"cohere": ("meta", "billed_units", "search_units")}
_RERANK_TOKENS: dict[str, tuple[str, ...]] = {
    "jina": ("usage", "total_tokens"),
    "voyageai": ("usage", "total_tokens"),
}
_RESULTS_KEY = {"cohere": "results", "jina": "results", "voyageai": "data"}

BILLING: dict[tuple[str, str], str | None] = {
    ("openai", "embeddings"): "tokens",
    ("cohere", "embeddings"): "tokens",
    ("cohere", "rerank"): "search_units",
    ("jina", "embeddings"): "tokens",
    ("jina", "rerank"): "tokens",
    ("voyageai", "embeddings"): "tokens",
    ("voyageai", "rerank"): "tokens",
}
"""What each vendor bills an endpoint by, for estimates of abandoned attempts."""


def embedding_figures(vendor: str, payload: object, *, dtype: object = None) -> Figures:
    """Usage, id, echoed model and vector width from one embedding response body.

    ``dtype`` is the vector type the request asked for (``output_dtype``, ``embedding_type``,
    ``encoding_format``; ``None`` for the vendor's float default). It says how wide a vector
    is: a base64 float32 vector holds 4 bytes per dimension, a packed ``binary`` one 8
    dimensions per entry. A width that cannot be told is not reported.
    """
    if dtype is not None and type(dtype) is not str:
        dtype = "unreadable"
    vector, kind = _first_vector(vendor, payload, dtype)
    width = _width(vector, kind)
    if type(payload) is not dict:
        return Figures(dimensions=width)
    path = _EMBED_TOKENS.get(vendor)
    tokens = figures.count(dig(payload, *path)) if path else None
    model = payload.get("model") if vendor != "cohere" else None
    return Figures(
        usage=_embedding_usage({"input_tokens": tokens}) if tokens is not None else None,
        response_id=figures.response_id(payload.get("id")),
        response_model=figures.response_model(model),
        dimensions=width,
    )


def has_vectors(vendor: str, payload: object) -> bool:
    """Whether ``payload`` holds the vectors an embedding response must (however encoded)."""
    if vendor == "tei":
        return type(payload) is list
    if type(payload) is not dict:
        return False
    if vendor == "cohere":
        return type(payload.get("embeddings")) in (list, dict)
    return type(payload.get("data")) is list


def rerank_figures(vendor: str, payload: object) -> Figures:
    """Usage, id, echoed model and result count from one rerank response body."""
    units = _RERANK_UNITS.get(vendor)
    tokens = _RERANK_TOKENS.get(vendor)
    results = payload if vendor == "tei" else dig(payload, _RESULTS_KEY.get(vendor, "results"))
    return Figures(
        usage=rerank_usage(
            dig(payload, *units) if units else None, dig(payload, *tokens) if tokens else None
        ),
        response_id=figures.response_id(dig(payload, "id")),
        response_model=echoed_model(payload) if vendor != "cohere" else None,
        result_count=len(results) if type(results) is list else None,
    )


def reader(vendor: str, operation: str) -> Callable[[object], Figures]:
    """The figure reader for one vendor endpoint."""
    if operation == "embeddings":
        return lambda payload: embedding_figures(vendor, payload)
    return lambda payload: rerank_figures(vendor, payload)


def _first_vector(vendor: str, payload: object, dtype: object) -> tuple[object, object]:
    """The first vector and its type (Cohere names the type in the body)."""
    if vendor == "tei":
        return (payload[0] if type(payload) is list and payload else None), dtype
    if type(payload) is not dict:
        return None, dtype
    if vendor == "cohere":
        by_type = payload.get("embeddings")
        if type(by_type) is list:
            rows: object = by_type
        elif type(by_type) is dict:
            dtype = "float" if "float" in by_type else next(iter(by_type), None)
            rows = by_type.get(dtype)
        else:
            return None, dtype
        return (rows[0] if type(rows) is list and rows else None), dtype
    data = payload.get("data")
    if type(data) is not list or not data or type(data[0]) is not dict:
        return None, dtype
    return data[0].get("embedding"), dtype


_FLOAT32 = frozenset({None, "float", "base64"})
_ONE_BYTE = frozenset({"int8", "uint8"})
_PACKED_BITS = frozenset({"binary", "ubinary"})


def _width(vector: object, dtype: object) -> int | None:
    """Dimensions of one vector: a list has one entry per dimension (8 when bit-packed), base64
    text 4 bytes per float32 dimension, 1 per int8 one, or 8 dimensions per packed byte."""
    if type(vector) is list:
        if not vector:
            return None
        if dtype in _FLOAT32 or dtype in _ONE_BYTE:
            return len(vector)
        return len(vector) * 8 if dtype in _PACKED_BITS else None
    if type(vector) is not str:
        return None
    tail = vector[-2:]
    size = len(vector) * 3 // 4 - (len(tail) - len(tail.rstrip("=")))
    if size <= 0 or len(vector) % 4:
        return None
    if dtype in _FLOAT32:
        return size // 4 if size % 4 == 0 else None
    if dtype in _ONE_BYTE:
        return size
    return size * 8 if dtype in _PACKED_BITS else None
