"""Every vendor endpoint spanledger reads, declared once.

A declaration says where a request carries what the call asked for and where the response
carries what the provider reported: the figures, the id, the echoed model, the vectors or the
results, and what the endpoint bills by. Our providers build requests from it and read
responses with it; SDK instrumentation, the httpx transport and ``record_*(raw=...)`` read the
same declaration, so a rule cannot be written twice and drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from spanledger.errors import ErrorCategory

__all__ = [
    "ENDPOINTS",
    "Billing",
    "Endpoint",
    "Operation",
    "VectorLayout",
    "Vendor",
    "endpoint_for",
]

Operation = Literal["embeddings", "rerank"]
Billing = Literal["tokens", "search_units"]


class Vendor(StrEnum):
    """The wire surfaces spanledger reads; the value is what events record as ``provider``."""

    OPENAI = "openai"
    COHERE = "cohere"
    JINA = "jina"
    TEI = "tei"
    VOYAGE = "voyageai"


class VectorLayout(StrEnum):
    """Where an embedding response keeps its vectors."""

    BY_INDEX = "by_index"
    """``data: [{index, embedding}]``, placed by ``index`` (OpenAI, Jina, Voyage)."""
    BY_TYPE = "by_type"
    """``embeddings: {float: [...], int8: [...]}``, in input order (Cohere v2)."""
    FLOATS_OR_BY_TYPE = "floats_or_by_type"
    """Cohere v1: ``embeddings`` is the float vectors themselves when no type was asked for,
    else by type, as v2's."""
    ROWS = "rows"
    """The body is the list of vectors, in input order (TEI)."""


Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One vendor endpoint's wire rules. ``None`` for a path means the wire never carries it."""

    vendor: Vendor
    operation: Operation
    route: str
    """The path our providers post to on the vendor's origin."""
    billing: Billing | None
    """What the vendor bills this endpoint by, for estimates of abandoned attempts."""
    items_key: str
    """The request key holding the inputs (embeddings) or the documents (rerank)."""
    tokens_at: Path | None = None
    units_at: Path | None = None
    id_at: Path | None = ("id",)
    model_at: Path | None = ("model",)
    input_type_key: str | None = None
    dimensions_key: str | None = None
    top_k_key: str | None = None
    return_documents_key: str | None = None
    vectors: VectorLayout = VectorLayout.BY_INDEX
    results_at: Path = ("results",)
    """Where rerank results live; ``()`` is the body itself."""
    score_key: str = "relevance_score"
    document_key: str | None = "document"
    """Where a result echoes its document; ``None``: never echoed."""
    client_side_top_k: bool = False
    """The wire has no ``top_k``: results are cut after they arrive (and may exceed it)."""
    default_base_url: str | None = None
    api_key_env: str | None = None
    default_chunk_size: int | None = None
    status_overrides: dict[int, ErrorCategory] = field(default_factory=dict)
    hosts: tuple[str, ...] = ()
    """The vendor's public API hosts, by which plain httpx traffic is recognised."""
    provider: str = field(init=False)
    """The vendor's name as events carry it (a plain ``str``, read on every call)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "provider", self.vendor.value)

    @property
    def suffix(self) -> str:
        """The route's last segment (``/embeddings``, ``/embed``, ``/rerank``)."""
        return self.route[self.route.rfind("/") :]


_TEI_STATUS = {424: ErrorCategory.UNAVAILABLE}
_COHERE_HOSTS = ("api.cohere.com", "api.cohere.ai")
_VOYAGE_HOSTS = ("api.voyageai.com", "ai.mongodb.com")

OPENAI_EMBEDDINGS = Endpoint(
    Vendor.OPENAI,
    "embeddings",
    "/v1/embeddings",
    "tokens",
    items_key="input",
    tokens_at=("usage", "prompt_tokens"),
    dimensions_key="dimensions",
    default_base_url="https://api.openai.com",
    api_key_env="OPENAI_API_KEY",
    default_chunk_size=2048,
    hosts=("api.openai.com",),
)
COHERE_EMBEDDINGS = Endpoint(
    Vendor.COHERE,
    "embeddings",
    "/v2/embed",
    "tokens",
    items_key="texts",
    tokens_at=("meta", "billed_units", "input_tokens"),
    model_at=None,
    input_type_key="input_type",
    dimensions_key="output_dimension",
    vectors=VectorLayout.BY_TYPE,
    default_base_url="https://api.cohere.com",
    api_key_env="CO_API_KEY",
    default_chunk_size=96,
    hosts=_COHERE_HOSTS,
)
COHERE_RERANK = Endpoint(
    Vendor.COHERE,
    "rerank",
    "/v2/rerank",
    "search_units",
    items_key="documents",
    units_at=("meta", "billed_units", "search_units"),
    model_at=None,
    top_k_key="top_n",
    document_key=None,  # v2 never echoes; v1's echoes are not read
    default_base_url="https://api.cohere.com",
    api_key_env="CO_API_KEY",
    hosts=_COHERE_HOSTS,
)
COHERE_V1_EMBEDDINGS = replace(
    COHERE_EMBEDDINGS, route="/v1/embed", vectors=VectorLayout.FLOATS_OR_BY_TYPE
)
"""The older ``cohere.Client``'s embed; its rerank is read as v2's (``COHERE_RERANK``)."""
JINA_EMBEDDINGS = Endpoint(
    Vendor.JINA,
    "embeddings",
    "/v1/embeddings",
    "tokens",
    items_key="input",
    tokens_at=("usage", "total_tokens"),
    input_type_key="task",
    dimensions_key="dimensions",
    default_base_url="https://api.jina.ai",
    api_key_env="JINA_API_KEY",
    hosts=("api.jina.ai",),
)
JINA_RERANK = Endpoint(
    Vendor.JINA,
    "rerank",
    "/v1/rerank",
    "tokens",
    items_key="documents",
    tokens_at=("usage", "total_tokens"),
    top_k_key="top_n",
    return_documents_key="return_documents",
    default_base_url="https://api.jina.ai",
    api_key_env="JINA_API_KEY",
    hosts=("api.jina.ai",),
)
TEI_EMBEDDINGS = Endpoint(
    Vendor.TEI,
    "embeddings",
    "/embed",
    None,
    items_key="inputs",
    id_at=None,
    model_at=None,
    dimensions_key="dimensions",
    vectors=VectorLayout.ROWS,
    default_chunk_size=32,
    status_overrides=_TEI_STATUS,
)
TEI_RERANK = Endpoint(
    Vendor.TEI,
    "rerank",
    "/rerank",
    None,
    items_key="texts",
    id_at=None,
    model_at=None,
    return_documents_key="return_text",
    results_at=(),
    score_key="score",
    document_key="text",
    client_side_top_k=True,
    default_chunk_size=32,
    status_overrides=_TEI_STATUS,
)
VOYAGE_EMBEDDINGS = Endpoint(
    Vendor.VOYAGE,
    "embeddings",
    "/v1/embeddings",
    "tokens",
    items_key="input",
    tokens_at=("usage", "total_tokens"),
    input_type_key="input_type",
    dimensions_key="output_dimension",
    default_base_url="https://api.voyageai.com",
    api_key_env="VOYAGE_API_KEY",
    default_chunk_size=1000,
    hosts=_VOYAGE_HOSTS,
)
VOYAGE_RERANK = Endpoint(
    Vendor.VOYAGE,
    "rerank",
    "/v1/rerank",
    "tokens",
    items_key="documents",
    tokens_at=("usage", "total_tokens"),
    top_k_key="top_k",
    return_documents_key="return_documents",
    results_at=("data",),
    default_base_url="https://api.voyageai.com",
    api_key_env="VOYAGE_API_KEY",
    hosts=_VOYAGE_HOSTS,
)

ENDPOINTS: dict[tuple[Vendor, Operation], Endpoint] = {
    (endpoint.vendor, endpoint.operation): endpoint
    for endpoint in (
        OPENAI_EMBEDDINGS,
        COHERE_EMBEDDINGS,
        COHERE_RERANK,
        JINA_EMBEDDINGS,
        JINA_RERANK,
        TEI_EMBEDDINGS,
        TEI_RERANK,
        VOYAGE_EMBEDDINGS,
        VOYAGE_RERANK,
    )
}
"""Every endpoint our providers call, by vendor and operation (OpenAI has no rerank); SDKs also
reach ``COHERE_V1_EMBEDDINGS``."""


def endpoint_for(vendor: object, operation: Operation) -> Endpoint | None:
    """The declaration for ``vendor`` (a ``Vendor`` or its value) and ``operation``, if any."""
    if not isinstance(vendor, str):
        return None
    try:
        return ENDPOINTS.get((Vendor(vendor), operation))
    except ValueError:
        return None
