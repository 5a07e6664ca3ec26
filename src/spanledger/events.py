"""Typed records: usage, responses, and the four call events.

Every record is a frozen pydantic model that round-trips through JSON. Usage is a record or
``None``; a record never holds a figure the provider did not report. Payload fields (input texts,
the query, documents, results, extras) ride on events only for exporters that opted in to them:
they are excluded from every default serialization and from ``repr``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator, Sequence, Sized
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    model_validator,
)

from spanledger.costs import Amount, CostLine
from spanledger.errors import ErrorCategory, Fingerprint
from spanledger.figures import MAX_COUNT

__all__ = [
    "PAYLOAD_FIELDS",
    "AttributionRecord",
    "CallStarted",
    "EmbeddingEvent",
    "EmbeddingFailedEvent",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "Event",
    "FailedEvent",
    "RerankEvent",
    "RerankFailedEvent",
    "RerankResponse",
    "RerankUsage",
    "ScoredDocument",
    "SuccessEvent",
    "UsageFigure",
    "UsageSource",
    "builder_of",
    "new_call_id",
    "trusted_builder_of",
]

Count = Annotated[int, Field(ge=0, le=MAX_COUNT, strict=True)]
"""A non-negative integer figure within the signed 64-bit range; bools and floats are refused."""

_NUMBER_TYPES = frozenset({float, int})


def _check_vectors(value: object) -> list[list[float]]:
    """Accept a list of number lists as is: no per-float copy of a large response."""
    if type(value) is not list:
        raise ValueError("vectors must be a list of lists of numbers")
    for vector in value:
        if type(vector) is not list or not {*map(type, vector)} <= _NUMBER_TYPES:
            raise ValueError("every vector must be a list of numbers")
    return value


Vectors = Annotated[list[list[float]], PlainValidator(_check_vectors)]


def _shallow_texts(value: object) -> list[str] | None:
    """A payload list of texts, copied but not checked item by item.

    Every producer already holds texts (a provider checks its inputs before sending; the
    instrumentation keeps them only when all are strings), so checking each item again would
    make every event cost more with the size of the call, even when no exporter reads them.
    The copy (references only) keeps the event as it was if the caller reuses its list.
    """
    if value is None:
        return None
    if type(value) is list or isinstance(value, tuple):
        return list(value)
    raise ValueError("expected a list of texts")


PayloadTexts = Annotated[
    list[str] | None, PlainValidator(_shallow_texts, json_schema_input_type=list[str] | None)
]


def _finite_score(value: float) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("relevance_score must be finite")
    return value


Score = Annotated[float, Field(strict=True), AfterValidator(_finite_score)]

UsageFigure = Literal["input_tokens", "search_units", "billable_characters"]
"""A usage figure a provider reports."""
UsageSource = Literal["provider", "tokenizer"]
"""Who counted a call's usage figures."""


def _empty(value: Sized) -> bool:
    """Whether an optional collection holds nothing (then it is not written)."""
    return not value


def _unset(value: object) -> bool:
    """Whether an optional value is absent (then it is not written)."""
    return value is None


def _malformed_usage() -> Any:
    """The usage figures a provider sent that were not counts (``"abc"``, ``-1``, ``6.0``):
    left out of ``usage`` by the figure rule, and named here so that garbage from a provider
    can be told from a figure it never sent. Written only when there are some."""
    return Field(default=(), exclude_if=_empty)


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EmbeddingUsage(_Record):
    """What the provider reported billing an embedding call by; each figure is judged on its
    own.

    Most vendors report input tokens; Vertex AI's ``:predict`` also reports the input
    characters it bills per 1,000 (``text-embedding-005`` and kin are priced so). A record with
    neither figure cannot exist: when nothing was reported the usage is ``None`` as a whole.
    """

    input_tokens: Count | None = None
    billable_characters: Count | None = Field(default=None, exclude_if=_unset)
    """The characters the provider bills (Vertex AI's ``metadata.billableCharacterCount``);
    written only when reported, so logs without it read as not reported."""

    @model_validator(mode="after")
    def _some_figure(self) -> EmbeddingUsage:
        if self.input_tokens is None and self.billable_characters is None:
            raise ValueError("EmbeddingUsage needs at least one reported figure; use None instead")
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """The figures for ``repr`` and ``str``: billable characters only when reported, as
        they are written."""
        for name, value in super().__repr_args__():
            if name != "billable_characters" or value is not None:
                yield name, value


class RerankUsage(_Record):
    """What the provider billed for a rerank call; each figure is judged on its own.

    Cohere bills search units, Jina and Voyage input tokens. A record with neither figure cannot
    exist: when nothing was reported the usage is ``None`` as a whole.
    """

    search_units: Count | None = None
    input_tokens: Count | None = None

    @model_validator(mode="after")
    def _some_figure(self) -> RerankUsage:
        if self.search_units is None and self.input_tokens is None:
            raise ValueError("RerankUsage needs at least one reported figure; use None instead")
        return self


class EmbeddingResponse(_Record):
    """Vectors in input order, with what the provider reported about them."""

    vectors: Vectors = Field(repr=False)
    dimensions: int = Field(ge=1, strict=True)
    model: str
    usage: EmbeddingUsage | None = None
    response_id: str | None = None
    raw: Any = Field(repr=False)
    malformed_usage: tuple[UsageFigure, ...] = _malformed_usage()

    @model_validator(mode="after")
    def _dimensions_match(self) -> EmbeddingResponse:
        if not self.vectors:
            raise ValueError("an embedding response has at least one vector")
        width = self.dimensions
        for vector in self.vectors:
            if len(vector) != width:
                raise ValueError("every vector must have exactly `dimensions` values")
        return self


class ScoredDocument(_Record):
    """One rerank result: ``index`` points into the caller's original document list."""

    index: Count
    relevance_score: Score
    document: str | None = Field(default=None, repr=False)


class RerankResponse(_Record):
    """Rerank results sorted by relevance, highest first."""

    results: list[ScoredDocument] = Field(repr=False)
    model: str
    usage: RerankUsage | None = None
    response_id: str | None = None
    raw: Any = Field(repr=False)
    malformed_usage: tuple[UsageFigure, ...] = _malformed_usage()

    @model_validator(mode="after")
    def _sorted_unique(self) -> RerankResponse:
        seen: set[int] = set()
        previous = float("inf")
        for result in self.results:
            if result.index in seen:
                raise ValueError("rerank results must not repeat an index")
            seen.add(result.index)
            if result.relevance_score > previous:
                raise ValueError("rerank results must be sorted by relevance_score, descending")
            previous = result.relevance_score
        return self


# Seeded from the OS; private, so the application's own seeding never touches it. Call ids
# only need to be unique, not unguessable.
_ids = random.Random()  # noqa: S311
os.register_at_fork(after_in_child=_ids.seed)


def new_call_id() -> str:
    """A fresh call id: 128 random bits as 32 hex digits.

    Drawn from a private generator seeded by the OS and reseeded in forked children:
    ``os.urandom`` is a system call that also releases the GIL on every call, and the shared
    ``random`` generator would repeat ids whenever the application seeds it.
    """
    return f"{_ids.getrandbits(128):032x}"


M = TypeVar("M", bound=BaseModel)


def builder_of(model: type[M]) -> Callable[[dict[str, Any]], M]:
    """Build ``model`` from a dict of its fields: the same validation as ``model(**fields)``
    without the keyword-argument wrapper, which costs about as much again on a hot path."""
    validate: Callable[[dict[str, Any]], M] = model.__pydantic_validator__.validate_python
    return validate


_UNSET: Any = object()


def trusted_builder_of(model: type[M]) -> Callable[[dict[str, Any]], M]:
    """Build ``model`` from fields its producer already guarantees, without validating them.

    For the recording core only, whose every field is read by the figure rule or made by
    spanledger itself: it costs a dict copy instead of a validation pass on every call.
    Fields are kept in declaration order (what serialization follows); a default is shared,
    never mutated (every default of an event is immutable or a container no one writes to).
    Everything read from outside (``read_events``, user-built records) is still validated.
    """
    template: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        template[name] = (
            _UNSET if info.is_required() else info.get_default(call_default_factory=True)
        )
    new = object.__new__
    set_attribute = object.__setattr__

    def build(fields: dict[str, Any]) -> M:
        values = template.copy()
        values.update(fields)
        instance = new(model)
        set_attribute(instance, "__dict__", values)
        set_attribute(instance, "__pydantic_fields_set__", set(fields))
        set_attribute(instance, "__pydantic_extra__", None)
        set_attribute(instance, "__pydantic_private__", None)
        return instance

    return build


class CallStarted(_Record):
    """Notice that a call has begun, for sinks that render the call while it runs (spans)."""

    call_id: str = Field(min_length=1)
    operation: Literal["embeddings", "rerank"]
    provider: str
    model: str
    request_id: str | None = None
    started_at: datetime
    server_address: str | None = None
    server_port: int | None = None


def _payload(default: Any = None) -> Any:
    """A field that only opted-in exporters read: never serialized, never in ``repr``."""
    return Field(default=default, exclude=True, repr=False)


class _CallEvent(_Record):
    call_id: str = Field(min_length=1)
    request_id: str | None = None
    provider: str
    model: str
    billing: str | None = Field(default=None, exclude_if=_unset)
    """What the endpoint bills by, as its wire declaration says: ``tokens`` or
    ``search_units`` it reports, ``queries`` (search units by the vendor's documented rule, one
    per query of up to 100 documents, while the API reports no usage) or ``local`` (nobody
    bills). ``None`` when the endpoint is not declared (and in logs written before it was
    recorded); written only when set."""
    started_at: datetime
    latency_ms: float = Field(ge=0, allow_inf_nan=False)
    request_params: dict[str, Any] = Field(default_factory=dict)
    server_address: str | None = None
    server_port: int | None = None
    cost: CostLine | None = None
    request_extras: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)
    logical_call_id: str | None = None
    """The id every attempt of one logical call shares (an SDK retrying after a 429, say): the
    first attempt's ``call_id``. ``None`` for a call made in a single attempt."""
    attempt: int = Field(default=1, ge=1)
    """This attempt's number within its logical call, from 1."""
    retried: bool = False
    """Whether another attempt of the same logical call followed this one."""


class _Succeeded(_CallEvent):
    response_model: str | None = None
    response_id: str | None = None
    usage_source: UsageSource | None = Field(default=None, exclude_if=_unset)
    """Who counted ``usage``: ``tokenizer`` when spanledger counted the tokens an in-process
    model saw with the model's own tokenizer (nobody bills them); ``provider`` when a provider
    reported it. ``None`` (not written) on paths that do not say."""


class _Failed(_CallEvent):
    error_category: ErrorCategory
    error_type: str | None = None
    error_message: str = ""
    status_code: int | None = None
    retry_after: float | None = Field(default=None, allow_inf_nan=False)
    fingerprint: Fingerprint | None = None


class _EmbeddingCall(_CallEvent):
    input_count: Count
    input_type: str | None = None
    inputs: PayloadTexts = _payload()


class _RerankCall(_CallEvent):
    query_length: Count
    document_count: Count
    top_k: int | None = Field(default=None, ge=1)
    query: str | None = _payload()
    documents: PayloadTexts = _payload()


class EmbeddingEvent(_EmbeddingCall, _Succeeded):
    """A finished embedding call."""

    kind: Literal["embedding"] = "embedding"
    usage: EmbeddingUsage | None = None
    dimensions: int | None = None
    malformed_usage: tuple[UsageFigure, ...] = _malformed_usage()


class EmbeddingFailedEvent(_EmbeddingCall, _Failed):
    """An embedding call that raised a ``ProviderError``.

    ``estimated_usage`` is set only for a call abandoned after sending (a timeout, say), which
    the provider may have billed; it is an estimate, never a reported figure.
    """

    kind: Literal["embedding_failed"] = "embedding_failed"
    estimated_usage: EmbeddingUsage | None = None


class RerankEvent(_RerankCall, _Succeeded):
    """A finished rerank call."""

    kind: Literal["rerank"] = "rerank"
    usage: RerankUsage | None = None
    result_count: Count
    results: list[ScoredDocument] | None = _payload()
    malformed_usage: tuple[UsageFigure, ...] = _malformed_usage()


class RerankFailedEvent(_RerankCall, _Failed):
    """A rerank call that raised a ``ProviderError`` (``estimated_usage`` as for embeddings)."""

    kind: Literal["rerank_failed"] = "rerank_failed"
    estimated_usage: RerankUsage | None = None


SuccessEvent = EmbeddingEvent | RerankEvent
FailedEvent = EmbeddingFailedEvent | RerankFailedEvent
Event = Annotated[
    EmbeddingEvent | EmbeddingFailedEvent | RerankEvent | RerankFailedEvent,
    Field(discriminator="kind"),
]
"""Any one call attempt's event: a success or a failure, of an embedding or a rerank call.

Pydantic tells the four apart by ``kind``, so a list of them reads back from the event log as
the right classes."""

PAYLOAD_FIELDS: Sequence[str] = (
    "inputs",
    "query",
    "documents",
    "results",
    "request_extras",
)
"""Event fields that carry caller content; exporters render them only when opted in."""


class AttributionRecord(_Record):
    """One request's attribution summary: what its retrieval cost and how much of the context
    it paid for was cited. Written to the event log and rendered by exporters."""

    kind: Literal["attribution"] = "attribution"
    request_id: str
    at: datetime
    frames_served: Count
    frames_rendered: Count
    frames_cited: Count
    rendered_tokens: Count
    cited_tokens: Count
    uncited_rendered_tokens: Count
    cited_token_share: float | None = Field(default=None, allow_inf_nan=False)
    reconcilable: bool
    problems: list[str] = Field(default_factory=list)
    calls: Count
    billed_input_tokens: Count
    billed_search_units: Count
    billed_characters: Count | None = Field(default=None, exclude_if=_unset)
    """The billable characters the request's calls reported (Vertex AI's ``:predict``):
    ``None`` when none reported any, and in records written before it was recorded."""
    calls_without_usage: Count
    spend: Amount | None = None
    currency: str | None = None
    spend_complete: bool
    unknown_spend: str | None = None
    spend_per_cited_token: Amount | None = None
    calls_by_status: dict[str, Count] = Field(default_factory=dict, exclude_if=_empty)
    """The request's calls per cost status (``no_price_table`` when nothing priced them)."""
    spend_by_status: dict[str, Amount] = Field(default_factory=dict, exclude_if=_empty)
    """The known amount per cost status (priced, estimated, not billed), in ``currency``; a
    status whose calls mix currencies is left out."""
    chains_by_status: dict[str, Count] = Field(default_factory=dict, exclude_if=_empty)
    """The request's rerank chains per outcome status (``ok``, ``degraded``, ``aborted``...)."""
    model_calls: Count | None = Field(default=None, exclude_if=_unset)
    """The model calls whose prompts were matched against the request's frames (``None`` in
    records written before it was recorded)."""
    quoted_tokens: Count | None = Field(default=None, exclude_if=_unset)
    """Accounting tokens of answer text copied verbatim from rendered frames."""
    cited_by: dict[str, Count] = Field(default_factory=dict, exclude_if=_empty)
    """Frames cited per evidence that made them so (``provider_citation``,
    ``framework_marking``, ``prompt_label``, ``by_hand``)."""
    context_spend: Amount | None = Field(default=None, ge=0, exclude_if=_unset)
    """What the rendered context cost as the model calls' input tokens, in
    ``context_currency``; ``None`` when unknown (``unknown_context_spend`` says why) and in
    records written before it was recorded."""
    cited_context_spend: Amount | None = Field(default=None, ge=0, exclude_if=_unset)
    """The cited frames' part of ``context_spend``."""
    unused_context_spend: Amount | None = Field(default=None, ge=0, exclude_if=_unset)
    """The rest: the spend on rendered context the answer did not cite."""
    context_currency: str | None = Field(default=None, exclude_if=_unset)
    unknown_context_spend: str | None = Field(default=None, exclude_if=_unset)
    """Why the context's spend is unknown (counts and model names, never text)."""
    capture_cut: dict[str, Count] = Field(default_factory=dict, exclude_if=_empty)
    """What the capture's caps cut, by what (``frames``, ``prompt_chars``, ``answer_chars``,
    ``calls``)."""
