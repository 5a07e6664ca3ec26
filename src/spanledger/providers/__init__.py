"""Provider wire mappings: a sans-I/O core per vendor, driven over httpx (sync and async).

Each call emits exactly one event to the current recorder, success or failure.
"""

from spanledger.providers._provider import EmbeddingProvider, RerankProvider
from spanledger.providers.cohere import CohereEmbeddings, CohereReranker
from spanledger.providers.jina import JinaEmbeddings, JinaReranker
from spanledger.providers.openai import OpenAIEmbeddings
from spanledger.providers.tei import TEIEmbeddings, TEIReranker
from spanledger.providers.voyage import VoyageEmbeddings, VoyageReranker

__all__ = [
    "CohereEmbeddings",
    "CohereReranker",
    "EmbeddingProvider",
    "JinaEmbeddings",
    "JinaReranker",
    "OpenAIEmbeddings",
    "RerankProvider",
    "TEIEmbeddings",
    "TEIReranker",
    "VoyageEmbeddings",
    "VoyageReranker",
]
