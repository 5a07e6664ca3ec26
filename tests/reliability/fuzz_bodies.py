"""Hostile response bodies for the wire fuzz, grown from each endpoint's valid wire shape.

A body starts as the JSON tree a vendor really answers (``spanledger.testing`` and the
retrieval wire rules give the shapes), then is mutated: nodes dropped, retyped or replaced by
garbage figures, non-finite number tokens, lone surrogates, invalid UTF-8, deep nesting; then the
bytes themselves may be cut, emptied or replaced; then status, headers and content encoding are
drawn. ``Raw`` splices text that ``json.dumps`` cannot write (``1e999``, ``NaN``, invalid UTF-8,
100,000-deep arrays) into the encoded body.

The body sentinel is put only where spanledger must not copy it from: error bodies, document
echoes, unknown keys, garbage in place of figures and vectors. The two fields an event may echo
(the root ``id`` and ``model``) never receive it.
"""

from __future__ import annotations

import base64
import gzip
import importlib
import importlib.util
import json
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx
from hypothesis import strategies as st

BODY_SENTINEL = "FUZZ-BODY-SENTINEL-c7d2e41b"
"""Put in response bodies (and transport error messages); must never leave them."""
INPUT_SENTINEL = "FUZZ-INPUT-SENTINEL-5a90f3e6"
"""Put in every input text, query and document; must never reach an error or the log."""
API_KEY = "sk-FUZZ-KEY-SENTINEL-0b8e17d4"
"""The key every hosted provider is given; must never reach an error or the log."""
INT64_MAX = 2**63 - 1

T = TypeVar("T")
JsonPath = tuple[str | int, ...]
Operation = Literal["embeddings", "rerank"]


@dataclass(frozen=True)
class Raw:
    """Bytes spliced verbatim into the encoded JSON text."""

    data: bytes

    def __repr__(self) -> str:
        shown = self.data[:24]
        return f"Raw({shown!r}{'...' if len(self.data) > 24 else ''} {len(self.data)}B)"


def encode(node: object) -> bytes:
    """JSON text for a tree of dicts, lists, scalars and ``Raw`` tokens (strings ASCII-escaped,
    so a lone surrogate becomes its ``\\udXXX`` escape)."""
    out: list[bytes] = []
    _encode_into(node, out)
    return b"".join(out)


def _encode_into(node: object, out: list[bytes]) -> None:
    if isinstance(node, Raw):
        out.append(node.data)
    elif node is None or isinstance(node, bool | float | str):
        out.append(json.dumps(node).encode("ascii"))
    elif isinstance(node, int):
        out.append(str(node).encode("ascii"))
    elif isinstance(node, list):
        out.append(b"[")
        for position, item in enumerate(node):
            if position:
                out.append(b",")
            _encode_into(item, out)
        out.append(b"]")
    elif isinstance(node, dict):
        out.append(b"{")
        for position, (key, value) in enumerate(node.items()):
            if position:
                out.append(b",")
            out.append(json.dumps(key).encode("ascii"))
            out.append(b":")
            _encode_into(value, out)
        out.append(b"}")
    else:
        raise TypeError(f"cannot encode {type(node).__name__}")


# --------------------------------------------------------------------------- hostile values

NON_FINITE: tuple[object, ...] = (
    Raw(b"NaN"),
    Raw(b"Infinity"),
    Raw(b"-Infinity"),
    Raw(b"1e999"),
    Raw(b"-1e999"),
    Raw(b"1" + b"0" * 400 + b".5"),
    10**400,
    -(10**400),
)
"""Number tokens Python's json reads as NaN, +-inf, or an int no float can hold."""

HUGE_FIGURES: tuple[int, ...] = (2**63, 2**63 + 4321, 2**64, 10**400)
"""Usage figures above 2**63 - 1: not a real count, so "not reported"."""

DEEP_ARRAYS = Raw(b"[" * 100_000 + b"]" * 100_000)
DEEP_OBJECTS = Raw(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
DEEP: tuple[Raw, ...] = (
    DEEP_ARRAYS,
    DEEP_OBJECTS,
    Raw(b"[" * 2_000 + b"]" * 2_000),
    Raw(b"[" * 100_000),
    Raw(b"[" * 500 + b"0.5" + b"]" * 500),
)

FIGURE_GARBAGE: tuple[object, ...] = (
    "12",
    "",
    True,
    False,
    6.0,
    1.5,
    -3,
    -1,
    None,
    [],
    {},
    [7],
    {"value": 7},
    *HUGE_FIGURES,
    -(2**63) - 1,
    Raw(b"1e999"),
    Raw(b"NaN"),
    Raw(b"-0"),
    Raw(b"1" + b"0" * 5_000),  # more digits than int() accepts: json raises ValueError
    Raw(b"1E2"),
)
"""What a count may be replaced by: strings, bools, floats, negatives, huge or unreadable."""

WEIRD_STRINGS: tuple[str, ...] = (
    "\ud800",
    "\udfff",
    "a\udbffz",
    "\udc00\ud800",
    "",
    "\x00",
    "\u2028",
)
RAW_STRINGS: tuple[Raw, ...] = (
    Raw(b'"\xed\xa0\x80"'),  # a lone surrogate written as UTF-8 bytes (invalid UTF-8)
    Raw(b'"\xff\xfe"'),
    Raw(b'"\xc3"'),
    Raw(b'"' + BODY_SENTINEL.encode() + b'\xff"'),
    Raw(b'"\\ud800'),  # unterminated string with an escape
)

PROTECTED_PATHS: frozenset[JsonPath] = frozenset({("id",), ("model",)})
"""Root ``id`` and ``model``: an event may legitimately echo them, so no sentinel there."""

GARBAGE_KEYS: tuple[str, ...] = (
    "x",
    "data",
    "results",
    "embedding",
    "embeddings",
    "float",
    "index",
    "relevance_score",
    "score",
    "usage",
    "meta",
    "billed_units",
    "total_tokens",
    "search_units",
    "document",
    "text",
    "",
    "\ud800",
    BODY_SENTINEL,
)
"""Keys for garbage objects and unknown keys; never ``id`` or ``model``."""

INTERESTING_KEYS = frozenset(
    {
        "id",
        "model",
        "data",
        "results",
        "embeddings",
        "float",
        "embedding",
        "index",
        "relevance_score",
        "score",
        "document",
        "text",
        "usage",
        "meta",
        "billed_units",
        "prompt_tokens",
        "total_tokens",
        "input_tokens",
        "search_units",
    }
)


def _scalars(protected: bool) -> st.SearchStrategy[object]:
    options: list[st.SearchStrategy[object]] = [
        st.sampled_from(FIGURE_GARBAGE),
        st.sampled_from(NON_FINITE),
        st.sampled_from(WEIRD_STRINGS),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(st.characters(exclude_categories=["Cs"]), max_size=6),
        st.booleans(),
        st.none(),
    ]
    if not protected:
        options.append(st.sampled_from((BODY_SENTINEL, *RAW_STRINGS)))
    return st.one_of(options)


def garbage(protected: bool = False) -> st.SearchStrategy[object]:
    """Any JSON value (plus unreadable tokens); ``protected`` keeps the sentinel out of a
    top-level string."""
    children = st.recursive(
        _scalars(False),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(GARBAGE_KEYS), inner, max_size=3)
        ),
        max_leaves=6,
    )
    containers = st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(GARBAGE_KEYS), children, max_size=3
    )
    return st.one_of(_scalars(protected), containers)


# --------------------------------------------------------------------------- tree edits


def node_paths(node: object, prefix: JsonPath = ()) -> list[JsonPath]:
    """Every node's path in a tree, the root's (``()``) first."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(node_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(node_paths(value, (*prefix, index)))
    return found


def at(node: object, path: JsonPath) -> object:
    for step in path:
        node = node[step]  # type: ignore[index]
    return node


def replaced(node: object, path: JsonPath, new: Callable[[object], object] | None) -> object:
    """A copy of ``node`` with the node at ``path`` replaced by ``new(old)``, or removed."""
    if not path:
        if new is None:
            raise ValueError("cannot remove the root")
        return new(node)
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        copy_d = dict(node)
        if not rest and new is None:
            del copy_d[head]
        else:
            copy_d[head] = replaced(node[head], rest, new)
        return copy_d
    if isinstance(node, list) and isinstance(head, int):
        copy_l = list(node)
        if not rest and new is None:
            del copy_l[head]
        else:
            copy_l[head] = replaced(node[head], rest, new)
        return copy_l
    raise KeyError(path)


def inserted_after(node: object, path: JsonPath) -> object:
    """A copy with the list element at ``path`` duplicated (the tree unchanged otherwise)."""
    parent_path, last = path[:-1], path[-1]
    parent = at(node, parent_path)
    if not isinstance(parent, list) or not isinstance(last, int):
        return node

    def grow(old: object) -> object:
        assert isinstance(old, list)
        return [*old[: last + 1], old[last], *old[last + 1 :]]

    return replaced(node, parent_path, grow)


MUTATIONS = (
    "drop",
    "garbage",
    "non-finite",
    "figure",
    "string",
    "stringify",
    "negate",
    "wrap-list",
    "wrap-object",
    "empty-container",
    "deep",
    "duplicate",
    "unknown-key",
)


@st.composite
def mutated(draw: st.DrawFn, tree: object) -> tuple[object, str]:
    """One edit of ``tree`` at a drawn node; returns the new tree and what was done."""
    paths = node_paths(tree)
    interesting = [p for p in paths if p and _interesting(p)]
    prefer_interesting = draw(st.booleans())
    pool = interesting if interesting and prefer_interesting else paths
    path = draw(st.sampled_from(pool))
    op = draw(st.sampled_from(MUTATIONS))
    protected = path in PROTECTED_PATHS
    old = at(tree, path)
    new: object
    if op == "drop" and path:
        return replaced(tree, path, None), f"drop {_show(path)}"
    if op == "duplicate" and path and isinstance(path[-1], int):
        return inserted_after(tree, path), f"duplicate {_show(path)}"
    if op == "unknown-key" and isinstance(old, dict):
        key = draw(st.sampled_from(GARBAGE_KEYS))
        value = draw(garbage())
        grown = {**old, key: value}
        return replaced(tree, path, lambda _: grown), f"unknown key {key!r} at {_show(path)}"
    if op == "non-finite":
        new = draw(st.sampled_from(NON_FINITE))
    elif op == "figure":
        choices = FIGURE_GARBAGE if protected else (*FIGURE_GARBAGE, BODY_SENTINEL)
        new = draw(st.sampled_from(choices))
    elif op == "string":
        choices_s: tuple[object, ...] = (
            WEIRD_STRINGS if protected else (*WEIRD_STRINGS, *RAW_STRINGS)
        )
        new = draw(st.sampled_from(choices_s))
    elif op == "stringify":
        new = _stringified(old)
    elif op == "negate":
        new = -old if isinstance(old, int | float) and not isinstance(old, bool) else -1
    elif op == "wrap-list":
        new = [old]
    elif op == "wrap-object":
        new = {"x": old}
    elif op == "empty-container":
        new = draw(st.sampled_from(([], {}, "", 0)))
    elif op == "deep":
        new = draw(st.sampled_from(DEEP))
    else:
        new = draw(garbage(protected))
    return replaced(tree, path, lambda _: new), f"{op} {_show(path)} -> {_short(new)}"


def _interesting(path: JsonPath) -> bool:
    """A figure, id, score, index, vector value or the containers holding them."""
    last = path[-1]
    if isinstance(last, str):
        return last in INTERESTING_KEYS
    parent = path[-2] if len(path) >= 2 else None
    return parent in ("embedding", "float", "data", "results") or len(path) <= 2


def _stringified(old: object) -> object:
    if isinstance(old, Raw):
        return old.data.decode("latin-1")
    if isinstance(old, str):
        return [old]
    try:
        return json.dumps(old)
    except (TypeError, ValueError):
        return "x"


def _show(path: JsonPath) -> str:
    return "/" + "/".join(str(step) for step in path)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- valid bodies

VECTOR_VALUES: st.SearchStrategy[float | int] = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1, 1, width=32),
    st.integers(-(10**6), 10**6),
)
SCORES: st.SearchStrategy[float | int] = st.one_of(
    st.floats(0, 1), st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 5)
)
FIGURES = st.integers(0, 10**6)
IDS = st.text("abcdef0123456789-_", min_size=1, max_size=12)


def error_body(vendor: str) -> object:
    """The vendor's error body, with the sentinel as its message."""
    message = f"upstream said: {BODY_SENTINEL}"
    if vendor == "openai":
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    if vendor == "tei":
        return {"error": message, "error_type": "Validation"}
    if vendor == "cohere":
        return {"id": "err-1", "message": message}
    return {"detail": message}


def float32_base64(values: Sequence[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode("ascii")


@st.composite
def embed_body(draw: st.DrawFn, vendor: str, count: int, width: int) -> object:
    """A sound embeddings answer for ``count`` inputs of ``width`` dimensions."""
    vectors = [[draw(VECTOR_VALUES) for _ in range(width)] for _ in range(count)]
    if vendor == "tei":
        return vectors
    if vendor == "cohere":
        return {
            "id": draw(IDS),
            "embeddings": {"float": vectors},
            "texts": [BODY_SENTINEL] * count,
            "meta": {
                "api_version": {"version": "2"},
                "billed_units": {"input_tokens": draw(FIGURES)},
            },
            "x_fuzz_note": BODY_SENTINEL,
        }
    entries: list[dict[str, Any]] = []
    for index, vector in enumerate(vectors):
        embedding: object = vector
        if vendor == "openai" and draw(st.integers(0, 3)) == 0:
            embedding = float32_base64([draw(st.floats(-1, 1, width=32)) for _ in vector])
        entry: dict[str, Any] = {"object": "embedding", "index": index, "embedding": embedding}
        if draw(st.booleans()):
            entry["x_fuzz_note"] = BODY_SENTINEL
        entries.append(entry)
    tokens = draw(FIGURES)
    usage = (
        {"prompt_tokens": tokens, "total_tokens": tokens}
        if vendor == "openai"
        else {"total_tokens": tokens}
    )
    body: dict[str, Any] = {
        "object": "list",
        "data": draw(st.permutations(entries)),
        "model": draw(IDS),
        "usage": usage,
        "x_fuzz_note": BODY_SENTINEL,
    }
    if draw(st.booleans()):
        body["id"] = draw(IDS)
    return body


@st.composite
def rerank_body(
    draw: st.DrawFn,
    vendor: str,
    count: int,
    top_k: int | None,
    return_documents: bool,
    at_least_one: bool = False,
) -> object:
    """A sound rerank answer for ``count`` documents (TEI answers every document)."""
    order = draw(st.permutations(range(count)))
    if vendor == "tei":
        chosen = list(order)
    else:
        limit = count if top_k is None else min(top_k, count)
        size = draw(st.integers(1 if at_least_one else 0, limit))
        chosen = list(order[:size])
    score_key = "score" if vendor == "tei" else "relevance_score"
    entries: list[dict[str, Any]] = []
    for index in chosen:
        entry: dict[str, Any] = {"index": index, score_key: draw(SCORES)}
        if return_documents:
            echo: object = f"{BODY_SENTINEL} doc {index}"
            if vendor == "jina":
                echo = {"text": echo}
            entry["text" if vendor == "tei" else "document"] = echo
        if draw(st.booleans()):
            entry["x_fuzz_note"] = BODY_SENTINEL
        entries.append(entry)
    if draw(st.booleans()):
        entries.sort(key=lambda e: -e[score_key])
    if vendor == "tei":
        return entries
    if vendor == "cohere":
        return {
            "id": draw(IDS),
            "results": entries,
            "meta": {"billed_units": {"search_units": draw(FIGURES)}},
            "x_fuzz_note": BODY_SENTINEL,
        }
    if vendor == "jina":
        return {
            "model": draw(IDS),
            "usage": {"total_tokens": draw(FIGURES)},
            "results": entries,
            "x_fuzz_note": BODY_SENTINEL,
        }
    return {
        "object": "list",
        "data": entries,
        "model": draw(IDS),
        "usage": {"total_tokens": draw(FIGURES)},
        "x_fuzz_note": BODY_SENTINEL,
    }


# --------------------------------------------------------------------------- whole replies


@dataclass(frozen=True)
class TransportFailure:
    """The inner transport fails: before answering, or after ``after`` body bytes."""

    error: type[httpx.TransportError]
    after: int | None

    def exception(self) -> httpx.TransportError:
        return self.error(f"illegal chunk header: bytearray(b'{BODY_SENTINEL}')")


@dataclass(frozen=True)
class WireReply:
    """One answer on the wire: status, raw header pairs, body bytes, or a transport failure."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    failure: TransportFailure | None = None
    note: str = ""

    def describe(self) -> str:
        shown = self.body[:200]
        more = f"... ({len(self.body)} bytes)" if len(self.body) > 200 else ""
        failure = ""
        if self.failure is not None:
            after = self.failure.after
            where = "before answering" if after is None else f"after {after} body bytes"
            error = self.failure.exception()
            failure = f" transport raises {type(error).__name__}({str(error)!r}) {where};"
        return (
            f"status={self.status} headers={list(self.headers)!r};{failure} "
            f"body={shown!r}{more} [{self.note}]"
        )


STATUS_GROUPS: tuple[tuple[int, tuple[int, ...]], ...] = (
    (12, (200,)),
    (3, (201, 202, 203, 204, 206, 226, 299)),
    (1, (100, 101, 102, 103, 199)),
    (1, (300, 301, 302, 303, 304, 307, 308, 399)),
    (3, (400, 401, 402, 403, 404, 405, 408, 409, 413, 415, 422, 424, 429, 451, 499)),
    (2, (500, 501, 502, 503, 504, 507, 529, 599)),
    (1, (600, 700, 999)),
)


def weighted(options: Sequence[tuple[int, st.SearchStrategy[T]]]) -> st.SearchStrategy[T]:
    """Draw from one of ``options``, picked in proportion to its weight."""
    table: list[st.SearchStrategy[T]] = []
    for weight, strategy in options:
        table.extend([strategy] * weight)
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


STATUSES: st.SearchStrategy[int] = weighted(
    [(weight, st.sampled_from(codes)) for weight, codes in STATUS_GROUPS]
)

RETRY_AFTER_VALUES: tuple[bytes, ...] = (
    b"0",
    b"5",
    b"-1",
    b"1.5",
    b"99999999999999999999999",
    b"1e999",
    b"inf",
    b"nan",
    b"",
    b"  ",
    b"Mon, 01 Jan 99999 00:00:00 GMT",
    b"Fri, 31 Dec 9999 23:59:59 GMT",
    b"Thu, 01 Jan 1970 00:00:00 GMT",
    b"Sun, 06 Nov 1994 08:49:37 +9999",
    b"Wed, 32 Foo 2020 25:61:61 XYZ",
    b"\xff\xfe",
    b"\xef\xbc\x93",  # a full-width digit: isdigit() but not ASCII
    b"1, 2",
    b"0x10",
)
CONTENT_TYPES: tuple[bytes, ...] = (
    b"application/json",
    b"text/html; charset=utf-8",
    b"application/json; charset=utf-16",
    b"application/json; charset=no-such-charset",
    b"application/octet-stream",
)


def _printable(data: bytes) -> bytes:
    return bytes(byte for byte in data if byte >= 0x20 and byte != 0x7F)


def _zstd(body: bytes) -> bytes:
    compressor: Any = importlib.import_module("zstandard").ZstdCompressor()
    data: bytes = compressor.compress(body)
    return data


Encoder = Callable[[bytes], bytes]
ENCODINGS: tuple[tuple[bytes, Encoder], ...] = (
    (b"gzip", lambda body: gzip.compress(body, mtime=0)),
    (b"gzip", lambda body: body),  # declared, not applied: the bytes are not gzip
    (b"gzip", lambda body: gzip.compress(body, mtime=0)[:-6]),  # cut short
    (b"deflate", zlib.compress),
    (b"deflate", lambda body: body),
    (b"zstd", lambda body: body),
    (b"br", lambda body: body),
    (b"identity", lambda body: body),
    (b"gzip, gzip", lambda body: gzip.compress(gzip.compress(body, mtime=0), mtime=0)),
    (b"gzip, gzip", lambda body: gzip.compress(body, mtime=0)),
    (b"x-no-such-coding", lambda body: body),
)
if importlib.util.find_spec("zstandard") is not None:  # httpx decodes zstd only with it
    ENCODINGS = (*ENCODINGS, (b"zstd", _zstd))


@st.composite
def framed(draw: st.DrawFn, body: bytes) -> tuple[tuple[tuple[bytes, bytes], ...], bytes, str]:
    """Headers for ``body`` (and the body as encoded on the wire)."""
    headers: list[tuple[bytes, bytes]] = []
    notes: list[str] = []
    if draw(st.integers(0, 5)):
        headers.append((b"content-type", draw(st.sampled_from(CONTENT_TYPES))))
    if draw(st.integers(0, 3)) == 0:
        value = draw(st.sampled_from(RETRY_AFTER_VALUES) | st.binary(max_size=24).map(_printable))
        headers.append((b"retry-after", value))
    if draw(st.integers(0, 4)) == 0:
        name, encoder = draw(st.sampled_from(ENCODINGS))
        body = encoder(body)
        headers.append((b"content-encoding", name))
        notes.append(f"content-encoding {name.decode()}")
    return tuple(headers), body, ", ".join(notes)


BYTE_MUTATIONS = (
    "truncate",
    "empty",
    "non-json",
    "deep-arrays",
    "deep-objects",
    "invalid-utf8",
    "bom",
    "utf-16",
    "trailing",
    "twice",
)


@st.composite
def byte_mutated(draw: st.DrawFn, body: bytes) -> tuple[bytes, str]:
    op = draw(st.sampled_from(BYTE_MUTATIONS))
    sentinel = BODY_SENTINEL.encode()
    if op == "truncate" and body:
        cut = draw(st.integers(0, len(body) - 1))
        return body[:cut], f"truncated at {cut}"
    if op == "empty":
        return b"", "empty"
    if op == "non-json":
        text = draw(
            st.sampled_from(
                (
                    b"<html><body>" + sentinel + b"</body></html>",
                    b"upstream error: " + sentinel,
                    b"\x00\x01\x02" + sentinel,
                    b"null",
                    b"true",
                    b"0",
                    b'"' + sentinel + b'"',
                )
            )
        )
        return text, "not the endpoint's JSON"
    if op == "deep-arrays":
        return DEEP_ARRAYS.data, "[ x100000 then ] x100000"
    if op == "deep-objects":
        return DEEP_OBJECTS.data, '{"a": x100000'
    if op == "invalid-utf8" and body:
        cut = draw(st.integers(0, len(body)))
        return body[:cut] + b"\xff\xc3" + body[cut:], f"invalid UTF-8 at {cut}"
    if op == "bom":
        return b"\xef\xbb\xbf" + body, "UTF-8 BOM"
    if op == "utf-16":
        return body.decode("latin-1").encode("utf-16"), "re-encoded as UTF-16"
    if op == "trailing":
        return body + b"]" + sentinel, "trailing garbage"
    return body + body, "body twice"


@st.composite
def transport_failures(draw: st.DrawFn, body_length: int) -> TransportFailure:
    error = draw(
        st.sampled_from(
            (
                httpx.ReadError,
                httpx.RemoteProtocolError,
                httpx.ReadTimeout,
                httpx.ConnectError,
                httpx.WriteError,
            )
        )
    )
    after = draw(st.none() | st.integers(0, body_length))
    return TransportFailure(error, after)


@st.composite
def hostile_reply(
    draw: st.DrawFn,
    valid: st.SearchStrategy[object],
    vendor: str,
    failures: bool = True,
) -> WireReply:
    """A reply grown from ``valid``: a drawn status, up to three tree edits, maybe a byte-level
    edit, drawn headers and content coding, and sometimes a failing transport."""
    status = draw(STATUSES)
    success = 200 <= status < 300
    tree = draw(valid) if success or draw(st.booleans()) else error_body(vendor)
    notes: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        tree, note = draw(mutated(tree))
        notes.append(note)
    body = encode(tree)
    if draw(st.integers(0, 4)) == 0:
        body, note = draw(byte_mutated(body))
        notes.append(note)
    headers, body, framing_note = draw(framed(body))
    if framing_note:
        notes.append(framing_note)
    failure = None
    if failures and draw(st.integers(0, 11)) == 0:
        failure = draw(transport_failures(len(body)))
    return WireReply(status, headers, body, failure, "; ".join(notes) or "valid")


def plain_reply(tree: object, note: str) -> WireReply:
    """A 200 with a JSON content type and exactly the encoded ``tree``."""
    return WireReply(200, ((b"content-type", b"application/json"),), encode(tree), None, note)


# --------------------------------------------------------------------------- labelled cases


def vector_paths(vendor: str, tree: object) -> list[JsonPath]:
    """Paths of every number inside an embeddings answer's vectors (and base64 vectors)."""
    found: list[JsonPath] = []
    for path in node_paths(tree):
        if vendor == "tei":
            wanted = len(path) == 2
        elif vendor == "cohere":
            wanted = len(path) == 4 and path[:2] == ("embeddings", "float")
        else:
            wanted = len(path) >= 3 and path[2] == "embedding"
            wanted = wanted and (len(path) == 4 or isinstance(at(tree, path), str))
        if wanted:
            found.append(path)
    return found


def score_paths(vendor: str, tree: object) -> list[JsonPath]:
    key = "score" if vendor == "tei" else "relevance_score"
    return [p for p in node_paths(tree) if p and p[-1] == key]


@st.composite
def corrupted(
    draw: st.DrawFn, vendor: str, operation: Operation, tree: object
) -> tuple[object, str]:
    """``tree`` with one vector value or one score made non-finite or out of float range."""
    paths = vector_paths(vendor, tree) if operation == "embeddings" else score_paths(vendor, tree)
    path = draw(st.sampled_from(paths))
    old = at(tree, path)
    if isinstance(old, str):  # a base64 float32 vector: put a NaN or an infinity inside
        width = len(base64.b64decode(old)) // 4
        bad = draw(st.sampled_from((math.nan, math.inf, -math.inf)))
        slot = draw(st.integers(0, max(0, width - 1)))
        values = [0.5] * max(1, width)
        values[slot] = bad
        return replaced(tree, path, lambda _: float32_base64(values)), f"base64 {bad} {_show(path)}"
    token = draw(st.sampled_from(NON_FINITE))
    return replaced(tree, path, lambda _: token), f"{_short(token)} at {_show(path)}"


# --------------------------------------------------------------------------- a fixed sound body


def sound_tree(
    vendor: str, operation: Operation, count: int, width: int = 3, documents: bool = True
) -> object:
    """A fixed valid answer (every result, scores descending) with the sentinel in unknown
    keys and document echoes; TEI embeddings (a bare array of vectors) has no place for it."""
    if operation == "embeddings":
        vectors = [[index + 0.5] + [0.25] * (width - 1) for index in range(count)]
        if vendor == "tei":
            return vectors
        if vendor == "cohere":
            return {
                "id": "emb-1",
                "embeddings": {"float": vectors},
                "texts": [BODY_SENTINEL] * count,
                "meta": {"billed_units": {"input_tokens": 7}},
                "x_fuzz_note": BODY_SENTINEL,
            }
        usage = (
            {"prompt_tokens": 7, "total_tokens": 7} if vendor == "openai" else {"total_tokens": 7}
        )
        return {
            "object": "list",
            "id": "emb-1",
            "data": [
                {"object": "embedding", "index": i, "embedding": v, "x_fuzz_note": BODY_SENTINEL}
                for i, v in enumerate(vectors)
            ],
            "model": "model-echo",
            "usage": usage,
            "x_fuzz_note": BODY_SENTINEL,
        }
    score_key = "score" if vendor == "tei" else "relevance_score"
    entries: list[dict[str, Any]] = []
    for index in range(count):
        entry: dict[str, Any] = {"index": index, score_key: 0.9 - index / 10}
        if documents:
            echo: object = f"{BODY_SENTINEL} doc {index}"
            entry["text" if vendor == "tei" else "document"] = (
                {"text": echo} if vendor == "jina" else echo
            )
        entry["x_fuzz_note"] = BODY_SENTINEL
        entries.append(entry)
    if vendor == "tei":
        return entries
    if vendor == "cohere":
        return {
            "id": "rr-1",
            "results": entries,
            "meta": {"billed_units": {"search_units": 1}},
            "x_fuzz_note": BODY_SENTINEL,
        }
    key = "results" if vendor == "jina" else "data"
    return {
        "object": "list",
        "model": "model-echo",
        key: entries,
        "usage": {"total_tokens": 11},
        "x_fuzz_note": BODY_SENTINEL,
    }
