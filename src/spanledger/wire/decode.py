"""Validators for the payload of a response: vectors and rerank results. Corruption raises
``provider_invalid_response`` in spanledger's own words, never quoting the payload.

Figures beside the payload (usage, ids) are read with the figure rule and never raise.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
from array import array
from collections.abc import Callable
from itertools import chain
from typing import Any

from spanledger.errors import ErrorCategory, ProviderError
from spanledger.events import ScoredDocument, trusted_builder_of

__all__ = [
    "all_finite",
    "decode_embedding",
    "document_echo",
    "float_vectors",
    "invalid_response",
    "require_count",
    "require_list",
    "rerank_results",
    "vectors_by_index",
    "whole_numbers",
]

_NUMBER_TYPES = frozenset({float, int})
_scored = trusted_builder_of(ScoredDocument)
"""A result whose index, score and echo were checked here: built without a second pass."""
_INT_TYPES = frozenset({int})
_LIST_TYPE = {list}


def invalid_response(detail: str, error_type: str) -> ProviderError:
    """A ``provider_invalid_response`` error with spanledger's own wording only."""
    return ProviderError(ErrorCategory.INVALID_RESPONSE, detail=detail, error_type=error_type)


def require_list(value: object, what: str) -> list[Any]:
    if type(value) is not list:
        raise invalid_response(f"{what} is missing or not an array", "missing_field")
    return value


def require_count(items: list[Any], expected: int | None) -> None:
    """The vectors must match the inputs one for one (when the input count is known)."""
    if expected is None:
        return
    if len(items) != expected:
        raise invalid_response(
            f"{len(items)} embeddings for {expected} inputs", "vector_count_mismatch"
        )


def all_finite(values: list[float]) -> bool:
    """Whether every number is finite and fits a float (no NaN, no infinity, no ``10**400``).

    One C-level sum answers for almost every vector: NaN and infinities make it non-finite, and
    an integer beyond float range makes ``isfinite`` overflow. Only a sum that overflowed from
    large finite values needs the element-by-element look.
    """
    try:
        if math.isfinite(sum(values)):
            return True
    except OverflowError:
        pass
    try:
        return all(map(math.isfinite, values))
    except OverflowError:
        return False


def _not_finite() -> ProviderError:
    return invalid_response(
        "an embedding holds a value that is not a finite number", "non_finite_vector"
    )


def decode_embedding(value: object, keep: bool = True) -> Any:
    """One embedding: a number array as is, or base64 little-endian float32; every value must
    be a finite number (NaN or an infinity is corruption, not data). ``keep=False``: a path
    that only records the call needs base64 checked, not turned into a list of floats (its
    float32 array is returned, as wide as the vector)."""
    if type(value) is list:
        if not {*map(type, value)} <= _NUMBER_TYPES:
            raise invalid_response("an embedding holds a value that is not a number", "bad_vector")
        if not all_finite(value):
            raise _not_finite()
        return value
    if type(value) is str:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise invalid_response("an embedding is not valid base64", "bad_base64") from None
        if len(raw) % 4:
            raise invalid_response(
                "a base64 embedding is not a whole number of float32", "bad_base64"
            )
        floats = array("f")
        floats.frombytes(raw)
        if sys.byteorder != "little":
            floats.byteswap()
        if not math.isfinite(sum(floats)):  # float32 values: their sum cannot overflow
            raise _not_finite()
        return floats.tolist() if keep else floats
    raise invalid_response(
        "an embedding is neither a number array nor a base64 string", "bad_vector"
    )


def float_vectors(values: list[Any], keep: bool = True) -> list[Any]:
    """Every embedding of a float response: number arrays as they are, base64 float32 decoded.

    Checked as a batch, in C-level passes over all the vectors at once: every vector a list,
    every entry an ``int`` or ``float`` (a bool is not a number here), and one sum that is not
    finite if any value is NaN, infinite or beyond float range. Anything else (base64 text, a
    bad entry, an overflow) is decoded vector by vector, which names the fault.
    """
    if {*map(type, values)} == _LIST_TYPE and _numbers_only(values):
        try:
            if math.isfinite(sum(map(sum, values))):
                return values
        except OverflowError:
            pass
    return [decode_embedding(value, keep) for value in values]


def _numbers_only(vectors: list[list[Any]]) -> bool:
    """Whether every entry is an ``int`` or ``float``: counting exact floats (one identity test
    per entry, no hashing) settles the usual all-float answer; only a mix is sorted by type."""
    kinds = [*map(type, chain.from_iterable(vectors))]
    return kinds.count(float) == len(kinds) or {*kinds} <= _NUMBER_TYPES


def whole_numbers(value: object) -> Any:
    """A quantised embedding (``int8``, ``binary``, ...): an integer array, or the base64 text
    of its bytes (kept as text: its width is read from its length)."""
    if type(value) is list:
        if not {*map(type, value)} <= _INT_TYPES:
            raise invalid_response("a quantised embedding holds a non-integer", "bad_vector")
        return value
    if type(value) is str:
        return value
    raise invalid_response("an embedding is neither an array nor base64 text", "bad_vector")


def vectors_by_index(
    data: object, expected: int | None, decode: Callable[[object], Any]
) -> list[Any]:
    """Assemble ``data[].embedding`` by ``data[].index`` (never by array position); with
    ``expected`` unknown the indices must still be ``0..n-1``, each once."""
    items = require_list(data, "data")
    if expected is not None:
        require_count(items, expected)
    count = len(items)
    slots: list[Any] = [None] * count
    for item in items:
        if type(item) is not dict:
            raise invalid_response("a data entry is not an object", "bad_entry")
        index = item.get("index")
        if type(index) is not int or not 0 <= index < count:
            raise invalid_response(
                "a data entry has a missing or out-of-range index", "index_out_of_range"
            )
        if slots[index] is not None:
            raise invalid_response("two data entries share an index", "duplicate_index")
        slots[index] = decode(item.get("embedding"))
    return slots


def document_echo(value: object) -> str | None:
    """The echo rule: a string verbatim (``""`` kept), ``{"text": str}`` its text, else ``None``.

    A number, bool or array where a document belongs is a corrupt payload.
    """
    if value is None or type(value) is str:
        return value
    if type(value) is dict:
        text = value.get("text")
        return text if type(text) is str else None
    raise invalid_response("a document echo is a number, boolean or array", "bad_document_echo")


def _finite_number(value: object) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def rerank_results(
    items: object,
    document_count: int | None,
    *,
    score_key: str = "relevance_score",
    document_key: str | None = "document",
    limit: int | None = None,
    keep: bool = True,
) -> list[ScoredDocument]:
    """Validate rerank entries (index range, no duplicates, finite scores, at most ``limit``).
    ``keep=False``: checked as strictly, but no result is built (a path that only counts them)."""
    entries = require_list(items, "results")
    if limit is not None and len(entries) > limit:
        raise invalid_response(f"{len(entries)} results for top_k={limit}", "too_many_results")
    seen: set[int] = set()
    results: list[ScoredDocument] = []
    for entry in entries:
        if type(entry) is not dict:
            raise invalid_response("a result entry is not an object", "bad_entry")
        index = entry.get("index")
        if (
            type(index) is not int
            or index < 0
            or (document_count is not None and index >= document_count)
        ):
            raise invalid_response(
                "a result has a missing or out-of-range index", "index_out_of_range"
            )
        if index in seen:
            raise invalid_response("two results share an index", "duplicate_index")
        seen.add(index)
        score = _finite_number(entry.get(score_key))
        if score is None:
            raise invalid_response("a result has a missing or non-numeric score", "bad_score")
        document = document_echo(entry.get(document_key)) if document_key else None
        if keep:
            results.append(
                _scored({"index": index, "relevance_score": score, "document": document})
            )
    return results
