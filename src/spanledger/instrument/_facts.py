"""What a call asked for and what its response reported, in the shape events need.

Facts are gathered from loosely typed arguments (an SDK's keyword arguments, a request body, a
manual call) without ever raising: a value that does not fit is left out, not repaired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import httpx

from spanledger.estimates import utf8_bytes as utf8_length
from spanledger.events import EmbeddingUsage, RerankUsage, ScoredDocument

__all__ = [
    "CallFacts",
    "EmbedFacts",
    "Figures",
    "RerankFacts",
    "given",
    "input_texts",
    "passed",
    "positive_int",
    "server_of",
    "text_or_none",
    "utf8_length",
]


@dataclass(slots=True)
class EmbedFacts:
    """An embedding call as the caller made it. ``inputs`` only when every input is text."""

    operation: ClassVar[Literal["embeddings"]] = "embeddings"
    provider: str
    model: str
    input_count: int
    inputs: list[str] | None = None
    input_type: str | None = None
    request_params: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None
    billing: str | None = None


@dataclass(slots=True)
class RerankFacts:
    """A rerank call as the caller made it. ``query_length`` is in UTF-8 bytes."""

    operation: ClassVar[Literal["rerank"]] = "rerank"
    provider: str
    model: str
    query_length: int
    document_count: int
    query: str | None = None
    documents: list[str] | None = None
    top_k: int | None = None
    request_params: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None
    billing: str | None = None


CallFacts = EmbedFacts | RerankFacts


@dataclass(slots=True)
class Figures:
    """What a response reported, each figure already judged by the figure rule."""

    usage: EmbeddingUsage | RerankUsage | None = None
    response_id: str | None = None
    response_model: str | None = None
    dimensions: int | None = None
    result_count: int | None = None
    results: list[ScoredDocument] | None = None


def given(value: object) -> bool:
    """Whether an SDK argument was set: not ``None`` and not an SDK's omitted-value marker."""
    if value is None or value is Ellipsis:
        return False
    return type(value).__name__ not in ("Omit", "NotGiven")


def passed(arguments: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The arguments among ``names`` that were set (see ``given``)."""
    found: dict[str, Any] = {}
    for name in names:
        value = arguments.get(name)
        if value is not None and given(value):
            found[name] = value
    return found


def text_or_none(value: object) -> str | None:
    """A non-empty text (a ``str`` subclass such as numpy's ``str_`` as a plain ``str``)."""
    if type(value) is str:
        return value or None
    return str(value) or None if isinstance(value, str) else None


def positive_int(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None


_TOKEN_IDS = {int}
_TEXTS = {str}


def input_texts(value: object) -> tuple[int, list[str] | None]:
    """How many inputs ``value`` holds, and the texts when every input is a string.

    A string is one input; a list of token ids is one input; a list of strings or of token
    lists is one input per entry. Anything else counts as zero inputs.
    """
    if type(value) is list:
        items: list[Any] = value
    elif isinstance(value, str):
        return 1, [str(value)]
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items = list(value)
    else:
        return 0, None
    kinds = set(map(type, items))  # one pass in C, whatever the size of the texts
    if kinds == _TOKEN_IDS:
        return 1, None
    if kinds <= _TEXTS:
        return len(items), items
    return len(items), None


def server_of(url: object) -> tuple[str | None, int | None]:
    """Host and port of a base URL (``str`` or an httpx-like URL); the scheme's default port
    when none is written. Unreadable URLs give ``(None, None)``."""
    try:
        parsed = httpx.URL(str(url))
    except Exception:
        return None, None
    host = parsed.host or None
    port = parsed.port
    if port is None:
        port = {"https": 443, "http": 80}.get(parsed.scheme)
    return host, port if host else None
