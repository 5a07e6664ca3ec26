"""Response bodies for the differential test, built from each endpoint's declaration.

Nothing here knows a vendor by name: where an endpoint keeps its vectors, results, figures, id
and echoed model is read from ``spanledger.wire.endpoints.Endpoint``, so a new endpoint gets
bodies of its own shape: every ``VectorLayout`` (by index, by type, Cohere v1's floats-or-by-type,
rows at a key, one vector, a list of items each holding its vector), a token figure per item
(summed), a billed character count beside it, a figure in a response header, results that
name documents by id. A body starts valid
for the call it answers and then, by family, is corrupted in one way: a figure (absent, text,
bool, list, negative, float, beyond 64 bits; as header text: not a plain decimal), the vectors
or results (count, widths, entries, indices or ids, scores, more results than ``top_k``), the
framing (truncated, not JSON, a JSON scalar), or it is an error status instead.

There is no oracle here: which of these a path must accept is the reader's business. The
differential test only asks that every path that can carry a body records it the same way.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from spanledger.wire.endpoints import Endpoint, VectorLayout

__all__ = [
    "BAD_COUNTS",
    "BAD_TEXTS",
    "ERROR_STATUSES",
    "HEADER_FIGURE",
    "JSON_TYPE",
    "Call",
    "Case",
    "Reply",
    "cases",
    "encode",
    "every_error_reply",
    "families",
    "figure_paths",
    "put",
    "wire_top_k",
]

JSON_TYPE = "application/json"

Path = tuple[str, ...]

BAD_COUNTS: tuple[object, ...] = (
    "12",
    True,
    False,
    [3],
    {"n": 3},
    None,
    -1,
    -(2**63),
    6.0,
    1.0,
    0.5,
    float("nan"),
    float("inf"),
    2**63,
    10**30,
)
"""Token / unit figures no bill can hold: none of them may be reported."""

EDGE_COUNTS: tuple[int, ...] = (0, 1, 2**63 - 1)
"""Sound figures at the edges of the range."""

BAD_TEXTS: tuple[object, ...] = (12, 1.5, True, None, [], ["id"], {}, {"id": "x"}, "", "\ud800")
"""Ids and echoed models that are not text (or text no span can carry)."""

BAD_NUMBERS: tuple[object, ...] = (
    float("nan"),
    float("inf"),
    float("-inf"),
    10**400,
    "0.5",
    True,
    None,
    [0.5],
    {"v": 0.5},
)
"""Vector entries and scores that are not finite numbers."""

BAD_INDICES: tuple[object, ...] = ("0", 0.0, True, None, -1, [0])
"""Indices that are not a non-negative JSON integer."""

BAD_IDS: tuple[object, ...] = (0, 1, None, True, "", " 0", "0.0", ["0"], {"id": "0"})
"""Result ids that are not one of the ids the request gave (``"0"``, ``"1"``, ...)."""

BAD_HEADER_COUNTS: tuple[str, ...] = (
    "12abc",
    "",
    "-1",
    "+5",
    "1.5",
    "1e3",
    "0x10",
    "nan",
    "12, 13",
    "9223372036854775808",
    "99999999999999999999",
    "007x",
)
"""Header text that is not a plain decimal count a bill can hold: none may be reported."""

EDGE_HEADER_COUNTS: tuple[str, ...] = ("0", "1", "007", " 12 ", "9223372036854775807")
"""Header text that is a sound count (leading zeros and surrounding blanks included)."""

HEADER_FIGURE = "header"
"""The figure name of a token count sent in a response header (``Endpoint.tokens_header``)."""
EACH_FIGURE = "tokens_each"
"""The figure name of a token count on each item, summed (``Endpoint.tokens_each_at``)."""

ERROR_STATUSES: tuple[int, ...] = (400, 401, 403, 404, 408, 422, 429, 500, 502, 503)

RETRY_AFTERS: tuple[str | None, ...] = (
    None,
    "7",
    "0",
    "120",
    " 30 ",
    "1.5",
    "soon",
    "-3",
    "Wed, 21 Oct 2015 07:28:00 GMT",
)
"""``Retry-After`` values whose meaning does not depend on when they are read."""

ERROR_BODIES: tuple[tuple[bytes, str | None], ...] = (
    (b'{"detail":"no"}', JSON_TYPE),
    (b'{"message":"no"}', JSON_TYPE),
    (b'{"error":{"message":"no","type":"invalid_request_error"}}', JSON_TYPE),
    (b"<html><body>bad gateway</body></html>", "text/html"),
    (b"", None),
)

SUCCESS_TYPES: tuple[str | None, ...] = (
    JSON_TYPE,
    "application/json; charset=utf-8",
    "text/plain",
    None,
)


@dataclass(frozen=True)
class Call:
    """What the caller asked for: ``items`` are the texts (embeddings) or the documents."""

    endpoint: Endpoint
    items: tuple[str, ...]
    query: str
    top_k: int | None
    model: str | None = None
    """The model the call names, where it matters which (``None``: the rig's choice)."""

    @property
    def document_ids(self) -> tuple[str, ...] | None:
        """The ids the request gives its documents, where results name documents by id (our
        provider numbers them ``"0"``, ``"1"``, ...)."""
        if self.endpoint.result_ids_at is None:
            return None
        return tuple(str(position) for position in range(len(self.items)))

    def __repr__(self) -> str:
        e = self.endpoint
        return f"Call({e.name}, items={len(self.items)}, top_k={self.top_k})"


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: its status, headers and body bytes, and the family that made it."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...]
    label: str

    @property
    def success(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


@dataclass(frozen=True)
class Case:
    call: Call
    reply: Reply

    @property
    def endpoint(self) -> Endpoint:
        return self.call.endpoint

    def __repr__(self) -> str:
        reply = self.reply
        headers = dict(reply.headers)
        return f"Case({self.call!r}, {reply.label}, {reply.status}, {headers}, {reply.body!r})"


# --------------------------------------------------------------------------- declarations


def wire_top_k(endpoint: Endpoint) -> bool:
    """Whether ``top_k`` travels on the wire, so that a body may exceed it."""
    return endpoint.top_k_at is not None and not endpoint.client_side_top_k


def figure_paths(endpoint: Endpoint) -> dict[str, Path]:
    """The figures this endpoint's body carries, by kind (``count`` or ``text``)."""
    paths: dict[str, Path] = {}
    if endpoint.tokens_at is not None:
        paths["tokens"] = endpoint.tokens_at
    if endpoint.units_at is not None:
        paths["units"] = endpoint.units_at
    if endpoint.characters_at is not None:
        paths["characters"] = endpoint.characters_at
    if endpoint.id_at is not None:
        paths["id"] = endpoint.id_at
    if endpoint.model_at is not None:
        paths["model"] = endpoint.model_at
    return paths


def figure_names(endpoint: Endpoint) -> list[str]:
    """Every figure the reply carries: the body's, each item's, the header's."""
    names = sorted(figure_paths(endpoint))
    if endpoint.tokens_each_at is not None:
        names.append(EACH_FIGURE)
    if endpoint.tokens_header is not None:
        names.append(HEADER_FIGURE)
    return names


def _is_count(name: str) -> bool:
    return name in ("tokens", "units", "characters", EACH_FIGURE)


def families(endpoint: Endpoint, *, errors: bool = True) -> tuple[str, ...]:
    """The kinds of body this endpoint gets (``errors``: error statuses too, where more than
    one path can carry them). Hypothesis favours the front of a list it samples from, so the
    families with the most variety inside them (error statuses, framing) come first and get a
    second entry further back."""
    status = ["status"] if errors else []
    found = ["valid", *status, "framing"]
    if figure_names(endpoint):
        found.append("figure")
    if any(len(path) > 1 for path in figure_paths(endpoint).values()):
        found.append("figure_parent")
    found += ["shape", "entries", "indices"] if endpoint.operation == "embeddings" else []
    found += ["results", "scores", "indices"] if endpoint.operation == "rerank" else []
    if endpoint.operation == "rerank" and wire_top_k(endpoint):
        found.append("too_many")
    found += [*status, "valid"]
    return tuple(found)


# --------------------------------------------------------------------------- building


def put(payload: Any, path: Path, value: object) -> Any:
    """``payload`` with ``value`` at ``path`` (objects made on the way); ``()``: the value."""
    if not path:
        return value
    node = payload
    for key in path[:-1]:
        child = node.get(key)
        if type(child) is not dict:
            child = node[key] = {}
        node = child
    node[path[-1]] = value
    return payload


def drop(payload: Any, path: Path) -> Any:
    """``payload`` without the last key of ``path`` (if it is there)."""
    node = payload
    for key in path[:-1]:
        node = node.get(key) if type(node) is dict else None
    if type(node) is dict:
        node.pop(path[-1], None)
    return payload


def encode(payload: object) -> bytes:
    """JSON as a server might write it: NaN and the infinities as the bare tokens Python's
    decoder (and so every path) accepts, a lone surrogate as its escape."""
    return json.dumps(payload).encode("utf-8")


def _base64_floats(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


_SCORES = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False, width=32)
_ENTRIES = st.one_of(
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, width=32),
    st.integers(min_value=-3, max_value=3),
)


@st.composite
def calls(draw: st.DrawFn, endpoint: Endpoint, *, room_over_top_k: bool = False) -> Call:
    """A call of 1-4 items (2-4 with ``top_k`` below their count when ``room_over_top_k``)."""
    low = 2 if room_over_top_k else 1
    count = 1 if endpoint.single_input else draw(st.integers(min_value=low, max_value=4))
    items = tuple(f"item {n}: " + "lorem " * n for n in range(count))
    top_k: int | None = None
    if endpoint.operation == "rerank":
        if room_over_top_k:
            top_k = draw(st.integers(min_value=1, max_value=count - 1))
        else:
            top_k = draw(st.none() | st.integers(min_value=1, max_value=count + 1))
    return Call(endpoint, items, "what is a tick", top_k)


@st.composite
def _figures(draw: st.DrawFn, endpoint: Endpoint, payload: dict[str, Any]) -> dict[str, Any]:
    """Sound figures where the endpoint keeps them, each one present or absent."""
    for name, path in figure_paths(endpoint).items():
        if not draw(st.booleans() | st.just(True)):
            continue
        value: object
        if _is_count(name):
            value = draw(st.sampled_from(EDGE_COUNTS) | st.integers(0, 100_000))
        else:
            value = draw(st.sampled_from([f"{name}-1", "ünïcödé-" + name, "x" * 300]))
        put(payload, path, value)
    if endpoint.tokens_each_at is not None and draw(st.booleans() | st.just(True)):
        for item in _items(endpoint, payload):
            put(item, endpoint.tokens_each_at, draw(st.sampled_from(EDGE_COUNTS) | _SMALL))
    return payload


_SMALL = st.integers(0, 10_000)


def _items(endpoint: Endpoint, payload: Any) -> list[dict[str, Any]]:
    """The objects at ``vectors_at`` of an items layout (those that are objects)."""
    node = payload
    for key in endpoint.vectors_at:
        node = node.get(key) if type(node) is dict else None
    return [item for item in node if type(item) is dict] if type(node) is list else []


@st.composite
def header_figure(draw: st.DrawFn, endpoint: Endpoint) -> tuple[tuple[str, str], ...]:
    """A sound token count in the endpoint's figure header, or none."""
    name = endpoint.tokens_header
    if name is None or not draw(st.booleans() | st.just(True)):
        return ()
    value = draw(st.sampled_from(EDGE_HEADER_COUNTS) | _SMALL.map(str))
    return ((_header_case(draw, name), value),)


def _header_case(draw: st.DrawFn, name: str) -> str:
    """The header's name as a server may spell it (header names are case-blind)."""
    spelled = draw(st.sampled_from(["lower", "title", "upper"]))
    if spelled == "title":
        return "-".join(part.capitalize() for part in name.split("-"))
    return name.upper() if spelled == "upper" else name


@st.composite
def vectors(draw: st.DrawFn, count: int) -> list[list[Any]]:
    width = draw(st.integers(min_value=1, max_value=4))
    return [draw(st.lists(_ENTRIES, min_size=width, max_size=width)) for _ in range(count)]


def embedding_payload(
    endpoint: Endpoint, rows: list[Any], order: list[int] | None, bare: bool = False
) -> Any:
    """The body of an embedding answer holding ``rows`` in the endpoint's layout (``order``:
    the order of ``data`` entries, by index, for a by-index layout; ``bare``: Cohere v1's float
    vectors as ``embeddings`` itself). A one-vector layout holds its vector, and ``rows`` as
    they are when there is not exactly one."""
    layout = endpoint.vectors
    if layout is VectorLayout.ROWS:
        return put({}, endpoint.vectors_at, rows) if endpoint.vectors_at else rows
    if layout is VectorLayout.BY_TYPE:
        return {"embeddings": {"float": rows}, "texts": []}
    if layout is VectorLayout.FLOATS_OR_BY_TYPE:
        embeddings = rows if bare else {"float": rows}
        return {"embeddings": embeddings, "texts": [], "response_type": "embeddings_floats"}
    if layout is VectorLayout.SINGLE:
        if not rows:
            return {}
        return put({}, endpoint.vectors_at, rows[0] if len(rows) == 1 else rows)
    if layout is VectorLayout.ITEMS:
        items = [put({}, endpoint.vector_in, row) for row in rows]
        return put({}, endpoint.vectors_at, items)
    positions = order if order is not None else list(range(len(rows)))
    data = [{"object": "embedding", "index": i, "embedding": rows[i]} for i in positions]
    return {"object": "list", "data": data}


def results_payload(endpoint: Endpoint, results: list[dict[str, Any]]) -> Any:
    """The body of a rerank answer holding ``results`` where the endpoint keeps them."""
    if not endpoint.results_at:
        return results
    return put({"object": "list"}, endpoint.results_at, results)


@st.composite
def _results(draw: st.DrawFn, call: Call, count: int | None = None) -> list[dict[str, Any]]:
    """Well-formed results: distinct indices into the documents, finite scores, high first
    (or in no order), with a document echo where the endpoint has one."""
    endpoint = call.endpoint
    documents = len(call.items)
    cap = documents if call.top_k is None or not wire_top_k(endpoint) else call.top_k
    cap = min(cap, documents)
    size = count if count is not None else draw(st.integers(min_value=0, max_value=cap))
    indices = draw(st.permutations(range(documents)))[:size]
    scores = sorted((draw(_SCORES) for _ in indices), reverse=True)
    if draw(st.booleans()):
        scores = draw(st.permutations(scores))
    results = []
    for index, score in zip(indices, scores, strict=True):
        entry: dict[str, Any] = {
            _index_key(endpoint): _named(call, index),
            endpoint.score_key: score,
        }
        if endpoint.document_key is not None:
            echo = draw(st.sampled_from(["absent", "text", "object"]))
            if echo == "text":
                entry[endpoint.document_key] = call.items[index]
            elif echo == "object":
                entry[endpoint.document_key] = {"text": call.items[index]}
        results.append(entry)
    return results


def _index_key(endpoint: Endpoint) -> str:
    return endpoint.result_index_key


def _named(call: Call, index: int) -> object:
    """How a result names document ``index``: by position, or by the id the request gave."""
    ids = call.document_ids
    return index if ids is None else ids[index]


@st.composite
def valid_payload(draw: st.DrawFn, call: Call) -> Any:
    endpoint = call.endpoint
    if endpoint.operation == "embeddings":
        rows: list[Any] = draw(vectors(len(call.items)))
        order = draw(st.permutations(range(len(rows))))
        if endpoint.vectors is VectorLayout.BY_INDEX and draw(st.booleans()):
            rows = [_base64_floats([float(x) for x in row]) for row in rows]
        payload = embedding_payload(endpoint, rows, order, bare=draw(st.booleans()))
    else:
        payload = results_payload(endpoint, draw(_results(call)))
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload


# --------------------------------------------------------------------------- corruption

Mutation = Callable[[st.DrawFn, Call], tuple[Any, str]]


Headers = tuple[tuple[str, str], ...]


def _figure(draw: st.DrawFn, call: Call) -> tuple[Any, str, Headers | None]:
    """One figure absent or malformed: in the body, on one item, or in the header (the headers
    are returned then; ``None``: drawn as for a valid body)."""
    endpoint = call.endpoint
    payload = draw(valid_payload(call))
    name = draw(st.sampled_from(figure_names(endpoint)))
    if name == HEADER_FIGURE:
        assert endpoint.tokens_header is not None
        if endpoint.tokens_at is not None and draw(st.booleans()):  # the header counts then
            payload = drop(payload, endpoint.tokens_at)
        bad_text = draw(st.sampled_from(("absent", *BAD_HEADER_COUNTS)))
        if bad_text == "absent":
            return payload, "header absent", ()
        header = ((_header_case(draw, endpoint.tokens_header), bad_text),)
        return payload, f"header={bad_text!r}", header
    bad = draw(st.sampled_from(("absent", *(BAD_COUNTS if _is_count(name) else BAD_TEXTS))))
    if name == EACH_FIGURE:
        items = _items(endpoint, payload)
        assert endpoint.tokens_each_at is not None
        for item in items:
            put(item, endpoint.tokens_each_at, draw(_SMALL))
        at = draw(st.integers(min_value=0, max_value=len(items) - 1))
        if bad == "absent":
            drop(items[at], endpoint.tokens_each_at)
        else:
            put(items[at], endpoint.tokens_each_at, bad)
        return payload, f"item {at} {name}={bad!r}"[:60], None
    path = figure_paths(endpoint)[name]
    if bad == "absent":
        return drop(payload, path), f"{name} absent", None
    return put(payload, path, bad), f"{name}={bad!r}"[:60], None


def _figure_parent(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    payload = draw(valid_payload(call))
    paths = [p for p in figure_paths(call.endpoint).values() if len(p) > 1]
    path = draw(st.sampled_from(paths))
    depth = draw(st.integers(min_value=1, max_value=len(path) - 1))
    value = draw(st.sampled_from(["abc", 7, [], [{"x": 1}], None, True]))
    return put(payload, path[:depth], value), f"{'.'.join(path[:depth])}={value!r}"


def _shape(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    """Vectors of the wrong count or widths, or missing, or not where they belong."""
    endpoint = call.endpoint
    count = len(call.items)
    rows = draw(vectors(count))
    how = draw(
        st.sampled_from(
            ["fewer", "more", "uneven", "empty", "one empty", "missing", "not a list", "v1"]
        )
    )
    label = f"vectors {how}"
    if how == "fewer":
        rows = rows[:-1]
    elif how == "more":
        rows = [*rows, rows[0]]
    elif how == "uneven":
        at = draw(st.integers(min_value=0, max_value=count - 1))
        rows[at] = [*rows[at], 0.25] if draw(st.booleans()) else rows[at][:-1]
    elif how == "empty":
        rows = [[] for _ in rows]
    elif how == "one empty":
        rows[draw(st.integers(min_value=0, max_value=count - 1))] = []
    payload = embedding_payload(endpoint, rows, None, bare=draw(st.booleans()))
    layout = endpoint.vectors
    if how == "missing":
        payload = {"embeddings": {}} if layout is VectorLayout.BY_TYPE else {}
        if layout is VectorLayout.ITEMS and draw(st.booleans()):  # the items, not the vectors
            payload = put({}, endpoint.vectors_at, [{} for _ in rows])
            label = "vectors missing from their items"
    elif how == "not a list":
        value = draw(st.sampled_from(["abc", {"0": rows[0]}, 3, None]))
        payload = _not_a_list(draw, endpoint, payload, rows, value)
        label += f" {value!r}"[:40]
    elif how == "v1":  # another layout's shape: Cohere v1's bare list, OpenAI's data
        if layout is VectorLayout.BY_TYPE:
            payload = {"embeddings": rows}
        elif layout is VectorLayout.BY_INDEX:
            payload = {"embeddings": {"float": rows}}
        elif layout is VectorLayout.SINGLE and draw(st.booleans()):
            payload = put({}, endpoint.vectors_at, rows)  # a list of vectors for one input
            label = "vectors: a list of vectors where one belongs"
        elif layout is VectorLayout.ITEMS and draw(st.booleans()):
            payload = put({}, endpoint.vectors_at, rows)  # bare vectors, not items
            label = "vectors: bare rows where items belong"
        else:
            payload = {"data": [{"index": i, "embedding": r} for i, r in enumerate(rows)]}
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload, label


def _not_a_list(
    draw: st.DrawFn, endpoint: Endpoint, payload: Any, rows: list[Any], value: object
) -> Any:
    """``payload`` with its vectors (or, for items, the items or one item's vector) replaced
    by ``value``."""
    layout = endpoint.vectors
    if layout is VectorLayout.ROWS and not endpoint.vectors_at:
        return {"embeddings": rows} if value is None else value
    if layout is VectorLayout.BY_TYPE:
        return put(payload, ("embeddings", "float"), value)
    if layout is VectorLayout.FLOATS_OR_BY_TYPE:
        return put(payload, ("embeddings",), value)
    if layout is VectorLayout.ITEMS and draw(st.booleans()):
        items = _items(endpoint, payload)
        put(items[draw(st.integers(0, len(items) - 1))], endpoint.vector_in, value)
        return payload
    if layout in (VectorLayout.ROWS, VectorLayout.SINGLE, VectorLayout.ITEMS):
        return put(payload, endpoint.vectors_at, value)
    return put(payload, ("data",), value)


def _entries(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    """One vector entry that is no finite number, or a vector that is no number array."""
    endpoint = call.endpoint
    rows: list[Any] = draw(vectors(len(call.items)))
    at = draw(st.integers(min_value=0, max_value=len(rows) - 1))
    how = draw(st.sampled_from(["entry", "vector"]))
    if how == "entry":
        bad = draw(st.sampled_from(BAD_NUMBERS))
        rows[at][draw(st.integers(min_value=0, max_value=len(rows[at]) - 1))] = bad
        label = f"entry {bad!r}"[:40]
    else:
        bad = draw(
            st.sampled_from(
                [
                    "!!not base64!!",
                    "AAAA",
                    "AAAAAA==",
                    _base64_floats([0.5] * len(rows[0])),
                    _base64_floats([float("nan")] * len(rows[0])),
                    None,
                    7,
                    {"float": rows[0]},
                ]
            )
        )
        rows[at] = bad
        label = f"vector {bad!r}"[:40]
    payload = embedding_payload(endpoint, rows, None, bare=draw(st.booleans()))
    if endpoint.vectors is VectorLayout.BY_INDEX and bad is None and draw(st.booleans()):
        del payload["data"][at]["embedding"]
        label = "embedding key missing"
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload, label


def _indices(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    """An entry whose index is missing, malformed, out of range or repeated."""
    endpoint = call.endpoint
    count = len(call.items)
    if endpoint.operation == "embeddings":
        if endpoint.vectors is not VectorLayout.BY_INDEX:
            return _entries(draw, call)  # no indices on this wire: entries stand in
        payload = embedding_payload(endpoint, draw(vectors(count)), None)
        entries: list[dict[str, Any]] = payload["data"]
    else:
        entries = draw(_results(call, count=min(count, call.top_k or count)))
        if not entries:
            entries = draw(_results(call, count=1))
        payload = results_payload(endpoint, entries)
    at = draw(st.integers(min_value=0, max_value=len(entries) - 1))
    how = draw(st.sampled_from(["missing", "malformed", "out of range", "duplicate"]))
    key = "index" if endpoint.operation == "embeddings" else _index_key(endpoint)
    by_id = endpoint.operation == "rerank" and call.document_ids is not None
    if how == "missing":
        del entries[at][key]
        label = f"{key} missing"
    elif how == "malformed":
        bad = draw(st.sampled_from(BAD_IDS if by_id else BAD_INDICES))
        entries[at][key] = bad
        label = f"{key} {bad!r}"
    elif how == "out of range":
        beyond = count + draw(st.integers(min_value=0, max_value=2))
        entries[at][key] = str(beyond) if by_id else beyond
        label = f"{key} out of range"
    else:
        if len(entries) < 2:
            entries.append(dict(entries[0]))
        else:
            entries[at][key] = entries[at - 1][key]
        label = f"{key} duplicate"
        if by_id and draw(st.booleans()):  # an index beside the id is not read
            entries[at]["index"] = 0
            label += " (with an index)"
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload, label


def _results_shape(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    """Results missing, not a list, entries that are not objects, or a bad document echo."""
    endpoint = call.endpoint
    entries: list[Any] = draw(_results(call, count=1))
    how = draw(st.sampled_from(["missing", "not a list", "entry", "echo"]))
    label = f"results {how}"
    payload: Any = results_payload(endpoint, entries)
    value: object
    if how == "missing":
        payload = {} if endpoint.results_at else {"results": entries}
    elif how == "not a list":
        value = draw(st.sampled_from(["abc", {"0": entries[0]}, 3, None]))
        payload = put(payload, endpoint.results_at, value) if endpoint.results_at else value
        label += f" {value!r}"[:40]
    elif how == "entry":
        value = draw(st.sampled_from(["abc", 3, None, [entries[0]]]))
        entries[0] = value
        label += f" {value!r}"[:40]
    else:
        key = endpoint.document_key or "document"
        value = draw(st.sampled_from([7, True, [call.items[0]], 0.5]))
        entries[0][key] = value
        label += f" {value!r}"
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload, label


def _scores(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    endpoint = call.endpoint
    entries = draw(_results(call, count=1))
    bad = draw(st.sampled_from(("absent", *BAD_NUMBERS)))
    if bad == "absent":
        del entries[0][endpoint.score_key]
    else:
        entries[0][endpoint.score_key] = bad
    payload = results_payload(endpoint, entries)
    if type(payload) is dict:
        payload = draw(_figures(endpoint, payload))
    return payload, f"score {bad!r}"[:40]


def _too_many(draw: st.DrawFn, call: Call) -> tuple[Any, str]:
    assert call.top_k is not None
    over = draw(st.integers(min_value=1, max_value=len(call.items) - call.top_k))
    entries = draw(_results(call, count=call.top_k + over))
    payload = draw(_figures(call.endpoint, results_payload(call.endpoint, entries)))
    return payload, f"{call.top_k + over} results for top_k={call.top_k}"


_MUTATIONS: dict[str, Mutation] = {
    "figure_parent": _figure_parent,
    "shape": _shape,
    "entries": _entries,
    "indices": _indices,
    "results": _results_shape,
    "scores": _scores,
    "too_many": _too_many,
}


@st.composite
def _framing(draw: st.DrawFn, call: Call) -> tuple[bytes, str]:
    """A body that is not a JSON document, or is one of the wrong kind."""
    how = draw(st.sampled_from(["truncated", "not json", "scalar"]))
    if how == "truncated":
        whole = encode(draw(valid_payload(call)))
        cut = draw(st.integers(min_value=1, max_value=len(whole) - 1))
        return whole[:cut], f"truncated at {cut}/{len(whole)}"
    if how == "not json":
        body = draw(
            st.sampled_from([b"<html>oops</html>", b"not json", b"", b"\xff\xfe{}", b"{'a': 1}"])
        )
        return body, f"not json {body[:12]!r}"
    body = draw(st.sampled_from([b"null", b"1", b'"text"', b"true", b"[]", b"{}", b"NaN"]))
    return body, f"json {body.decode()}"


def error_statuses(endpoint: Endpoint) -> list[int]:
    """The error statuses an endpoint gets: the common ones and its own overrides."""
    return sorted({*ERROR_STATUSES, *endpoint.status_overrides})


def error_reply(status: int, body: bytes, kind: str | None, wait: str | None) -> Reply:
    headers = [("content-type", kind)] if kind is not None else []
    if wait is not None:
        headers.append(("retry-after", wait))
    label = f"status: {status}" + (f" retry-after {wait!r}" if wait is not None else "")
    return Reply(status, body, tuple(headers), label)


def every_error_reply(endpoint: Endpoint) -> list[Reply]:
    """Every error status with every error body (and every ``Retry-After`` for 429 and 503):
    a small, finite space, covered whole rather than sampled."""
    return [
        error_reply(status, body, kind, wait)
        for status in error_statuses(endpoint)
        for body, kind in ERROR_BODIES
        for wait in (RETRY_AFTERS if status in (429, 503) else (None,))
    ]


@st.composite
def replies(draw: st.DrawFn, call: Call, family: str) -> Reply:
    endpoint = call.endpoint
    if family == "status":
        status = draw(st.sampled_from(error_statuses(endpoint)))
        body, kind = draw(st.sampled_from(ERROR_BODIES))
        wait = draw(st.sampled_from(RETRY_AFTERS)) if status in (429, 503) else None
        return error_reply(status, body, kind, wait)
    figure_header: Headers | None = None
    if family == "framing":
        body, label = draw(_framing(call))
    else:
        if family == "valid":
            payload, label = draw(valid_payload(call)), "valid"
        elif family == "figure":
            payload, label, figure_header = _figure(draw, call)
        else:
            payload, label = _MUTATIONS[family](draw, call)
        body = encode(payload)
    kind = draw(st.sampled_from(SUCCESS_TYPES))
    headers = [("content-type", kind)] if kind is not None else []
    if figure_header is None:
        figure_header = draw(header_figure(endpoint))
    headers += figure_header
    if kind != JSON_TYPE:
        label += f" as {kind}"
    return Reply(200, body, tuple(headers), f"{family}: {label}")


@st.composite
def cases(draw: st.DrawFn, endpoint: Endpoint, *, errors: bool = True) -> Case:
    """One call to ``endpoint`` and the answer it gets (``errors``: error statuses too)."""
    family = draw(st.sampled_from(families(endpoint, errors=errors)))
    call = draw(calls(endpoint, room_over_top_k=family == "too_many"))
    return Case(call, draw(replies(call, family)))
