"""What a response body reported, read by its endpoint's declaration for any recording path.

A body the endpoint does not answer (too few vectors, a bad index, a score that is no number,
more results than ``top_k``) raises the same ``provider_invalid_response`` on every path; the
path adds the status and the body's fingerprint it holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from spanledger.attribution.scope import current_request
from spanledger.errors import ErrorCategory, Fingerprint, ProviderError
from spanledger.events import ScoredDocument
from spanledger.recording.facts import EmbedFacts, Figures, RerankFacts
from spanledger.wire.endpoints import Endpoint
from spanledger.wire.read import read_embeddings, read_rerank

__all__ = ["answered_badly", "kept_positions", "reported", "unreadable_response"]


def unreadable_response() -> ProviderError:
    """A response no reader could get through (deep JSON, a shape nothing expected); a new
    error each time, since it may be raised. ``answered_badly`` adds status and fingerprint."""
    return ProviderError(
        ErrorCategory.INVALID_RESPONSE,
        detail="the response could not be read",
        error_type="unreadable_response",
    )


def reported(
    endpoint: Endpoint,
    payload: object,
    facts: EmbedFacts | RerankFacts,
    headers: Mapping[str, str] | None = None,
) -> Figures:
    """The figures of one decoded 2xx body of the call ``facts`` describes (``headers``: the
    response's, where a figure may travel in one)."""
    if isinstance(facts, EmbedFacts):
        part = read_embeddings(
            endpoint,
            payload,
            facts.input_count or None,
            facts.dtype,
            keep_vectors=False,
            headers=headers,
        )
        return Figures(
            usage=part.usage,
            response_id=part.response_id,
            response_model=part.model,
            dimensions=part.dimensions,
            malformed_usage=part.malformed_usage,
        )
    served = facts.documents is not None and current_request() is not None
    rerank = read_rerank(
        endpoint,
        payload,
        facts.document_count or None,
        facts.top_k,
        keep_results=served,
        ids=facts.document_ids,
    )
    count = rerank.count
    if endpoint.client_side_top_k and facts.top_k is not None:
        count = min(count, facts.top_k)  # the caller keeps top_k, as our providers do
    return Figures(
        usage=rerank.usage,
        response_id=rerank.response_id,
        response_model=rerank.model,
        result_count=count,
        malformed_usage=rerank.malformed_usage,
        positions=kept_positions(rerank.results, count) if served else None,
    )


def kept_positions(results: list[ScoredDocument], count: int) -> tuple[int, ...]:
    """The document positions of the ``count`` best results (the caller keeps those)."""
    ranked = sorted(results, key=lambda result: -result.relevance_score)
    return tuple(result.index for result in ranked[:count])


def answered_badly(error: ProviderError, status: int | None, body: bytes | None) -> ProviderError:
    """``error`` (a body the endpoint does not answer) with the 2xx status and the body's
    fingerprint, when the path holds them: the provider did the work, the answer was unusable."""
    if error.status_code is not None or (status is not None and not 200 <= status < 300):
        return error
    if status is None and body is None:
        return error
    return ProviderError(
        error.category,
        status,
        error.retry_after,
        error.fingerprint or (Fingerprint.of(body) if body is not None else None),
        detail=error.detail,
        error_type=error.error_type,
    )
