"""Read one response body by its endpoint's declaration: the same rules on every path.

``read_embeddings`` and ``read_rerank`` validate the payload (vector count, indices, widths,
finite numbers; result indices, scores, ``top_k``) and raise ``provider_invalid_response`` for a
body the endpoint does not answer, whichever path carried it. Figures (usage, id, echoed model)
are read by the figure rule and never fail a response: a malformed one is not reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spanledger import figures
from spanledger.events import (
    EmbeddingUsage,
    RerankUsage,
    ScoredDocument,
    UsageFigure,
    builder_of,
    trusted_builder_of,
)
from spanledger.figures import dig
from spanledger.wire.decode import (
    float_vectors,
    invalid_response,
    require_count,
    require_list,
    rerank_results,
    vectors_by_index,
    whole_numbers,
)
from spanledger.wire.endpoints import Endpoint, VectorLayout

__all__ = [
    "EmbeddingPart",
    "RerankPart",
    "embedding_usage",
    "malformed",
    "read_embeddings",
    "read_rerank",
    "rerank_usage",
    "struct_number",
    "vector_type",
]

# built from figures the figure rule has already judged: no second validation pass
_embedding_usage = builder_of(EmbeddingUsage)  # two fields: validating is cheaper
_rerank_usage = trusted_builder_of(RerankUsage)


@dataclass(slots=True)
class EmbeddingPart:
    """What one response reported: vectors in input order, their width, and its figures.

    ``vectors`` hold floats for a float request; a quantised one (``int8``, ``binary``) keeps
    each vector as sent. ``dimensions`` is ``None`` when the width cannot be told.
    """

    vectors: list[Any]
    dimensions: int | None
    usage: EmbeddingUsage | None
    response_id: str | None
    model: str | None
    raw: Any
    malformed_usage: tuple[UsageFigure, ...] = ()


@dataclass(slots=True)
class RerankPart:
    """What one response reported: results with indices local to its request, and figures.
    ``count``: how many results it held (``results`` is empty when they were not kept)."""

    results: list[ScoredDocument]
    usage: RerankUsage | None
    response_id: str | None
    model: str | None
    raw: Any
    count: int
    malformed_usage: tuple[UsageFigure, ...] = ()


_embedding_usages: dict[int, EmbeddingUsage] = {}
_USAGES_KEPT = 4096


def embedding_usage(
    input_tokens: object, billable_characters: object = None
) -> EmbeddingUsage | None:
    """An embedding usage record of the sound figures among those sent (each judged on its
    own), else none. Records are immutable, so one per token count alone is made and shared
    (up to ``_USAGES_KEPT`` counts)."""
    tokens = figures.count(input_tokens)
    characters = figures.count(billable_characters)
    if characters is not None:
        return _embedding_usage({"input_tokens": tokens, "billable_characters": characters})
    if tokens is None:
        return None
    usage = _embedding_usages.get(tokens)
    if usage is None:
        usage = _embedding_usage({"input_tokens": tokens})
        if len(_embedding_usages) < _USAGES_KEPT:
            _embedding_usages[tokens] = usage
    return usage


_NONE_MALFORMED: tuple[UsageFigure, ...] = ()


def malformed(
    tokens: object, units: object = None, characters: object = None
) -> tuple[UsageFigure, ...]:
    """The figures among those sent (``tokens``, ``units``, ``characters``: ``None`` when
    absent) that the figure rule does not take as counts."""
    if tokens is None and units is None and characters is None:
        return _NONE_MALFORMED
    named: list[UsageFigure] = []
    if tokens is not None and figures.count(tokens) is None:
        named.append("input_tokens")
    if units is not None and figures.count(units) is None:
        named.append("search_units")
    if characters is not None and figures.count(characters) is None:
        named.append("billable_characters")
    return tuple(named)


def rerank_usage(search_units: object, input_tokens: object) -> RerankUsage | None:
    """Judge each rerank figure alone; no record when neither is sound."""
    units = figures.count(search_units)
    tokens = figures.count(input_tokens)
    if units is None and tokens is None:
        return None
    return _rerank_usage({"search_units": units, "input_tokens": tokens})


_FLOAT32 = frozenset({None, "float", "base64"})
_ONE_BYTE = frozenset({"int8", "uint8"})
_PACKED_BITS = frozenset({"binary", "ubinary"})


def vector_type(requested: object) -> str | None:
    """The vector type a request asked for (``None``: the vendor's float default); anything
    that is not text is ``"unreadable"``, whose width is never told."""
    if requested is None or type(requested) is str:
        return requested
    return "unreadable"


_Getter = Callable[[object], object]
_getters: dict[tuple[str, ...], _Getter] = {}


def _at(path: tuple[str, ...]) -> _Getter:
    """A reader of ``payload[path[0]][path[1]]...`` (``None`` where a step is missing): the
    figure rule's ``dig``, unrolled once per declared path, since it runs on every call."""
    getter = _getters.get(path)
    if getter is not None:
        return getter
    if len(path) == 1:
        (first,) = path

        def getter(payload: object) -> object:
            return payload.get(first) if type(payload) is dict else None

    elif len(path) == 2:
        first, second = path

        def getter(payload: object) -> object:
            if type(payload) is not dict:
                return None
            node = payload.get(first)
            return node.get(second) if type(node) is dict else None

    else:

        def getter(payload: object) -> object:
            return dig(payload, *path)

    _getters[path] = getter
    return getter


def _nothing(payload: object) -> object:
    return None


@dataclass(frozen=True, slots=True)
class _Readers:
    """One endpoint's figure getters, built once: each is ``_nothing`` where the wire never
    carries the figure."""

    endpoint: Endpoint
    tokens: _Getter
    units: _Getter
    id: _Getter
    model: _Getter
    results: _Getter
    vectors: _Getter
    vector_in: _Getter
    tokens_each: _Getter
    characters: _Getter


_readers: dict[int, _Readers] = {}
_READERS_KEPT = 256


def _readers_of(endpoint: Endpoint) -> _Readers:
    """The getters of ``endpoint``'s declared paths (cached by identity: a declaration is a
    module constant, and one built at run time is checked to be the one cached)."""
    found = _readers.get(id(endpoint))
    if found is not None and found.endpoint is endpoint:
        return found
    results = endpoint.results_at
    found = _Readers(
        endpoint,
        tokens=_getter_of(endpoint.tokens_at),
        units=_getter_of(endpoint.units_at),
        id=_getter_of(endpoint.id_at),
        model=_getter_of(endpoint.model_at),
        results=_at(results) if results else _itself,
        vectors=_at(endpoint.vectors_at) if endpoint.vectors_at else _itself,
        vector_in=_at(endpoint.vector_in) if endpoint.vector_in else _itself,
        tokens_each=_getter_of(endpoint.tokens_each_at),
        characters=_getter_of(endpoint.characters_at),
    )
    if len(_readers) < _READERS_KEPT:
        _readers[id(endpoint)] = found
    return found


def _getter_of(path: tuple[str, ...] | None) -> _Getter:
    return _at(path) if path else _nothing


def _itself(payload: object) -> object:
    return payload


def read_embeddings(
    endpoint: Endpoint,
    payload: object,
    expected: int | None,
    dtype: str | None = None,
    *,
    keep_vectors: bool = True,
    headers: Mapping[str, str] | None = None,
) -> EmbeddingPart:
    """One embedding response holding ``expected`` vectors (``None``: the count the request
    held is unknown), of the type ``dtype`` the request asked for. ``keep_vectors=False``: the
    vectors are checked as strictly, but base64 ones are not turned into float lists (a path
    that only records the call never hands them on). ``headers``: the response's, for an
    endpoint whose figure may travel in one."""
    floats = dtype in _FLOAT32
    decode = _decoder(dtype)
    layout = endpoint.vectors
    readers = _readers_of(endpoint)
    tokens: object
    if layout is VectorLayout.BY_INDEX:
        vectors = vectors_by_index(_DATA(payload), expected, None if floats else decode)
        tokens = readers.tokens(payload)
    elif layout is VectorLayout.ROWS:
        vectors = _rows(
            require_list(readers.vectors(payload), "the response"), expected, decode, dtype
        )
        tokens = readers.tokens(payload)
    elif layout is VectorLayout.SINGLE:
        vectors = _rows([_one_vector(readers.vectors(payload))], expected, decode, dtype)
        tokens = readers.tokens(payload)
    elif layout is VectorLayout.ITEMS:
        items = require_list(readers.vectors(payload), "the response")
        vectors = _rows(_item_vectors(items, readers.vector_in), expected, decode, dtype)
        tokens = (
            _summed_each(items, readers.tokens_each)
            if endpoint.tokens_each_at
            else readers.tokens(payload)
        )
    else:
        vectors = _by_type(payload, expected, decode, dtype, layout)
        tokens = readers.tokens(payload)
    if tokens is None and endpoint.tokens_header and headers is not None:
        tokens = header_count(headers.get(endpoint.tokens_header))
    if floats:
        vectors = float_vectors(vectors, keep_vectors)
    characters = readers.characters(payload)
    usage = embedding_usage(tokens, characters)
    return EmbeddingPart(
        vectors,
        _common_width(vectors, dtype),
        usage,
        figures.response_id(readers.id(payload)),
        figures.response_model(readers.model(payload)),
        payload,
        _NONE_MALFORMED
        if usage is not None and characters is None
        else malformed(tokens, characters=characters),
    )


def header_count(value: object) -> object:
    """A figure sent as header text: a plain decimal count as an ``int``; any other text is
    kept as sent (the figure rule judges it not a count); absent stays ``None``."""
    if type(value) is not str:
        return value
    text = value.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) < 20 else value


_STRUCT_WHOLE = 2**53
"""The largest whole number a double holds exactly."""


def struct_number(value: object) -> object:
    """A figure as a protobuf ``Struct`` carries it (every number a double, so gRPC's ``4.0`` is
    JSON's ``4``): a whole, exactly held double as its integer; anything else as it came, for
    the figure rule to judge."""
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value) if abs(value) <= _STRUCT_WHOLE else value
    return value


def _one_vector(value: object) -> object:
    if value is None:
        raise invalid_response("the embedding is missing", "missing_field")
    return value


def _item_vectors(items: list[Any], vector_in: _Getter) -> list[Any]:
    vectors = []
    for item in items:
        if type(item) is not dict:
            raise invalid_response("an embedding entry is not an object", "bad_entry")
        vectors.append(_one_vector(vector_in(item)))
    return vectors


def _summed_each(items: list[Any], figure: _Getter) -> object:
    """The items' figures added up when every one is a count; else the first that is not (so
    it is named malformed), or ``None`` when one is absent."""
    total = 0
    for item in items:
        value = figure(item)
        if value is None:
            return None
        count = figures.count(value)
        if count is None:
            return value
        total += count
    return total if items else None


def read_rerank(
    endpoint: Endpoint,
    payload: object,
    document_count: int | None,
    top_k: int | None,
    *,
    keep_results: bool = True,
    ids: Sequence[object] | None = None,
) -> RerankPart:
    """One rerank response for a request of ``document_count`` documents (``None``: unknown)
    asking for at most ``top_k`` results (the wire's own cap, unless cut client-side).
    ``keep_results=False``: the results are checked as strictly but not built, for a path that
    only records how many there were. ``ids``: the id the request gave each document, for an
    endpoint whose results name documents by id."""
    readers = _readers_of(endpoint)
    items = require_list(readers.results(payload), "results")
    if endpoint.result_ids_at is not None:
        items = _indexed_by_id(items, endpoint.result_index_key, ids)
    units, tokens = readers.units(payload), readers.tokens(payload)
    usage = rerank_usage(units, tokens)
    whole = usage is not None and usage.search_units is not None and usage.input_tokens is not None
    return RerankPart(
        rerank_results(
            items,
            document_count,
            score_key=endpoint.score_key,
            document_key=endpoint.document_key,
            limit=None if endpoint.client_side_top_k else top_k,
            keep=keep_results,
        ),
        usage,
        figures.response_id(readers.id(payload)),
        figures.response_model(readers.model(payload)),
        payload,
        len(items),
        _NONE_MALFORMED if whole else malformed(tokens, units),
    )


def _indexed_by_id(items: list[Any], key: str, ids: Sequence[object] | None) -> list[Any]:
    """Results that name documents by id, each given the position of its document in the
    request (an id the request never gave, or no ids known, is out of range)."""
    positions: dict[object, int] = {}
    for position, given in enumerate(ids or ()):
        if type(given) is str:
            positions.setdefault(given, position)
    indexed = []
    for item in items:
        if type(item) is not dict:
            raise invalid_response("a result entry is not an object", "bad_entry")
        name = item.get(key)
        index = positions.get(name, -1) if type(name) is str else -1
        indexed.append({**item, "index": index})
    return indexed


_DATA = _at(("data",))
_EMBEDDINGS = _at(("embeddings",))


def _decoder(dtype: str | None) -> Callable[[object], Any]:
    """How each vector is taken: floats as sent (``float_vectors`` then judges them all at
    once), quantised ones checked one by one, unknown types only required to be there."""
    if dtype in _FLOAT32:
        return _present
    if dtype in _ONE_BYTE or dtype in _PACKED_BITS:
        return whole_numbers
    return _unread


def _present(value: object) -> object:
    return value


def _unread(value: object) -> object:
    """A vector of a type spanledger does not know: present, not judged."""
    if value is None:
        raise invalid_response("an embedding is missing", "bad_vector")
    return value


def _rows(
    rows: list[Any], expected: int | None, decode: Callable[[object], Any], dtype: str | None
) -> list[Any]:
    require_count(rows, expected)
    if dtype in _FLOAT32:
        if rows and {*map(type, rows)} != {list}:
            raise invalid_response("an embedding is not a number array", "bad_vector")
        return rows
    return [decode(row) for row in rows]


def _by_type(
    payload: object,
    expected: int | None,
    decode: Callable[[object], Any],
    dtype: str | None,
    layout: VectorLayout,
) -> list[Any]:
    """Cohere's ``embeddings.<type>``, the type the request asked for (float by default); v1
    may answer a float request with the float vectors as ``embeddings`` itself."""
    by_type = _EMBEDDINGS(payload)
    floats = dtype in _FLOAT32
    if floats and type(by_type) is list and layout is VectorLayout.FLOATS_OR_BY_TYPE:
        return _rows(by_type, expected, decode, dtype)
    wanted = "float" if floats else dtype
    rows = dig(by_type, wanted) if type(wanted) is str else None
    if type(rows) is not list:
        raise invalid_response("the embeddings of the requested type are missing", "missing_field")
    return _rows(rows, expected, decode, dtype)


def _common_width(vectors: list[Any], dtype: str | None) -> int | None:
    """The width every vector shares; vectors of several widths, or of none, are corrupt."""
    if not vectors:
        return None
    sizes = set(map(len, vectors)) if dtype in _FLOAT32 else {_width(v, dtype) for v in vectors}
    if len(sizes) != 1 or 0 in sizes:
        raise invalid_response(
            "vectors are empty or of inconsistent length", "inconsistent_dimensions"
        )
    (width,) = sizes
    return width


def _width(vector: object, dtype: str | None) -> int | None:
    """Dimensions of one quantised vector: one per int8 entry, 8 per packed entry; base64 text
    holds one byte per int8 dimension, 8 dimensions per packed byte."""
    if type(vector) is list:
        if dtype in _ONE_BYTE:
            return len(vector)
        return len(vector) * 8 if dtype in _PACKED_BITS else None
    if type(vector) is not str:
        return None
    tail = vector[-2:]
    size = len(vector) * 3 // 4 - (len(tail) - len(tail.rstrip("=")))
    if size <= 0 or len(vector) % 4:
        return 0
    if dtype in _ONE_BYTE:
        return size
    return size * 8 if dtype in _PACKED_BITS else None
