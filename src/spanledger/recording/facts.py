"""What a call asked for and what its response reported, in the shape events need.

Facts are gathered from loosely typed arguments (an SDK's keyword arguments, a request body, a
manual call, a provider's call) without ever raising: a value that does not fit is left out,
not repaired. Reading them takes the same time whatever the number of inputs: the inputs are
kept by reference and only judged where they are used (an estimate, an opted-in payload).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from spanledger.estimates import utf8_bytes as utf8_length
from spanledger.events import (
    EmbeddingUsage,
    RerankUsage,
    ScoredDocument,
    UsageFigure,
    UsageSource,
)
from spanledger.wire.endpoints import Endpoint
from spanledger.wire.http import server_of
from spanledger.wire.request import read_request

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CallFacts",
    "EmbedFacts",
    "Figures",
    "RerankFacts",
    "embedding_facts",
    "given",
    "input_texts",
    "passed",
    "positive_int",
    "request_facts",
    "rerank_facts",
    "server_of",
    "text_or_none",
    "texts_only",
    "utf8_length",
]


@dataclass(slots=True)
class EmbedFacts:
    """An embedding call as the caller made it. ``inputs``: the caller's list when it holds
    texts (judged by its first entry only; ``texts_only`` judges them all, where it matters)."""

    operation: ClassVar[Literal["embeddings"]] = "embeddings"
    provider: str
    model: str
    input_count: int
    inputs: list[Any] | None = None
    input_type: str | None = None
    request_params: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None
    billing: str | None = None
    dtype: str | None = None
    """The vector type the request asked for (``None``: the vendor's float default)."""


@dataclass(slots=True)
class RerankFacts:
    """A rerank call as the caller made it. ``query_length`` is in UTF-8 bytes."""

    operation: ClassVar[Literal["rerank"]] = "rerank"
    provider: str
    model: str
    query_length: int
    document_count: int
    query: str | None = None
    documents: list[Any] | None = None
    top_k: int | None = None
    request_params: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None
    billing: str | None = None
    document_ids: list[object] | None = None
    """The id the request gave each document, where results name documents by id."""


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
    malformed_usage: tuple[UsageFigure, ...] = ()
    usage_source: UsageSource | None = None
    """Who counted ``usage`` (``tokenizer``: an in-process model's own tokenizer)."""
    positions: tuple[int, ...] | None = None
    """The positions in the request's documents of the results the caller keeps, where a
    request's context needs them and ``results`` are not built; never on the event."""


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


def input_texts(value: object) -> tuple[int, list[Any] | None]:
    """How many inputs ``value`` holds, and the list holding them when it may be texts.

    A string is one input; a list whose first entry is a token id is one input (token ids);
    any other list or sequence is one input per entry. Anything else counts as zero inputs.
    Only the first entry is looked at: whether every entry is text is asked where it matters
    (``texts_only``), so recording costs the same for 1 input and for 2,048.
    """
    if type(value) is list:
        items: list[Any] = value
    elif isinstance(value, str):
        return 1, [str(value)]
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items = list(value)
    else:
        return 0, None
    if not items:
        return 0, items
    first = type(items[0])
    if first is int:
        return 1, None
    return len(items), items if first is str else None


def texts_only(items: list[Any] | None) -> list[str] | None:
    """``items`` when every entry is text (an estimate needs them), else ``None``."""
    if items is None or not {*map(type, items)} <= {str}:
        return None
    return items


def embedding_facts(
    *,
    provider: str,
    model: str,
    inputs: object,
    input_type: object,
    dimensions: object,
    extras: object,
    server_address: str | None,
    server_port: int | None,
    billing: str | None,
) -> EmbedFacts:
    """An embedding call's facts from arguments as a caller gave them (our providers' and the
    manual block's): what does not fit is left out."""
    count, texts = input_texts(inputs)
    kind = text_or_none(input_type)
    params: dict[str, Any] = {"input_type": kind} if kind else {}
    if positive_int(dimensions) is not None:
        params["dimensions"] = dimensions
    return EmbedFacts(
        provider=provider,
        model=model,
        input_count=count,
        inputs=texts,
        input_type=kind,
        request_params=params,
        extras=dict(extras) if isinstance(extras, Mapping) else {},
        server_address=server_address,
        server_port=server_port,
        billing=billing,
    )


def rerank_facts(
    *,
    provider: str,
    model: str,
    query: object,
    documents: object,
    top_k: object,
    return_documents: object,
    extras: object,
    server_address: str | None,
    server_port: int | None,
    billing: str | None,
) -> RerankFacts:
    """A rerank call's facts from arguments as a caller gave them."""
    count, texts = input_texts(documents)
    text = str(query) if isinstance(query, str) else None
    return RerankFacts(
        provider=provider,
        model=model,
        query_length=utf8_length(text) if text is not None else 0,
        document_count=count,
        query=text,
        documents=texts,
        top_k=positive_int(top_k),
        request_params={"return_documents": return_documents}
        if type(return_documents) is bool
        else {},
        extras=dict(extras) if isinstance(extras, Mapping) else {},
        server_address=server_address,
        server_port=server_port,
        billing=billing,
    )


def request_facts(endpoint: Endpoint, body: dict[str, Any], url: httpx.URL) -> CallFacts:
    """A recognised request's facts: its JSON ``body`` sent to ``url``, read by ``endpoint``'s
    declaration (the model from the route where the route names it), judged as every path
    judges a caller's arguments."""
    sent = read_request(endpoint, body, url)
    model = sent.model or "unknown"
    count, texts = input_texts(sent.items)
    if endpoint.operation == "embeddings":
        input_type = text_or_none(sent.input_type)
        params: dict[str, Any] = {"input_type": input_type} if input_type else {}
        if given(sent.dimensions):
            params["dimensions"] = sent.dimensions
        return EmbedFacts(
            provider=endpoint.provider,
            model=model,
            input_count=count,
            inputs=texts,
            input_type=input_type,
            request_params=params,
            extras=sent.extras,
            server_address=sent.server_address,
            server_port=sent.server_port,
            billing=endpoint.billing,
            dtype=sent.vector_type,
        )
    query = sent.query if type(sent.query) is str else None
    returns = sent.returns_documents
    return RerankFacts(
        provider=endpoint.provider,
        model=model,
        query_length=utf8_length(query) if query is not None else 0,
        document_count=count,
        query=query,
        documents=texts,
        top_k=positive_int(sent.top_k),
        request_params={"return_documents": returns} if type(returns) is bool else {},
        extras=sent.extras,
        server_address=sent.server_address,
        server_port=sent.server_port,
        billing=endpoint.billing,
        document_ids=sent.document_ids,
    )
