"""The provider ids spanledger records, and the other names people and frameworks give them.

Events carry one id per provider (``openai``, ``aws.bedrock``, ``mistral_ai``, ...), and a
price table prices an event only when its entry names that same id: a table that says
``open-ai`` or ``bedrock`` prices nothing. The ids live here so the price table can refuse a
name that is none of them (with the nearest one), and so a model call a framework names in its
own words (LangChain's ``amazon_bedrock``, LlamaIndex's ``mistralai``) is priced under the id
the table uses.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = ["ALIASES", "PROVIDER_IDS", "canonical", "nearest"]

PROVIDER_IDS = frozenset(
    {
        "openai",
        "azure.ai.openai",
        "cohere",
        "jina",
        "tei",
        "voyageai",
        "aws.bedrock",
        "gcp.gemini",
        "gcp.vertex_ai",
        "mistral_ai",
        "ollama",
        "sentence_transformers",
        "flashrank",
        "anthropic",
        "rank_bm25",
        "local",
    }
)
"""Every provider id an event or a model call spanledger reads carries: the embedding and
rerank vendors, the in-process libraries, the chat-only providers, and a chain's own steps
(``rank_bm25``, and ``local`` for a function)."""

ALIASES: Mapping[str, str] = {
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azureopenai": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "amazon_bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "bedrockconverse": "aws.bedrock",
    "aws": "aws.bedrock",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "google_genai": "gcp.gemini",
    "googlegenai": "gcp.gemini",
    "googleai": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "vertexai": "gcp.vertex_ai",
    "vertex_ai": "gcp.vertex_ai",
    "google_vertexai": "gcp.vertex_ai",
    "mistral": "mistral_ai",
    "mistralai": "mistral_ai",
    "voyage": "voyageai",
    "voyage_ai": "voyageai",
    "jinaai": "jina",
    "jina_ai": "jina",
    "huggingface_tei": "tei",
    "text_embeddings_inference": "tei",
    "sentence-transformers": "sentence_transformers",
    "sentencetransformers": "sentence_transformers",
}
"""Other names for the ids: frameworks' own provider names and common spellings."""


def canonical(name: str) -> str | None:
    """The provider id ``name`` is (itself, or the id it is another name for), else ``None``."""
    if name in PROVIDER_IDS:
        return name
    folded = name.strip().lower().replace("-", "_").replace(" ", "_")
    if folded in PROVIDER_IDS:
        return folded
    return ALIASES.get(folded)


def nearest(name: str, known: Iterable[str] = PROVIDER_IDS) -> str | None:
    """The id ``name`` was probably meant to be: the one it is another name for, else the
    closest spelling, else ``None``."""
    same = canonical(name)
    if same is not None:
        return same
    folded = name.strip().lower()
    close = difflib.get_close_matches(folded, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None
