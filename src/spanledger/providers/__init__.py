"""Provider wire mappings: a sans-I/O core per vendor, driven over httpx (sync and async).

Each call emits exactly one event to the current recorder, success or failure.
"""

from spanledger.providers._provider import ClientOptions, EmbeddingProvider, RerankProvider
from spanledger.providers.azure import AzureOpenAIEmbeddings
from spanledger.providers.cohere import CohereEmbeddings, CohereReranker
from spanledger.providers.google import GeminiEmbeddings, VertexEmbeddings, VertexReranker
from spanledger.providers.jina import JinaEmbeddings, JinaReranker
from spanledger.providers.mistral import MistralEmbeddings
from spanledger.providers.ollama import OllamaEmbeddings
from spanledger.providers.openai import OpenAIEmbeddings
from spanledger.providers.tei import TEIEmbeddings, TEIReranker
from spanledger.providers.voyage import VoyageEmbeddings, VoyageReranker

__all__ = [
    "AzureOpenAIEmbeddings",
    "ClientOptions",
    "CohereEmbeddings",
    "CohereReranker",
    "EmbeddingProvider",
    "GeminiEmbeddings",
    "JinaEmbeddings",
    "JinaReranker",
    "MistralEmbeddings",
    "OllamaEmbeddings",
    "OpenAIEmbeddings",
    "RerankProvider",
    "TEIEmbeddings",
    "TEIReranker",
    "VertexEmbeddings",
    "VertexReranker",
    "VoyageEmbeddings",
    "VoyageReranker",
]
