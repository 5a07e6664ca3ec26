"""Google: the Gemini API's ``batchEmbedContents``, Vertex AI's text embeddings (``:predict``,
regional, global or in express mode) and the Vertex AI ranking API (``rankingConfigs/…:rank``).

The Gemini API reports ``usageMetadata.promptTokenCount`` for some models only; Vertex reports a
token count per prediction and the characters it bills (``text-embedding-*`` is priced per
1,000 of them); the ranking API reports no usage at all (it bills per query of up to 100
records, which the ledger prices as an estimate by that rule).
"""

from __future__ import annotations

from typing import Any, Unpack

from spanledger.providers._calls import EmbedCall, RerankCall, invalid_request, with_extras
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.providers._provider import ClientOptions, EmbeddingProvider, RerankProvider
from spanledger.wire.endpoints import (
    GEMINI_EMBEDDINGS,
    VERTEX_EMBEDDINGS,
    VERTEX_EXPRESS_EMBEDDINGS,
    VERTEX_RANK,
)

__all__ = [
    "GeminiEmbeddingMapping",
    "GeminiEmbeddings",
    "VertexEmbeddingMapping",
    "VertexEmbeddings",
    "VertexRankMapping",
    "VertexReranker",
]

_DEFAULT_LOCATION = "us-central1"
"""Where Vertex AI embeddings run when a project is given without a location."""
_TASK_TYPES = {
    "query": "RETRIEVAL_QUERY",
    "document": "RETRIEVAL_DOCUMENT",
    "classification": "CLASSIFICATION",
    "clustering": "CLUSTERING",
}
_GOOGLE_TASKS = frozenset(
    {
        *_TASK_TYPES.values(),
        "SEMANTIC_SIMILARITY",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    }
)


def _task_type(input_type: str | None) -> str | None:
    """Google's task type for ``input_type``: ours (``query``, ``document``, ...) or one of
    Google's own names, as given."""
    if input_type is None:
        return None
    return _TASK_TYPES.get(input_type, input_type)


def _check_task(call: EmbedCall) -> None:
    if call.input_type is not None and _task_type(call.input_type) not in _GOOGLE_TASKS:
        raise invalid_request(
            "input_type is not a task type Google accepts", "unsupported_input_type"
        )


class GeminiEmbeddingMapping(EmbeddingMapping):
    """``POST /v1beta/models/{model}:batchEmbedContents``: one request entry per input, at
    most 100 a request; the key travels in ``x-goog-api-key``."""

    endpoint = GEMINI_EMBEDDINGS

    def check(self, call: EmbedCall) -> None:
        _check_task(call)

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        task = _task_type(call.input_type)
        requests = []
        for text in inputs:
            entry: dict[str, Any] = {
                "model": f"models/{self.model}",
                "content": {"parts": [{"text": text}]},
            }
            if task is not None:
                entry["taskType"] = task
            if call.dimensions is not None:
                entry["outputDimensionality"] = call.dimensions
            requests.append(entry)
        return with_extras({"requests": requests}, call.extras)


class VertexEmbeddingMapping(EmbeddingMapping):
    """``POST …/publishers/google/models/{model}:predict``: ``{instances: [{content,
    task_type}], parameters: {autoTruncate: false, outputDimensionality}}``. With a project,
    the route names it and its location, and the key is an OAuth access token sent as a bearer
    token; without one, Vertex AI express mode: the route names neither, and the key is an API
    key sent in ``x-goog-api-key``."""

    endpoint = VERTEX_EMBEDDINGS

    def __init__(self, *, project: str | None, location: str | None, **common: Any) -> None:
        if project is None:
            if location is not None:
                raise ValueError(
                    "VertexEmbeddings takes location=... with project=...; express mode "
                    "(an API key, no project) has no location"
                )
            self.endpoint = VERTEX_EXPRESS_EMBEDDINGS
        elif type(project) is not str or not project:
            raise ValueError(
                "VertexEmbeddings needs project=... (the Google Cloud project id), or no "
                "project at all for Vertex AI express mode"
            )
        self.project = project
        self.location = location or _DEFAULT_LOCATION
        super().__init__(**common)

    def route_values(self) -> dict[str, str]:
        if self.project is None:
            return {"model": self.model}
        return {"model": self.model, "project": self.project, "location": self.location}

    def default_chunk_size(self) -> int | None:
        """``gemini-embedding-*`` takes one instance a request on ``:predict``; the
        ``text-embedding-*`` models up to 250."""
        return 1 if self.model.startswith("gemini-embedding") else 250

    def check(self, call: EmbedCall) -> None:
        _check_task(call)

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        task = _task_type(call.input_type)
        instances = [
            {"content": text, "task_type": task} if task else {"content": text} for text in inputs
        ]
        parameters: dict[str, Any] = {"autoTruncate": False}
        if call.dimensions is not None:
            parameters["outputDimensionality"] = call.dimensions
        return with_extras({"instances": instances, "parameters": parameters}, call.extras)


class VertexRankMapping(RerankMapping):
    """``POST …/rankingConfigs/{config}:rank``: records get ids ``"0"``, ``"1"``, ... and the
    results name them so; at most 200 records a request."""

    endpoint = VERTEX_RANK

    def __init__(self, *, project: str, location: str, config: str, **common: Any) -> None:
        if type(project) is not str or not project:
            raise ValueError("VertexReranker needs project=... (the Google Cloud project id)")
        self.project = project
        self.location = location
        self.config = config
        super().__init__(**common)

    def route_values(self) -> dict[str, str]:
        return {"project": self.project, "location": self.location, "config": self.config}

    def default_chunk_size(self) -> int | None:
        return 200

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "query": call.query,
            "records": [
                {"id": str(position), "content": text} for position, text in enumerate(documents)
            ],
            "ignoreRecordDetailsInResponse": not call.wants_documents,
        }
        if call.top_k is not None:
            body["topN"] = call.top_k
        return with_extras(body, call.extras)

    def document_ids(self, document_count: int) -> list[object] | None:
        return [str(position) for position in range(document_count)]


class GeminiEmbeddings(EmbeddingProvider):
    """Gemini API embeddings (key: ``GEMINI_API_KEY``); inputs over 100 (or ``chunk_size``)
    are chunked and stitched. ``input_type`` is ours (``query``, ``document``,
    ``classification``, ``clustering``) or a Gemini task type (``SEMANTIC_SIMILARITY``)."""

    mapping_class = GeminiEmbeddingMapping


class VertexEmbeddings(EmbeddingProvider):
    """Vertex AI text embeddings for ``project`` in ``location`` (default ``us-central1``;
    ``global`` is the global endpoint; ``base_url`` defaults to that location's host), with
    ``api_key`` an OAuth access token (for example ``gcloud auth print-access-token``).

    Without ``project``: Vertex AI express mode, on ``aiplatform.googleapis.com`` with no
    project or location in the path, and ``api_key`` an express-mode API key (else
    ``GOOGLE_API_KEY``)."""

    mapping_class = VertexEmbeddingMapping

    def __init__(
        self,
        model: str,
        *,
        project: str | None = None,
        location: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._place = {"project": project, "location": location}
        if options.get("base_url") is None and project is not None:
            options["base_url"] = _vertex_origin(location or _DEFAULT_LOCATION)
        super().__init__(model, **options)

    def _mapping_options(self) -> dict[str, Any]:
        return self._place


class VertexReranker(RerankProvider):
    """The Vertex AI ranking API (``semantic-ranker-default-004`` and kin) for ``project``;
    ``config`` is the ranking config (``default_ranking_config``). ``api_key`` is an OAuth
    access token. It reports no usage: the ledger estimates a query per 100 records."""

    mapping_class = VertexRankMapping

    def __init__(
        self,
        model: str = "semantic-ranker-default@latest",
        *,
        project: str,
        location: str = "global",
        config: str = "default_ranking_config",
        **options: Unpack[ClientOptions],
    ) -> None:
        self._place = {"project": project, "location": location, "config": config}
        super().__init__(model, **options)

    def _mapping_options(self) -> dict[str, Any]:
        return self._place


def _vertex_origin(location: str) -> str:
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"
