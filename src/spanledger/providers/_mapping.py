"""The sans-I/O core: a vendor mapping turns a call into requests and responses into results.

A mapping never performs I/O. ``embedding_flow`` and ``rerank_flow`` are generators that yield
each ``httpx.Request`` and receive its ``httpx.Response``; the sync and async drivers only move
bytes. Chunk and stitch lives here, once, for every vendor.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable
from typing import Any, get_args

import httpx

from spanledger import figures
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.events import (
    EmbeddingResponse,
    EmbeddingUsage,
    RerankResponse,
    RerankUsage,
    ScoredDocument,
    UsageFigure,
    trusted_builder_of,
)
from spanledger.providers._calls import EmbedCall, RerankCall
from spanledger.wire.decode import invalid_response
from spanledger.wire.endpoints import Endpoint
from spanledger.wire.http import encode_body, failure_for, join_route, parse_json, server_of
from spanledger.wire.read import EmbeddingPart, RerankPart, read_embeddings, read_rerank

__all__ = [
    "EmbeddingMapping",
    "RerankMapping",
    "apply_prefix",
    "embedding_flow",
    "rerank_flow",
]

# every part was read and checked by its endpoint's rules: responses are built without a
# second validation pass
_embedding_usage = trusted_builder_of(EmbeddingUsage)
_rerank_usage = trusted_builder_of(RerankUsage)
_scored = trusted_builder_of(ScoredDocument)
_embedding_response = trusted_builder_of(EmbeddingResponse)
_rerank_response = trusted_builder_of(RerankResponse)


def apply_prefix(
    inputs: list[str], input_type: str | None, query_prefix: str | None, document_prefix: str | None
) -> list[str]:
    """Prepend the client-side prefix bound for ``input_type``, if any."""
    prefix = {"query": query_prefix, "document": document_prefix}.get(input_type or "")
    if not prefix:
        return inputs
    return [prefix + text for text in inputs]


class _Mapping(ABC):
    """Endpoint, auth and status handling shared by every vendor mapping; what the wire means
    is the endpoint's declaration (the class's, or one a mode of the vendor's picks before
    ``__init__`` runs)."""

    endpoint: Endpoint

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        chunk_size: int | None,
    ) -> None:
        if type(model) is not str or not model:
            raise ValueError("model must be a non-empty string")
        endpoint = self.endpoint
        self.provider: str = endpoint.provider
        self.billing = endpoint.billing
        origin = base_url if base_url is not None else endpoint.default_base_url
        if not origin:
            raise ValueError(f"{type(self).__name__} needs a base_url")
        if chunk_size is not None and (type(chunk_size) is not int or chunk_size <= 0):
            raise ValueError("chunk_size must be a positive integer")
        self.model = model
        route = endpoint.route
        if endpoint.route_pattern is not None:
            route = endpoint.route_with(**self.route_values())
        self.url = join_route(origin, route)
        query = self.query()
        if query:
            self.url = str(httpx.URL(self.url, params=query))
        parsed = self._parsed_url = httpx.URL(self.url)
        self.server_address, self.server_port = server_of(parsed)
        self.chunk_size = chunk_size if chunk_size is not None else self.default_chunk_size()
        key = api_key
        if key is None and endpoint.api_key_env:
            key = os.environ.get(endpoint.api_key_env) or None
        self._headers = {"content-type": "application/json", "accept": "application/json"}
        if key:
            self._headers[endpoint.key_header] = endpoint.key_scheme + key
        self._key_needed = (
            endpoint.api_key_env if not key and endpoint.serves_host(parsed.host) else None
        )
        """The variable to name when a call to the vendor's own API has no key (a proxy, a
        gateway or a stand-in may need none)."""

    def route_values(self) -> dict[str, str]:
        """The values of a templated route's placeholders (the model, where it names one)."""
        return {"model": self.model}

    def query(self) -> dict[str, str]:
        """Query parameters every request carries (Azure's ``api-version``)."""
        return {}

    def default_chunk_size(self) -> int | None:
        """How many inputs one request carries when the caller does not say."""
        return self.endpoint.default_chunk_size

    @property
    def key_needed(self) -> str | None:
        """The variable naming the key a call to the vendor's own API lacks, if it lacks one."""
        return self._key_needed

    def require_key(self) -> None:
        """Refuse, before anything is sent, a call to the vendor's own API with no key."""
        if self._key_needed is not None:
            raise ProviderError(
                ErrorCategory.AUTHENTICATION,
                detail=f"no API key: pass api_key=... or set {self._key_needed}",
                error_type="missing_api_key",
            )

    def headers_with(self, defaults: httpx.Headers) -> dict[str, str]:
        """This mapping's headers over a client's default headers (user agent, ...)."""
        merged = dict(defaults.multi_items())
        merged.update(self._headers)
        return merged

    def request(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Request:
        return httpx.Request(
            "POST",
            self._parsed_url,
            headers=headers if headers is not None else self._headers,
            content=encode_body(body),
        )

    def read(self, response: httpx.Response) -> Any:
        """The decoded success body, or the categorised error for a failed status."""
        if not 200 <= response.status_code < 300:
            raise failure_for(
                self.endpoint, response.status_code, response.headers, response.content
            )
        return parse_json(response.content)

    def chunks(self, items: list[str]) -> list[list[str]]:
        """Consecutive slices of at most ``chunk_size`` items, in order."""
        size = self.chunk_size
        if size is None or len(items) <= size:
            return [items]
        return [items[start : start + size] for start in range(0, len(items), size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, url={self.url!r})"


class EmbeddingMapping(_Mapping):
    """A vendor's embedding endpoint."""

    def check(self, call: EmbedCall) -> None:
        """Vendor pre-send validation; raise ``invalid_request`` to refuse the call."""

    def wire_inputs(self, call: EmbedCall) -> list[str]:
        """The texts as sent (a mapping may prefix them for ``input_type``)."""
        return call.inputs

    @abstractmethod
    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        """The JSON body for one request carrying ``inputs``."""

    def parse(
        self, payload: Any, expected: int, headers: httpx.Headers | None = None
    ) -> EmbeddingPart:
        """Read one decoded success body holding ``expected`` float vectors."""
        return read_embeddings(self.endpoint, payload, expected, headers=headers)


class RerankMapping(_Mapping):
    """A vendor's rerank endpoint."""

    def check(self, call: RerankCall) -> None:
        """Vendor pre-send validation; raise ``invalid_request`` to refuse the call."""

    @abstractmethod
    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        """The JSON body for one request carrying ``documents``."""

    def parse(self, payload: Any, call: RerankCall, document_count: int) -> RerankPart:
        """Read one decoded success body for a request of ``document_count`` documents."""
        return read_rerank(
            self.endpoint,
            payload,
            document_count,
            call.top_k,
            ids=self.document_ids(document_count),
        )

    def document_ids(self, document_count: int) -> list[object] | None:
        """The ids the request gave its documents, where results name them by id."""
        return None


def embedding_flow(
    mapping: EmbeddingMapping, call: EmbedCall, headers: dict[str, str] | None = None
) -> Generator[httpx.Request, httpx.Response, tuple[EmbeddingResponse, str | None]]:
    """Send each chunk in order, read it, and stitch: yields requests, returns the response
    and the model the provider echoed (``None`` when it echoes none)."""
    mapping.require_key()
    mapping.check(call)
    batches = mapping.chunks(mapping.wire_inputs(call))
    requests = [mapping.request(mapping.body(call, batch), headers) for batch in batches]
    parts: list[EmbeddingPart] = []
    for request, batch in zip(requests, batches, strict=True):
        response = yield request
        parts.append(mapping.parse(mapping.read(response), len(batch), response.headers))
    return _stitch_embeddings(parts, mapping.model), parts[0].model


def _summed(counts: Iterable[int]) -> int | None:
    """The chunks' sound figures added up; a total no bill can hold is not a figure either."""
    return figures.count(sum(counts))


def _sum_embedding_usage(parts: list[EmbeddingPart]) -> EmbeddingUsage | None:
    """The chunks' figures added up, each one when every chunk reported it sound."""
    usages = [part.usage for part in parts]
    tokens = characters = None
    if all(u is not None and u.input_tokens is not None for u in usages):
        tokens = _summed(u.input_tokens for u in usages if u and u.input_tokens is not None)
    if all(u is not None and u.billable_characters is not None for u in usages):
        characters = _summed(
            u.billable_characters for u in usages if u and u.billable_characters is not None
        )
    if tokens is None and characters is None:
        return None
    return _embedding_usage({"input_tokens": tokens, "billable_characters": characters})


def _stitch_embeddings(parts: list[EmbeddingPart], bound_model: str) -> EmbeddingResponse:
    first = parts[0]
    if len(parts) == 1:
        vectors, raw, usage = first.vectors, first.raw, first.usage
    else:
        vectors = [vector for part in parts for vector in part.vectors]
        raw = [part.raw for part in parts]
        usage = _sum_embedding_usage(parts)
    widths = {part.dimensions for part in parts}
    if len(widths) != 1 or not first.dimensions:
        raise invalid_response(
            "vectors are empty or of inconsistent length", "inconsistent_dimensions"
        )
    # every part was read and checked by the endpoint's rules: no second validation pass
    return _embedding_response(
        _with_malformed(
            {
                "vectors": vectors,
                "dimensions": first.dimensions,
                "model": first.model or bound_model,
                "usage": usage,
                "response_id": first.response_id,
                "raw": raw,
            },
            parts,
        )
    )


def rerank_flow(
    mapping: RerankMapping, call: RerankCall, headers: dict[str, str] | None = None
) -> Generator[httpx.Request, httpx.Response, tuple[RerankResponse, str | None]]:
    """Send each document chunk with the same query, then re-base, sort and cut globally."""
    mapping.require_key()
    mapping.check(call)
    batches = mapping.chunks(call.documents)
    requests = [mapping.request(mapping.body(call, batch), headers) for batch in batches]
    parts: list[RerankPart] = []
    for request, batch in zip(requests, batches, strict=True):
        response = yield request
        parts.append(mapping.parse(mapping.read(response), call, len(batch)))
    return _stitch_rerank(parts, [len(b) for b in batches], call, mapping), parts[0].model


def _stitch_rerank(
    parts: list[RerankPart], sizes: list[int], call: RerankCall, mapping: RerankMapping
) -> RerankResponse:
    first = parts[0]
    if len(parts) == 1:
        results, raw = list(first.results), first.raw
    else:
        results = []
        offset = 0
        for part, size in zip(parts, sizes, strict=True):
            results.extend(
                _scored(
                    {
                        "index": r.index + offset,
                        "relevance_score": r.relevance_score,
                        "document": r.document,
                    }
                )
                for r in part.results
            )
            offset += size
        raw = [part.raw for part in parts]
    results.sort(key=lambda r: -r.relevance_score)
    if mapping.endpoint.client_side_top_k and call.top_k is not None:
        del results[call.top_k :]
    # indices are unique per part and re-based apart, scores finite, and now sorted
    return _rerank_response(
        _with_malformed(
            {
                "results": results,
                "model": first.model or mapping.model,
                "usage": _sum_rerank_usage(parts),
                "response_id": first.response_id,
                "raw": raw,
            },
            parts,
        )
    )


def _with_malformed(
    response: dict[str, Any], parts: list[EmbeddingPart] | list[RerankPart]
) -> dict[str, Any]:
    """``response`` with the usage figures any chunk sent that were not counts (in a fixed
    order), when there are some."""
    if len(parts) == 1:
        malformed = parts[0].malformed_usage
    else:
        named = {figure for part in parts for figure in part.malformed_usage}
        malformed = tuple(figure for figure in get_args(UsageFigure) if figure in named)
    if malformed:
        response["malformed_usage"] = malformed
    return response


def _sum_rerank_usage(parts: list[RerankPart]) -> RerankUsage | None:
    if len(parts) == 1:
        return parts[0].usage
    usages = [part.usage for part in parts]
    units = tokens = None
    if all(u is not None and u.search_units is not None for u in usages):
        units = _summed(u.search_units for u in usages if u and u.search_units is not None)
    if all(u is not None and u.input_tokens is not None for u in usages):
        tokens = _summed(u.input_tokens for u in usages if u and u.input_tokens is not None)
    if units is None and tokens is None:
        return None
    return _rerank_usage({"search_units": units, "input_tokens": tokens})
