"""The billing assumption for failed calls, and usage estimates for those the provider may
have billed.

A call that failed after its request left (a timeout, a reset, a cancellation), was
interrupted (``interrupted``), or whose 2xx answer could not be read, may have been billed: the
provider did, or may have done, the work. Such a failure carries an estimate in an accounting
unit, ``ceil(utf8_bytes / 4)`` tokens over what was sent, or Cohere's search-unit rule (one
query with up to 100 documents is one unit).
An estimate is never a report: it rides on failure events as ``estimated_usage`` and is priced
as ``estimated``. Every other failure (refused before sending, a refused connection, a 3xx,
4xx, 429 or 5xx answer) is assumed not billed.

The search-unit rule (``rule_search_units``) is also how the ledger prices a successful rerank
of a vendor that bills per query by that rule and reports no usage (AWS Bedrock Rerank, Google's
Vertex ranking API): there too it is an estimate, never a reported figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from spanledger.errors import ErrorCategory
from spanledger.events import EmbeddingUsage, RerankUsage

__all__ = [
    "ABANDONED_ERROR_TYPES",
    "SEARCH_UNIT_DOCUMENTS",
    "UNREADABLE_ANSWER_TYPES",
    "estimate_embedding_usage",
    "estimate_rerank_usage",
    "may_have_billed",
    "rule_search_units",
    "token_cost",
    "utf8_bytes",
]

ABANDONED_ERROR_TYPES = frozenset(
    {
        # httpx / httpcore (and requests' ReadTimeout)
        "ReadTimeout",
        "WriteTimeout",
        "ReadError",
        "RemoteProtocolError",
        "CancelledError",
        # requests / urllib3 / http.client, under requests' broad ConnectionError
        "ReadTimeoutError",
        "ProtocolError",
        "ChunkedEncodingError",
        "RemoteDisconnected",
        "IncompleteRead",
        "ConnectionResetError",
        # aiohttp (a refused connection is its ClientConnectorError, not these)
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientPayloadError",
        "ClientOSError",
    }
)
"""Failures after the request left: the provider may have done (and billed) the work."""

UNREADABLE_ANSWER_TYPES = frozenset(
    {
        "UnicodeDecodeError",
        "JSONDecodeError",
        # a body that does not decode by its declared Content-Encoding: httpx (and its
        # httpx2 fork), requests, urllib3
        "DecodingError",
        "ContentDecodingError",
        "DecodeError",
    }
)
"""Failures to decode an answer that arrived: the provider did the work."""

SEARCH_UNIT_DOCUMENTS = 100
"""The documents one search unit (one query) covers, by the vendors' documented rule."""


def may_have_billed(
    category: ErrorCategory | str,
    error_type: str | None,
    status_code: int | None,
    *,
    answered: bool = False,
) -> bool:
    """Whether a failed call may have been billed: it was abandoned after sending, it was
    interrupted (no path can tell whether an interrupt landed before the request left, so it is
    taken as abandoned), or the provider answered 2xx with a body that could not be read (the
    work was done).
    ``answered``: a 2xx answer arrived though the path does not know its status (an SDK that
    returned normally, a manual block's raw body)."""
    if error_type in ABANDONED_ERROR_TYPES or category == ErrorCategory.INTERRUPTED:
        return True
    if category != ErrorCategory.INVALID_RESPONSE:
        return False
    if answered or error_type in UNREADABLE_ANSWER_TYPES:
        return True
    return status_code is not None and 200 <= status_code < 300


def utf8_bytes(text: str) -> int:
    """UTF-8 byte length; a lone surrogate counts as the 3 bytes it would take."""
    return len(text.encode("utf-8", "surrogatepass"))


def token_cost(text: str) -> int:
    """The accounting unit: ``ceil(utf8_bytes / 4)``."""
    return math.ceil(utf8_bytes(text) / 4)


def estimate_embedding_usage(billing: str | None, inputs: Sequence[str]) -> EmbeddingUsage | None:
    """Estimated input tokens for an abandoned embedding call, if the vendor bills tokens."""
    if billing != "tokens":
        return None
    total = sum(map(utf8_bytes, inputs))
    return EmbeddingUsage(input_tokens=math.ceil(total / 4))


def rule_search_units(document_count: int) -> int:
    """The search units of one rerank query by the documented rule: ``ceil(documents / 100)``
    (one unit per query of up to 100 documents)."""
    return math.ceil(document_count / SEARCH_UNIT_DOCUMENTS)


def estimate_rerank_usage(
    billing: str | None, query: str, documents: Sequence[str]
) -> RerankUsage | None:
    """Estimated usage for an abandoned rerank call in the vendor's billing unit.

    Tokens: the query is scored with every document, so each pair counts query + document.
    Search units (reported, or billed per query by the rule): ``rule_search_units``.
    """
    if billing == "search_units" or billing == "queries":
        return RerankUsage(search_units=rule_search_units(len(documents)))
    if billing == "tokens":
        query_bytes = utf8_bytes(query)
        total = sum(query_bytes + utf8_bytes(document) for document in documents)
        return RerankUsage(input_tokens=math.ceil(total / 4))
    return None
