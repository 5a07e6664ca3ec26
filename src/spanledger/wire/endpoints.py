"""Every vendor endpoint spanledger reads, declared once.

A declaration says where a request carries what the call asked for and where the response
carries what the provider reported: the figures, the id, the echoed model, the vectors or the
results, and what the endpoint bills by. Our providers build requests from it and read
responses with it; SDK instrumentation, the httpx transport and ``record_*(raw=...)`` read the
same declaration, so a rule cannot be written twice and drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal
from urllib.parse import quote, unquote

from spanledger.errors import ErrorCategory

__all__ = [
    "ALL_ENDPOINTS",
    "ENDPOINTS",
    "IN_PROCESS_VENDORS",
    "SDK_ONLY_ENDPOINTS",
    "VARIANT_ENDPOINTS",
    "Billing",
    "Endpoint",
    "Operation",
    "VectorLayout",
    "Vendor",
    "endpoint_for",
    "endpoint_named",
]

Operation = Literal["embeddings", "rerank"]
Billing = Literal["tokens", "search_units", "queries", "local"]
"""What a vendor bills an endpoint by: ``tokens`` or ``search_units`` it reports; ``queries``:
search units by its documented rule (a query of up to 100 documents) while the API reports no
usage; ``local``: nobody bills (a model on your own machine)."""


class Vendor(StrEnum):
    """The wire surfaces spanledger reads; the value is what events record as ``provider``."""

    OPENAI = "openai"
    COHERE = "cohere"
    JINA = "jina"
    TEI = "tei"
    VOYAGE = "voyageai"
    BEDROCK = "aws.bedrock"
    GEMINI = "gcp.gemini"
    VERTEX = "gcp.vertex_ai"
    AZURE = "azure.ai.openai"
    MISTRAL = "mistral_ai"
    OLLAMA = "ollama"
    SENTENCE_TRANSFORMERS = "sentence_transformers"
    FLASHRANK = "flashrank"


IN_PROCESS_VENDORS = frozenset({Vendor.SENTENCE_TRANSFORMERS, Vendor.FLASHRANK})
"""Libraries whose models run inside the caller's process: they have no wire surface, so no
route, stand-in or host map names them."""


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
    """The list of vectors at ``vectors_at`` (the body itself for TEI), in input order."""
    SINGLE = "single"
    """One vector at ``vectors_at``, for a request of one input (Titan, Gemini's
    ``embedContent``, Ollama's legacy route)."""
    ITEMS = "items"
    """A list of objects at ``vectors_at``, each holding its vector at ``vector_in``, in input
    order (Gemini's ``embeddings[].values``, Vertex's ``predictions[].embeddings.values``)."""


Path = tuple[str, ...]


_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_VERSION = re.compile(r"/v\d[a-z0-9]*(?=/)")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One vendor endpoint's wire rules. ``None`` for a path means the wire never carries it.

    Request keys are read as paths (``*_at``) into the JSON body; the ``*_key`` arguments are
    the top-level shorthand. A ``route`` may hold placeholders (``{model}``, ``{project}``):
    the model named in the URL is the call's model.
    """

    vendor: Vendor
    operation: Operation
    route: str
    """The path our providers post to on the vendor's origin (a template when it holds
    ``{placeholders}``)."""
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
    """The vendor's public API hosts, by which plain httpx traffic is recognised (an entry
    that starts with ``.`` is a domain: every host under it)."""
    name: str = ""
    """A short label, unique among the declarations (``ollama-embed``); made from the vendor
    and the route's last segment when not given."""
    items_at: Path | None = None
    """Where the inputs (or documents) sit, when not at ``items_key``."""
    item_text_at: Path = ()
    """Where each input's text sits inside its item (``()``: the item is the text)."""
    single_input: bool = False
    """The request carries exactly one input (Titan's ``inputText``)."""
    query_at: Path = ("query",)
    top_k_at: Path | None = None
    dimensions_at: Path | None = None
    input_type_at: Path | None = None
    request_model_at: Path | None = ("model",)
    """Where the request names its model (``None``: only the route does)."""
    vectors_at: Path = ()
    vector_in: Path = ()
    tokens_each_at: Path | None = None
    """A token figure on each item at ``vectors_at``, summed (every one must be sound)."""
    characters_at: Path | None = None
    """Where the response reports the input characters the vendor bills (Vertex AI's
    ``metadata.billableCharacterCount``): a figure of its own beside the tokens."""
    tokens_header: str | None = None
    """A response header carrying the token figure when the body does not (lower case)."""
    result_index_key: str = "index"
    result_ids_at: Path | None = None
    """Results name documents by the ``id`` the request gave each (at this path in each
    request item) instead of by position."""
    selects_by: tuple[Path, ...] = ()
    """Request paths that tell this endpoint from others sharing its route (one present is
    enough)."""
    model_prefixes: tuple[str, ...] = ()
    """Model names that tell the vendor on a host nobody declared (``voyage-``)."""
    model_pattern: str = "[^/]+"
    """What ``{model}`` matches in the route (Bedrock's may be an ARN, with slashes)."""
    ports: tuple[int, ...] = ()
    """Ports that tell the vendor on any host (Ollama serves on 11434)."""
    error_code_header: str | None = None
    """A response header naming the vendor's error code (``x-amzn-errortype``)."""
    error_codes: dict[str, ErrorCategory] = field(default_factory=dict)
    """Categories by vendor error code, over the status's."""
    key_header: str = "authorization"
    """The request header that carries the API key."""
    key_scheme: str = "Bearer "
    """What goes before the key in that header."""
    provider: str = field(init=False)
    """The vendor's name as events carry it (a plain ``str``, read on every call)."""
    route_pattern: re.Pattern[str] | None = field(init=False)
    """How a URL path ending in this route is told, for a templated route."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "provider", self.vendor.value)
        if not self.name:
            set_(self, "name", f"{self.vendor.value}-{self.route.rsplit('/', 1)[-1]}")
        if self.items_at is None:
            set_(self, "items_at", (self.items_key,))
        if self.top_k_at is None and self.top_k_key:
            set_(self, "top_k_at", (self.top_k_key,))
        if self.dimensions_at is None and self.dimensions_key:
            set_(self, "dimensions_at", (self.dimensions_key,))
        if self.input_type_at is None and self.input_type_key:
            set_(self, "input_type_at", (self.input_type_key,))
        set_(self, "route_pattern", self._pattern() if "{" in self.route else None)

    def _pattern(self) -> re.Pattern[str]:
        """The route as a regex on a path's end; its API version may be any (``v1beta1``)."""
        parts: list[str] = []
        last = 0
        version = _VERSION.match(self.route)
        if version:
            parts.append(r"/v\d[a-z0-9]*")
            last = version.end()
        for found in _PLACEHOLDER.finditer(self.route):
            parts.append(re.escape(self.route[last : found.start()]))
            name = found.group(1)
            parts.append(f"(?P<{name}>{self.model_pattern if name == 'model' else '[^/]+'})")
            last = found.end()
        parts.append(re.escape(self.route[last:]))
        return re.compile("".join(parts) + "$")

    @property
    def suffix(self) -> str:
        """The route's last segment (``/embeddings``, ``/embed``, ``/rerank``)."""
        return self.route[self.route.rfind("/") :]

    @property
    def model_in_route(self) -> bool:
        """Whether the URL names the model (``/model/{model}/invoke``)."""
        return "{model}" in self.route

    def route_model(self, path: str) -> str | None:
        """The model a URL path to this endpoint names (percent-decoded), if it names one."""
        pattern = self.route_pattern
        if pattern is None or not self.model_in_route:
            return None
        found = pattern.search(path)
        return unquote(found.group("model")) if found else None

    def route_with(self, **values: str) -> str:
        """The route with its placeholders filled (each value percent-encoded)."""
        return _PLACEHOLDER.sub(lambda m: quote(values[m.group(1)], safe=""), self.route)

    def serves_host(self, host: str | None) -> bool:
        """Whether ``host`` is one of the vendor's own (a listed host or under a domain)."""
        if not host:
            return False
        return any(host == h or (h[0] == "." and host.endswith(h)) for h in self.hosts)


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
    COHERE_EMBEDDINGS,
    route="/v1/embed",
    name="cohere-v1-embed",
    vectors=VectorLayout.FLOATS_OR_BY_TYPE,
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
    model_prefixes=("jina",),
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
    model_prefixes=("jina",),
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
    model_prefixes=("voyage-",),
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

_BEDROCK_HOSTS = (".amazonaws.com",)
_BEDROCK_CODES = {
    "ThrottlingException": ErrorCategory.RATE_LIMIT,
    "ServiceQuotaExceededException": ErrorCategory.RATE_LIMIT,
    "TooManyRequestsException": ErrorCategory.RATE_LIMIT,
    "ValidationException": ErrorCategory.INVALID_REQUEST,
    "AccessDeniedException": ErrorCategory.AUTHENTICATION,
    "UnrecognizedClientException": ErrorCategory.AUTHENTICATION,
    "ExpiredTokenException": ErrorCategory.AUTHENTICATION,
    "ResourceNotFoundException": ErrorCategory.INVALID_MODEL,
    "ModelNotReadyException": ErrorCategory.MODEL_NOT_LOADED,
    "ModelTimeoutException": ErrorCategory.UNAVAILABLE,
    "ModelErrorException": ErrorCategory.UNAVAILABLE,
    "ServiceUnavailableException": ErrorCategory.UNAVAILABLE,
    "InternalServerException": ErrorCategory.UNAVAILABLE,
}
"""Bedrock's error codes (``x-amzn-ErrorType``, botocore's ``Error.Code``): a throttle is a
rate limit and a model still loading is not an outage, whatever the status."""
BEDROCK_TITAN_EMBEDDINGS = Endpoint(
    Vendor.BEDROCK,
    "embeddings",
    "/model/{model}/invoke",
    "tokens",
    items_key="inputText",
    name="bedrock-titan-embed",
    single_input=True,
    tokens_at=("inputTextTokenCount",),
    tokens_header="x-amzn-bedrock-input-token-count",
    id_at=None,
    model_at=None,
    request_model_at=None,
    dimensions_key="dimensions",
    vectors=VectorLayout.SINGLE,
    vectors_at=("embedding",),
    selects_by=(("inputText",), ("inputImage",)),
    model_prefixes=("amazon.titan-embed",),
    model_pattern=".+",
    hosts=_BEDROCK_HOSTS,
    error_code_header="x-amzn-errortype",
    error_codes=_BEDROCK_CODES,
)
"""Amazon Titan Text (v1, v2) and Multimodal embeddings through ``InvokeModel``: one input a
request, tokens in the body's ``inputTextTokenCount`` (and a response header)."""
BEDROCK_COHERE_EMBEDDINGS = replace(
    BEDROCK_TITAN_EMBEDDINGS,
    items_key="texts",
    items_at=("texts",),
    name="bedrock-cohere-embed",
    single_input=False,
    tokens_at=None,
    id_at=("id",),
    input_type_key="input_type",
    input_type_at=("input_type",),
    dimensions_key="output_dimension",
    dimensions_at=("output_dimension",),
    vectors=VectorLayout.FLOATS_OR_BY_TYPE,
    vectors_at=(),
    selects_by=(("texts",), ("images",)),
    model_prefixes=("cohere.embed",),
    default_chunk_size=96,
)
"""Cohere Embed v3 / v4 on Bedrock: Cohere's v1 body, with no usage in it; the tokens come
only in the ``X-Amzn-Bedrock-Input-Token-Count`` header."""
BEDROCK_NOVA_EMBEDDINGS = replace(
    BEDROCK_TITAN_EMBEDDINGS,
    items_key="singleEmbeddingParams",
    items_at=("singleEmbeddingParams",),
    item_text_at=("text", "value"),
    name="bedrock-nova-embed",
    tokens_at=None,
    dimensions_key=None,
    dimensions_at=("singleEmbeddingParams", "embeddingDimension"),
    vectors=VectorLayout.ITEMS,
    vectors_at=("embeddings",),
    vector_in=("embedding",),
    selects_by=(("singleEmbeddingParams",),),
    model_prefixes=("amazon.nova",),
)
"""Amazon Nova multimodal embeddings: one input a request, ``embeddings[].embedding``, tokens
only in the header."""
BEDROCK_COHERE_RERANK = replace(
    BEDROCK_TITAN_EMBEDDINGS,
    operation="rerank",
    billing="queries",
    items_key="documents",
    items_at=("documents",),
    name="bedrock-cohere-rerank",
    single_input=False,
    tokens_at=None,
    tokens_header=None,
    units_at=("meta", "billed_units", "search_units"),
    id_at=("id",),
    dimensions_key=None,
    dimensions_at=None,
    top_k_key="top_n",
    top_k_at=("top_n",),
    document_key=None,
    vectors_at=(),
    selects_by=(("query",),),
    model_prefixes=("cohere.rerank",),
)
"""Cohere Rerank through Bedrock's ``InvokeModel``: billed per query of up to 100 documents."""
BEDROCK_RERANK = Endpoint(
    Vendor.BEDROCK,
    "rerank",
    "/rerank",
    "queries",
    items_key="sources",
    name="bedrock-rerank",
    item_text_at=("inlineDocumentSource", "textDocument", "text"),
    query_at=("queries", "0", "textQuery", "text"),
    top_k_at=("rerankingConfiguration", "bedrockRerankingConfiguration", "numberOfResults"),
    request_model_at=(
        "rerankingConfiguration",
        "bedrockRerankingConfiguration",
        "modelConfiguration",
        "modelArn",
    ),
    id_at=None,
    model_at=None,
    score_key="relevanceScore",
    document_key=None,
    hosts=_BEDROCK_HOSTS,
    selects_by=(("rerankingConfiguration",),),
    error_code_header="x-amzn-errortype",
    error_codes=_BEDROCK_CODES,
)
"""Bedrock Agent Runtime's ``Rerank``: no usage reported, billed per query of up to 100
documents."""

_GOOGLE_HOSTS = ("generativelanguage.googleapis.com",)
_VERTEX_HOSTS = (".aiplatform.googleapis.com", "aiplatform.googleapis.com")
GEMINI_EMBEDDINGS = Endpoint(
    Vendor.GEMINI,
    "embeddings",
    "/v1beta/models/{model}:batchEmbedContents",
    "tokens",
    items_key="requests",
    name="gemini-batch-embed",
    item_text_at=("content", "parts", "0", "text"),
    input_type_at=("requests", "0", "taskType"),
    dimensions_at=("requests", "0", "outputDimensionality"),
    request_model_at=None,
    tokens_at=("usageMetadata", "promptTokenCount"),
    id_at=None,
    model_at=None,
    vectors=VectorLayout.ITEMS,
    vectors_at=("embeddings",),
    vector_in=("values",),
    model_pattern="[^/:]+",
    default_base_url="https://generativelanguage.googleapis.com",
    api_key_env="GEMINI_API_KEY",
    key_header="x-goog-api-key",
    key_scheme="",
    default_chunk_size=100,
    hosts=_GOOGLE_HOSTS,
)
"""The Gemini API's batch embedding: ``usageMetadata`` only for some models."""
GEMINI_EMBED_CONTENT = replace(
    GEMINI_EMBEDDINGS,
    route="/v1beta/models/{model}:embedContent",
    name="gemini-embed",
    items_key="content",
    items_at=("content",),
    item_text_at=("parts", "0", "text"),
    single_input=True,
    input_type_at=("taskType",),
    dimensions_at=("outputDimensionality",),
    vectors=VectorLayout.SINGLE,
    vectors_at=("embedding", "values"),
    vector_in=(),
    default_chunk_size=None,
)
"""One input's ``embedContent`` (Gemini API; Vertex answers the same route on its host)."""
VERTEX_EMBEDDINGS = Endpoint(
    Vendor.VERTEX,
    "embeddings",
    "/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:predict",
    "tokens",
    items_key="instances",
    name="vertex-predict",
    item_text_at=("content",),
    input_type_at=("instances", "0", "task_type"),
    dimensions_at=("parameters", "outputDimensionality"),
    request_model_at=None,
    id_at=None,
    model_at=None,
    tokens_each_at=("embeddings", "statistics", "token_count"),
    characters_at=("metadata", "billableCharacterCount"),
    vectors=VectorLayout.ITEMS,
    vectors_at=("predictions",),
    vector_in=("embeddings", "values"),
    selects_by=(("instances", "0", "content"),),
    model_pattern="[^/:]+",
    default_chunk_size=250,
    hosts=_VERTEX_HOSTS,
)
"""Vertex AI text embeddings, regional or global (``locations/global`` on
``aiplatform.googleapis.com``): a token count per prediction (``statistics.token_count``) and
the characters billed (``metadata.billableCharacterCount``), by which ``text-embedding-*`` is
priced."""
VERTEX_EMBED_CONTENT = replace(
    GEMINI_EMBED_CONTENT,
    vendor=Vendor.VERTEX,
    route="/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:embedContent",
    name="vertex-embed",
    default_base_url=None,
    api_key_env=None,
    hosts=_VERTEX_HOSTS,
)
"""Vertex's ``embedContent`` (``gemini-embedding-2`` and later; ``gemini-embedding-001`` goes
to ``:predict``): Gemini's shape, with ``usageMetadata``."""
_VERTEX_EXPRESS = {
    "default_base_url": "https://aiplatform.googleapis.com",
    "api_key_env": "GOOGLE_API_KEY",
    "key_header": "x-goog-api-key",
    "key_scheme": "",
}
"""Vertex AI express mode: an API key (in ``x-goog-api-key``) and the global host."""
VERTEX_EXPRESS_EMBEDDINGS = replace(
    VERTEX_EMBEDDINGS,
    route="/v1/publishers/google/models/{model}:predict",
    name="vertex-express-predict",
    **_VERTEX_EXPRESS,  # type: ignore[arg-type]
)
"""Vertex AI express mode's ``:predict``: no project or location in the path, otherwise the
regional route's wire (figures included)."""
VERTEX_EXPRESS_EMBED_CONTENT = replace(
    VERTEX_EMBED_CONTENT,
    route="/v1/publishers/google/models/{model}:embedContent",
    name="vertex-express-embed",
    **_VERTEX_EXPRESS,  # type: ignore[arg-type]
)
"""Vertex AI express mode's ``:embedContent``: the regional route's wire, without project or
location."""
VERTEX_BATCH_EMBED_CONTENTS = replace(
    GEMINI_EMBEDDINGS,
    vendor=Vendor.VERTEX,
    route="/v1/projects/{project}/locations/{location}/publishers/google/models/{model}"
    ":batchEmbedContents",
    name="vertex-batch-embed",
    input_type_at=("requests", "0", "embedContentConfig", "taskType"),
    dimensions_at=("requests", "0", "embedContentConfig", "outputDimensionality"),
    default_base_url=None,
    api_key_env=None,
    hosts=_VERTEX_HOSTS,
)
"""Vertex's ``batchEmbedContents``, where google-genai 3 sends several contents for a Gemini
model (``gemini-embedding-001`` included): Gemini's batch shape, each request's options under
``embedContentConfig``, ``usageMetadata`` read when it is sent."""
VERTEX_RANK = Endpoint(
    Vendor.VERTEX,
    "rerank",
    "/v1/projects/{project}/locations/{location}/rankingConfigs/{config}:rank",
    "queries",
    items_key="records",
    name="vertex-rank",
    item_text_at=("content",),
    top_k_key="topN",
    id_at=None,
    model_at=None,
    results_at=("records",),
    score_key="score",
    document_key="content",
    result_index_key="id",
    result_ids_at=("id",),
    default_base_url="https://discoveryengine.googleapis.com",
    default_chunk_size=None,
    hosts=("discoveryengine.googleapis.com",),
)
"""The Vertex AI ranking API (Discovery Engine): results name records by their ``id``; no
usage reported, billed per query of up to 100 records."""

_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
AZURE_EMBEDDINGS = replace(
    OPENAI_EMBEDDINGS,
    vendor=Vendor.AZURE,
    route="/openai/deployments/{model}/embeddings",
    name="azure-deployment-embeddings",
    request_model_at=None,
    default_base_url=None,
    api_key_env="AZURE_OPENAI_API_KEY",
    key_header="api-key",
    key_scheme="",
    hosts=_AZURE_HOSTS,
)
"""Azure OpenAI's deployment route: the URL names the deployment, the response the model."""
AZURE_V1_EMBEDDINGS = replace(
    OPENAI_EMBEDDINGS,
    vendor=Vendor.AZURE,
    route="/openai/v1/embeddings",
    name="azure-v1-embeddings",
    default_base_url=None,
    api_key_env="AZURE_OPENAI_API_KEY",
    key_header="api-key",
    key_scheme="",
    hosts=_AZURE_HOSTS,
)
"""Azure OpenAI's ``/openai/v1/`` route: the deployment is the body's ``model``."""

MISTRAL_EMBEDDINGS = replace(
    OPENAI_EMBEDDINGS,
    vendor=Vendor.MISTRAL,
    name="mistral-embeddings",
    dimensions_key="output_dimension",
    dimensions_at=("output_dimension",),
    default_base_url="https://api.mistral.ai",
    api_key_env="MISTRAL_API_KEY",
    default_chunk_size=None,
    hosts=("api.mistral.ai",),
    model_prefixes=("mistral-embed", "codestral-embed"),
)
"""Mistral's embeddings: OpenAI's shape and usage."""

_OLLAMA = {"vendor": Vendor.OLLAMA, "billing": "local", "ports": (11434,), "id_at": None}
OLLAMA_EMBED = Endpoint(
    operation="embeddings",
    route="/api/embed",
    items_key="input",
    name="ollama-embed",
    tokens_at=("prompt_eval_count",),
    dimensions_key="dimensions",
    vectors=VectorLayout.ROWS,
    vectors_at=("embeddings",),
    default_base_url="http://localhost:11434",
    **_OLLAMA,  # type: ignore[arg-type]
)
"""Ollama's native embedding: ``prompt_eval_count`` tokens, durations in nanoseconds."""
OLLAMA_LEGACY_EMBEDDINGS = Endpoint(
    operation="embeddings",
    route="/api/embeddings",
    items_key="prompt",
    name="ollama-legacy-embeddings",
    single_input=True,
    model_at=None,
    vectors=VectorLayout.SINGLE,
    vectors_at=("embedding",),
    default_base_url="http://localhost:11434",
    **_OLLAMA,  # type: ignore[arg-type]
)
"""Ollama's legacy ``/api/embeddings``: one prompt, one vector, no usage, no model."""
OLLAMA_OPENAI_EMBEDDINGS = replace(
    OPENAI_EMBEDDINGS,
    vendor=Vendor.OLLAMA,
    billing="local",
    name="ollama-v1-embeddings",
    default_base_url="http://localhost:11434",
    api_key_env=None,
    hosts=(),
    ports=(11434,),
)
"""Ollama's OpenAI-compatible route: OpenAI's shape and ``usage.prompt_tokens``."""

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
        GEMINI_EMBEDDINGS,
        VERTEX_EMBEDDINGS,
        VERTEX_RANK,
        AZURE_EMBEDDINGS,
        MISTRAL_EMBEDDINGS,
        OLLAMA_EMBED,
    )
}
"""The endpoint our provider classes call, by vendor and operation (OpenAI has no rerank)."""

VARIANT_ENDPOINTS: tuple[Endpoint, ...] = (VERTEX_EXPRESS_EMBEDDINGS,)
"""Endpoints a provider class calls in a mode other than its default: ``VertexEmbeddings``
given no project posts to Vertex AI express mode's ``:predict``."""

SDK_ONLY_ENDPOINTS: tuple[Endpoint, ...] = (
    BEDROCK_TITAN_EMBEDDINGS,
    BEDROCK_RERANK,
    COHERE_V1_EMBEDDINGS,
    BEDROCK_COHERE_EMBEDDINGS,
    BEDROCK_NOVA_EMBEDDINGS,
    BEDROCK_COHERE_RERANK,
    GEMINI_EMBED_CONTENT,
    VERTEX_EMBED_CONTENT,
    VERTEX_EXPRESS_EMBED_CONTENT,
    VERTEX_BATCH_EMBED_CONTENTS,
    AZURE_V1_EMBEDDINGS,
    OLLAMA_LEGACY_EMBEDDINGS,
    OLLAMA_OPENAI_EMBEDDINGS,
)
"""Endpoints only SDKs and other code reach (no provider class calls them)."""

ALL_ENDPOINTS: tuple[Endpoint, ...] = (
    *ENDPOINTS.values(),
    *VARIANT_ENDPOINTS,
    *SDK_ONLY_ENDPOINTS,
)
"""Every endpoint spanledger reads."""

_BEDROCK_GEOGRAPHY = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.")


def bedrock_model(model_id: str) -> str:
    """The base model a Bedrock model id names: a foundation-model ARN's id, a cross-region
    inference profile's model (``us.cohere.embed-v4:0``); any other ARN (an application
    profile, provisioned throughput) as given, since it does not name one."""
    base = model_id
    if base.startswith("arn:"):
        marker = "foundation-model/"
        at = base.find(marker)
        if at >= 0:
            base = base[at + len(marker) :]
        elif "inference-profile/" in base and ":application-inference-profile/" not in base:
            base = base.rsplit("/", 1)[-1]
        else:
            return model_id
    return _BEDROCK_GEOGRAPHY.sub("", base)


def endpoint_for(vendor: object, operation: Operation, model: object = None) -> Endpoint | None:
    """The declaration for ``vendor`` (a ``Vendor`` or its value) and ``operation``: the one
    whose model names ``model`` starts with, where the vendor has several (Bedrock), else the
    one its provider class calls (or its first)."""
    if not isinstance(vendor, str):
        return None
    try:
        known = Vendor(vendor)
    except ValueError:
        return None
    candidates = _BY_VENDOR.get((known, operation), ())
    if type(model) is str and len(candidates) > 1:
        base = bedrock_model(model) if known is Vendor.BEDROCK else model
        for endpoint in candidates:
            if endpoint.model_prefixes and base.startswith(endpoint.model_prefixes):
                return endpoint
    return candidates[0] if candidates else None


def endpoint_named(name: str) -> Endpoint:
    """The declaration called ``name`` (``ollama-legacy-embeddings``); an unknown name is
    refused with the names there are."""
    for endpoint in ALL_ENDPOINTS:
        if endpoint.name == name:
            return endpoint
    known = ", ".join(sorted(endpoint.name for endpoint in ALL_ENDPOINTS))
    raise ValueError(f"no endpoint named {name!r}; the declared ones: {known}")


def _by_vendor() -> dict[tuple[Vendor, Operation], tuple[Endpoint, ...]]:
    found: dict[tuple[Vendor, Operation], list[Endpoint]] = {}
    for endpoint in ALL_ENDPOINTS:
        found.setdefault((endpoint.vendor, endpoint.operation), []).append(endpoint)
    return {key: tuple(endpoints) for key, endpoints in found.items()}


_BY_VENDOR = _by_vendor()
