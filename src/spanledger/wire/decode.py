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
from functools import partial
from itertools import chain
from operator import itemgetter
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
_STR_TYPE = {str}


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
    finite if any value is NaN, infinite or beyond float range. Base64 vectors a path only
    records (``keep=False``) are judged as a batch from their text (``_packed_floats``), each
    as long as its width. Anything else (a bad entry, bad base64, an overflow) is decoded
    vector by vector, which names the fault.
    """
    kinds = {*map(type, values)}
    if kinds == _LIST_TYPE and _numbers_only(values):
        try:
            if math.isfinite(sum(map(sum, values))):
                return values
        except OverflowError:
            pass
    elif kinds == _STR_TYPE and not keep:
        packed = _packed_floats(values)
        if packed is not None:
            return packed
    return [decode_embedding(value, keep) for value in values]


def _packed_floats(values: list[str]) -> list[Any] | None:
    """Base64 float32 vectors that a path only records, judged as a batch from their text
    alone (the SDK decoded them already): a few C-level passes over all of it, however many
    vectors there are. ``None`` when anything is unusual (lengths that differ, padding other
    than at the end, a character outside the alphabet, a part of a float32): the vectors are
    then decoded one by one, which names the fault in order.

    Strict base64 of one length and padding holds the same number of bytes in every vector,
    so the width is read from the length. A float32 is not finite only when the 7 low bits
    of its top byte (little-endian: its last) are all ones, and those bits sit at fixed
    places of a vector's text: with each vector starting a 16-character block (3 floats),
    the characters at offsets 4, 9 and 15 of each block carry them. Only when one of those
    characters could is every vector decoded and summed."""
    lengths = {*map(len, values)}
    if len(lengths) != 1:
        return None
    (length,) = lengths
    first = values[0]
    pads = length - len(first.rstrip("="))
    size = length // 4 * 3 - pads
    if not length or length % 4 or pads > 2 or size % 4:
        return None
    try:
        raw = "".join(values).encode("ascii")
    except UnicodeEncodeError:
        return None
    if raw.translate(None, _ALPHABET) or raw.count(b"=") != pads * len(values):
        return None  # a character outside the alphabet, or padding inside a vector
    if pads and {*map(itemgetter(slice(-pads, None)), values)} != {"=" * pads}:
        return None
    text = ("=" * (-length % 16)).join(values)
    first_top, second_top, third_top = text[4::16], text[9::16], text[15::16]
    if (
        "f" in first_top
        or "/" in first_top
        or any(map(second_top.__contains__, _SECOND_TOP))
        or "/" in third_top
    ):
        _require_finite(values)
    return [_Unpacked(size // 4)] * len(values)


_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
_SECOND_TOP = "HPXfnv3/"
"""The characters whose 3 low bits are all ones. In a block, the 1st float's top byte holds
the 5 low bits of the character at offset 4 (all ones: ``f`` or ``/``), the 2nd's the 3 low
bits of the one at offset 9, the 3rd's the whole one at offset 15 (``/``)."""


def _require_finite(values: list[str]) -> None:
    """Decode the vectors (already known to be strict base64 of whole float32 values) and
    raise when a value is not finite."""
    floats = array("f")
    floats.frombytes(b"".join(map(_from_base64, values)))
    if sys.byteorder != "little":
        floats.byteswap()
    if not math.isfinite(sum(floats)):  # float32 values: their sum cannot overflow
        raise _not_finite()


_from_base64 = partial(binascii.a2b_base64, strict_mode=True)


class _Unpacked:
    """A base64 float32 vector judged but not decoded: as long as its width."""

    __slots__ = ("_width",)

    def __init__(self, width: int) -> None:
        self._width = width

    def __len__(self) -> int:
        return self._width


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
    data: object, expected: int | None, decode: Callable[[object], Any] | None = None
) -> list[Any]:
    """Assemble ``data[].embedding`` by ``data[].index`` (never by array position); with
    ``expected`` unknown the indices must still be ``0..n-1``, each once. ``decode`` takes each
    vector (``None``: as sent). Entries already in index order, as vendors send them, are
    taken in C-level passes; any other order is placed entry by entry."""
    items = require_list(data, "data")
    if expected is not None:
        require_count(items, expected)
    count = len(items)
    if {*map(type, items)} == _DICT_TYPE and _in_order(items, count):
        try:
            vectors = [*map(_EMBEDDING, items)]
        except KeyError:  # a vector missing: ``None``, for the decoder to judge
            vectors = [item.get("embedding") for item in items]
        return vectors if decode is None else [*map(decode, vectors)]
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
        vector = item.get("embedding")
        slots[index] = vector if decode is None else decode(vector)
    return slots


def _in_order(items: list[dict[str, Any]], count: int) -> bool:
    """Whether the entries' indices are ``0..count-1`` in order (every one an ``int``)."""
    try:
        indices = [*map(_INDEX, items)]
    except KeyError:
        return False
    return indices == [*range(count)] and (not indices or {*map(type, indices)} == _INT_TYPES)


_DICT_TYPE = {dict}
_INDEX = itemgetter("index")
_EMBEDDING = itemgetter("embedding")


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
