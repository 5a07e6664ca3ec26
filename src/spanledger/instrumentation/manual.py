"""Record any embedding or rerank call by hand: a block around the call, one event per block.

```python
with spanledger.record_embedding(provider="acme", model="m", inputs=texts) as call:
    response = my_client.embed(texts)
    call.succeeded(vectors=response.vectors, usage={"input_tokens": response.tokens})
```

The block is the call: its start notice goes out on entry, its one event when ``succeeded``
(or ``failed``) is called, or on exit. An exception leaving the block is recorded as the failure
(a ``ProviderError`` keeps its category, an HTTP status error is categorised by status, an
interrupt such as ``KeyboardInterrupt`` is ``interrupted``, anything else is
``provider_unavailable`` named by its class, never by its message) and propagates unchanged. A
block that ends with neither an outcome nor an exception is recorded as failed with
``error_type="no_outcome"`` and a warning: nothing was reported, and claiming a success would be
inventing one. Usage is read by the figure rule: ``{"input_tokens": 12}``, ``{"search_units":
1}``, ``EmbeddingUsage`` / ``RerankUsage`` or any object with those attributes; a malformed
figure is not reported. With ``raw=`` (the decoded body or its JSON text) and a known vendor as
``provider``, figures not passed explicitly are read from it by that vendor's rules. Works with
``with`` and ``async with``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence, Sized
from types import TracebackType
from typing import Any, Self

import httpx

from spanledger import figures
from spanledger._logs import get_logger
from spanledger.capture.failures import describe
from spanledger.errors import ErrorCategory, Fingerprint, ProviderError
from spanledger.events import EmbeddingUsage, RerankUsage, ScoredDocument, UsageFigure
from spanledger.recorder import Recorder, get_recorder
from spanledger.recording.call import Recording, logged
from spanledger.recording.facts import (
    CallFacts,
    Figures,
    embedding_facts,
    positive_int,
    rerank_facts,
    text_or_none,
)
from spanledger.recording.reported import answered_badly, reported
from spanledger.wire.endpoints import (
    Endpoint,
    Operation,
    Vendor,
    bedrock_model,
    endpoint_for,
    endpoint_named,
)
from spanledger.wire.http import parse_json
from spanledger.wire.read import malformed, rerank_usage

__all__ = ["EmbeddingRecord", "RerankRecord", "record_embedding", "record_rerank"]

_log = get_logger("spanledger.instrumentation")

_NO_OUTCOME = ProviderError(
    ErrorCategory.INVALID_RESPONSE,
    detail="the block ended without succeeded() or failed()",
    error_type="no_outcome",
)


class _Record:
    """One block: entered once, ended by exactly one outcome."""

    def __init__(
        self, facts: CallFacts, recorder: Recorder | None, endpoint: Endpoint | None = None
    ) -> None:
        self._facts = facts
        self._recorder = recorder
        self._endpoint = endpoint or endpoint_for(facts.provider, facts.operation, facts.model)
        self._recording: Recording | None = None
        self._entered = False
        self._ended = False

    def __enter__(self) -> Self:
        if self._entered:
            raise RuntimeError("a recorded call block can be entered only once")
        self._entered = True
        recorder = self._recorder if self._recorder is not None else get_recorder()
        if recorder.active:
            self._recording = Recording(recorder, self._facts)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ended:
            return
        self._ended = True
        if exc is not None:
            self._end_failed(exc)
            return
        with contextlib.suppress(Exception):
            _log.warning("recorded_call_without_outcome", operation=self._facts.operation)
        self._end(lambda recording: recording.failed(_NO_OUTCOME))

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def failed(
        self,
        error: BaseException | ErrorCategory | str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        body: bytes | str | None = None,
    ) -> None:
        """End the call as failed without raising: with the exception, or with a category
        (``"provider_rate_limit"``, ...) plus the HTTP status, ``Retry-After`` seconds and the
        error body, which is fingerprinted, never kept."""
        if isinstance(error, BaseException):
            self._claim_outcome()
            self._end_failed(error)
            return
        category = ErrorCategory(error)
        self._claim_outcome()
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        status = status_code if type(status_code) is int else None
        wait = retry_after if type(retry_after) in (int, float) else None
        problem = ProviderError(
            category,
            status_code=status,
            retry_after=float(wait) if wait is not None and 0 <= wait < math.inf else None,
            fingerprint=Fingerprint.of(raw) if raw is not None else None,
            error_type=f"http_{status}" if status is not None else category.value,
        )
        self._end(lambda recording: recording.failed(problem))

    def _claim_outcome(self) -> None:
        if not self._entered:
            raise RuntimeError("use the record as a `with` block before reporting its outcome")
        if self._ended:
            raise RuntimeError("this call's outcome was already reported")
        self._ended = True

    def _end_failed(self, exc: BaseException) -> None:
        self._end(lambda recording: recording.failed(describe(exc)))

    def _end_succeeded(self, reported: Callable[[], Figures]) -> None:
        """End as a success; figures that cannot be read are not reported (and logged)."""
        try:
            found = reported()
        except Exception as exc:
            logged(exc)
            found = Figures()
        self._end(lambda recording: recording.succeeded(found))

    def _end(self, finish: Callable[[Recording], None]) -> None:
        recording = self._recording
        if recording is None:
            return
        try:
            finish(recording)
        except Exception as exc:
            logged(exc)

    def _raw_figures(
        self, raw: object, headers: Mapping[str, str] | None = None
    ) -> Figures | ProviderError:
        """Figures read from ``raw`` (and the response ``headers``, where the vendor sends a
        figure in one) by the vendor endpoint's rules (nothing for an unknown vendor), or the
        error a body the endpoint does not answer stands for."""
        facts = self._facts
        endpoint = self._endpoint
        if raw is None or endpoint is None:
            return Figures()
        text = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
        body = bytes(text) if isinstance(text, bytes | bytearray) else None
        try:
            payload = parse_json(body) if body is not None else raw
            return reported(endpoint, payload, facts, _header_map(headers))
        except ProviderError as error:
            return answered_badly(error, None, body)
        except Exception as exc:
            logged(exc)
            return Figures()


class EmbeddingRecord(_Record):
    """The handle of a ``record_embedding`` block."""

    def succeeded(
        self,
        *,
        vectors: Sequence[Sequence[float]] | None = None,
        usage: object = None,
        response_id: object = None,
        raw: object = None,
        response_model: object = None,
        dimensions: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """End the call as a success. ``vectors`` only give the width (never recorded);
        ``dimensions`` says it directly. ``headers``: the response's, for a vendor that sends
        its figure in one (Cohere on Bedrock)."""
        self._claim_outcome()
        found = self._raw_figures(raw, headers)
        if isinstance(found, ProviderError):
            problem = found  # the body is the 2xx answer the provider gave
            self._end(lambda recording: recording.failed(problem, answered=True))
            return

        def given_figures() -> Figures:
            return Figures(
                usage=_embedding_usage(usage) if usage is not None else found.usage,
                response_id=figures.response_id(response_id)
                if response_id is not None
                else found.response_id,
                response_model=figures.response_model(text_or_none(response_model))
                if response_model is not None
                else found.response_model,
                dimensions=positive_int(dimensions) or _width(vectors) or found.dimensions,
                malformed_usage=_malformed(usage, rerank=False)
                if usage is not None
                else found.malformed_usage,
            )

        self._end_succeeded(given_figures)


class RerankRecord(_Record):
    """The handle of a ``record_rerank`` block."""

    def succeeded(
        self,
        *,
        results: Sequence[Any] | None = None,
        usage: object = None,
        response_id: object = None,
        raw: object = None,
        response_model: object = None,
        result_count: int | None = None,
    ) -> None:
        """End the call as a success. ``results`` are counted (and kept for exporters that opted
        in to payload); without them, ``result_count`` or ``raw`` (of a known vendor) must say
        how many came back. A ``raw`` body that does not hold the vendor's results ends the
        call as ``provider_invalid_response`` instead, without raising."""
        count = _count(results)
        if count is None:
            count = result_count if type(result_count) is int and result_count >= 0 else None
        known = self._endpoint is not None
        if count is None and (raw is None or not known):
            raise TypeError(
                "succeeded() needs results, result_count or a known vendor's raw body to count"
            )
        self._claim_outcome()
        found = self._raw_figures(raw)
        if isinstance(found, ProviderError):
            problem = found  # the body is the 2xx answer the provider gave
            self._end(lambda recording: recording.failed(problem, answered=True))
            return
        if count is None:
            count = found.result_count

        def given_figures() -> Figures:
            return Figures(
                usage=_rerank_usage(usage) if usage is not None else found.usage,
                response_id=figures.response_id(response_id)
                if response_id is not None
                else found.response_id,
                response_model=figures.response_model(text_or_none(response_model))
                if response_model is not None
                else found.response_model,
                result_count=count,
                results=_scored(results),
                malformed_usage=_malformed(usage, rerank=True)
                if usage is not None
                else found.malformed_usage,
            )

        self._end_succeeded(given_figures)


def record_embedding(
    *,
    provider: str,
    model: str,
    inputs: str | Sequence[str],
    input_type: str | None = None,
    dimensions: int | None = None,
    server_address: str | None = None,
    server_port: int | None = None,
    extras: Mapping[str, Any] | None = None,
    recorder: Recorder | None = None,
    endpoint: str | None = None,
) -> EmbeddingRecord:
    """A block recording one embedding call (``recorder``: the current one when ``None``).
    ``endpoint``: the declaration a ``raw`` body answers, by name (``ollama-legacy-embeddings``),
    where the vendor has several; by default the one its model names, else the vendor's own."""
    provider, model = _checked_identity(provider, model)
    declared = _declared(endpoint, provider, "embeddings")
    facts = embedding_facts(
        provider=provider,
        model=model,
        inputs=inputs,
        input_type=input_type,
        dimensions=dimensions,
        extras=extras,
        server_address=text_or_none(server_address),
        server_port=positive_int(server_port),
        billing=_billing(declared, provider, "embeddings", model),
    )
    return EmbeddingRecord(facts, recorder, declared)


def record_rerank(
    *,
    provider: str,
    model: str,
    query: str,
    documents: Sequence[str],
    top_k: int | None = None,
    return_documents: bool | None = None,
    server_address: str | None = None,
    server_port: int | None = None,
    extras: Mapping[str, Any] | None = None,
    recorder: Recorder | None = None,
    document_ids: Sequence[str] | None = None,
    endpoint: str | None = None,
) -> RerankRecord:
    """A block recording one rerank call (``recorder``: the current one when ``None``).
    ``document_ids``: the id the request gave each document, for a vendor whose results name
    documents by id (Vertex AI's ranking API); ``endpoint`` as for ``record_embedding``."""
    provider, model = _checked_identity(provider, model)
    declared = _declared(endpoint, provider, "rerank")
    facts = rerank_facts(
        provider=provider,
        model=model,
        query=query,
        documents=documents,
        top_k=top_k,
        return_documents=return_documents,
        extras=extras,
        server_address=text_or_none(server_address),
        server_port=positive_int(server_port),
        billing=_billing(declared, provider, "rerank", model),
    )
    if document_ids is not None:
        facts.document_ids = list(document_ids)
    return RerankRecord(facts, recorder, declared)


def _header_map(headers: object) -> Mapping[str, str] | None:
    """Response headers looked up by lower-case name, whatever mapping the caller had."""
    if headers is None:
        return None
    try:
        return httpx.Headers(headers)  # type: ignore[arg-type]
    except Exception:
        return None


def _declared(name: object, provider: str, operation: Operation) -> Endpoint | None:
    """The declaration the caller named, checked to be the provider's, of this operation."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError("endpoint must be a declared endpoint's name")
    endpoint = endpoint_named(name)
    if endpoint.provider != provider or endpoint.operation != operation:
        raise ValueError(
            f"endpoint {name!r} is {endpoint.provider}'s {endpoint.operation}, "
            f"not {provider}'s {operation}"
        )
    return endpoint


def _billing(
    declared: Endpoint | None, provider: str, operation: Operation, model: str
) -> str | None:
    endpoint = declared or endpoint_for(provider, operation, model)
    return endpoint.billing if endpoint is not None else None


def _checked_identity(provider: object, model: object) -> tuple[str, str]:
    for name, value in (("provider", provider), ("model", model)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string")
        if not value:
            raise ValueError(f"{name} must not be empty")
    if provider == Vendor.BEDROCK:
        return str(provider), bedrock_model(str(model))  # as every path names Bedrock models
    return str(provider), str(model)


def _field(value: object, name: str) -> object:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _embedding_usage(value: object) -> EmbeddingUsage | None:
    if isinstance(value, EmbeddingUsage):
        return value
    tokens = figures.count(_field(value, "input_tokens"))
    return EmbeddingUsage(input_tokens=tokens) if tokens is not None else None


def _rerank_usage(value: object) -> RerankUsage | None:
    if isinstance(value, RerankUsage):
        return value
    return rerank_usage(_field(value, "search_units"), _field(value, "input_tokens"))


def _malformed(value: object, *, rerank: bool) -> tuple[UsageFigure, ...]:
    """The figures of a caller-given usage that are there but are not counts (search units
    only for a rerank)."""
    if isinstance(value, EmbeddingUsage | RerankUsage):
        return ()
    units = _field(value, "search_units") if rerank else None
    return malformed(_field(value, "input_tokens"), units)


def _width(vectors: object) -> int | None:
    if not isinstance(vectors, Sequence) or isinstance(vectors, str | bytes) or not vectors:
        return None
    first = vectors[0]
    if isinstance(first, Sized) and not isinstance(first, str | bytes):
        return len(first) or None
    return None


def _count(results: object) -> int | None:
    if isinstance(results, Sized) and not isinstance(results, str | bytes | Mapping):
        return len(results)
    return None


def _scored(results: object) -> list[ScoredDocument] | None:
    """The results as ``ScoredDocument``s for opted-in exporters, or ``None`` if any is
    unreadable (they are the caller's; recording never judges them)."""
    if not isinstance(results, Sequence) or isinstance(results, str | bytes):
        return None
    scored: list[ScoredDocument] = []
    try:
        for item in results:
            if isinstance(item, ScoredDocument):
                scored.append(item)
                continue
            document = _field(item, "document")
            scored.append(
                ScoredDocument(
                    index=_field(item, "index"),
                    relevance_score=_field(item, "relevance_score"),
                    document=document if type(document) is str else None,
                )
            )
    except Exception:
        return None
    return scored
