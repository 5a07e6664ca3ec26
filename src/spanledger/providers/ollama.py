"""Ollama: the native ``/api/embed`` of a local (or your own) Ollama server.

Usage is ``prompt_eval_count``; a local model is billed by nobody, so its cost line says so
unless your price table gives it a rate of your own.
"""

from __future__ import annotations

import os
from typing import Any, Unpack

from spanledger.providers._calls import EmbedCall, with_extras
from spanledger.providers._mapping import EmbeddingMapping
from spanledger.providers._provider import ClientOptions, EmbeddingProvider
from spanledger.wire.endpoints import OLLAMA_EMBED

__all__ = ["OllamaEmbeddingMapping", "OllamaEmbeddings"]


class OllamaEmbeddingMapping(EmbeddingMapping):
    """``POST /api/embed``: ``{model, input, truncate: false, dimensions?}``; an over-length
    input fails instead of being embedded in part. ``input_type`` is a no-op."""

    endpoint = OLLAMA_EMBED

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": inputs, "truncate": False}
        if call.dimensions is not None:
            body["dimensions"] = call.dimensions
        return with_extras(body, call.extras)


class OllamaEmbeddings(EmbeddingProvider):
    """Embeddings from an Ollama server: ``base_url`` else ``OLLAMA_HOST`` else
    ``http://localhost:11434``; no key (one given is sent as a bearer token, for a proxy)."""

    mapping_class = OllamaEmbeddingMapping

    def __init__(self, model: str, **options: Unpack[ClientOptions]) -> None:
        if options.get("base_url") is None:
            options["base_url"] = _ollama_host()
        super().__init__(model, **options)


def _ollama_host() -> str | None:
    """``OLLAMA_HOST`` as the ollama SDK reads it (``host:port``, scheme optional)."""
    host = os.environ.get("OLLAMA_HOST", "").strip()
    if not host:
        return None
    return host if "://" in host else f"http://{host}"
