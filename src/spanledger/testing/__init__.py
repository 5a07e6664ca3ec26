"""A loopback server that speaks the vendors' embedding and rerank wire formats, for tests.

``StandIn`` answers the OpenAI, Cohere, Jina, Hugging Face TEI and Voyage endpoints, and those
of AWS Bedrock, the Gemini API, Vertex AI (regional, global and express mode), Azure OpenAI,
Mistral and Ollama, on 127.0.0.1, so
code that calls them (through ``spanledger.providers``, a vendor SDK or plain HTTP) runs in a
test with no network and no keys, and the events spanledger recorded can be asserted on. It
answers chat too, with scripted answers that cite or do not, so a whole retrieval-augmented
turn runs offline: OpenAI's chat completions and Responses (``openai_chat_completions``,
``openai_responses``), Anthropic's Messages (``anthropic_messages``, citing the documents
passed with citations enabled by ``document_index``) and Cohere's chat (``cohere_chat``,
citing documents by id). It is
not a model: vectors come from a hash of each text (``standin_vector``) and rerank scores from
word overlap, so every answer is deterministic; each answer has the keys, figure placement and
headers the real service was recorded sending.

Each vendor lives under its own path prefix; ``server.base_url(vendor)`` is the origin to give
a provider (SDKs take the same origin plus their version path, e.g. ``/v1`` for OpenAI and
Voyage; boto3 takes it as ``endpoint_url``, ``openai.AzureOpenAI`` as ``azure_endpoint``).
Vendors are the names in ``VENDORS``; vectors have ``DEFAULT_DIMENSIONS`` values unless the
request asks for others, and TEI's routes refuse more than ``TEI_MAX_BATCH`` inputs a request
with a 413, as TEI does. Every endpoint reports usage by default (a token per four UTF-8 bytes,
a Cohere search unit per 100 documents), where the vendor reports any: TEI, Bedrock's rerank
routes, Vertex's ranking API and Ollama's legacy ``/api/embeddings`` report none, as the real
ones. To script an answer, mount a route built by a vendor function (``openai_embeddings``,
``cohere_rerank``, ``bedrock_titan_embeddings``, ...) and shaped by its methods (``failing``,
``malformed``, ``slow``, ``dropped``)::

    import pytest

    import spanledger
    from spanledger.providers import CohereReranker, OpenAIEmbeddings
    from spanledger.testing import StandIn, cohere_rerank, openai_embeddings


    def test_search_records_usage_and_rate_limits() -> None:
        events: list[spanledger.Event] = []
        with StandIn() as server, spanledger.use(spanledger.Recorder([events.append])):
            server.route(openai_embeddings(tokens=7))
            server.route(cohere_rerank().failing(429, retry_after=3), times=1)
            with OpenAIEmbeddings("text-embedding-3-small", base_url=server.base_url("openai"),
                                  api_key="test") as embedder:
                embedder.embed(["a passage"])
            with CohereReranker("rerank-v3.5", base_url=server.base_url("cohere"),
                                api_key="test") as reranker:
                with pytest.raises(spanledger.ProviderError):
                    reranker.rerank("a question", ["a passage", "another"])
                reranker.rerank("a question", ["a passage", "another"])  # the 429 was used up
        embedded, limited, reranked = events
        assert isinstance(embedded, spanledger.EmbeddingEvent)
        assert embedded.usage == spanledger.EmbeddingUsage(input_tokens=7)
        assert isinstance(limited, spanledger.RerankFailedEvent)
        assert (limited.status_code, limited.retry_after) == (429, 3.0)
        assert isinstance(reranked, spanledger.RerankEvent)
        assert len(server.requests) == 3

A route's path may be a template: ``{name}`` matches one path segment (or part of one, as in
``/v1beta/models/{model}:embedContent``), ``{name+}`` one or more segments; paths are matched
as sent (percent-encoded), and failing that, decoded. What the placeholders matched, decoded,
is the request's ``params``. Several routes may share a path when each ``selects`` the requests
it answers by a body key: Bedrock's ``/model/{model+}/invoke`` is Titan's for ``inputText``,
Cohere embed's for ``texts``, Nova's for ``singleEmbeddingParams`` and Cohere rerank's for
``query``; a body none of them reads is answered 400, as Bedrock does. Where several mounted
routes would answer, the one mounted last does.

The call's model is what the URL names where it names one (Bedrock, Gemini, Vertex, an Azure
deployment), else the body's. Azure answers with the model behind the deployment: a
deployment (or ``/openai/v1`` body ``model``) named after an OpenAI embedding model
(``text-embedding-3-large``) answers that model, except ``text-embedding-ada-002``, which Azure
names ``ada``; any other name answers ``text-embedding-3-small`` (``response_model=`` on the
route sets it). Bedrock model ids are read as the base model they name (``us.`` profiles and
foundation-model ARNs; ``cohere.embed-v4`` answers by type, a Titan ``-v1`` model without
``embeddingsByType``).

Failures can also be asked for by configuration alone, through the model name (or
``base_url(vendor, behaviour)``, which TEI needs since its wire carries no model):
``fail-<status>`` answers with that status and the vendor's error body and headers
(``fail-429`` adds ``Retry-After: 2``), ``slow-<ms>`` answers that many milliseconds late,
``reset`` drops the connection, ``usage-malformed`` reports a garbage usage figure (``"abc"``,
in a header where the vendor reports one there) and ``usage-missing`` none; on Bedrock,
``not-ready`` answers 429 ``ModelNotReadyException``. These names win over a mounted route.

The server keeps every request it received (``server.requests``) for assertions, in memory
only: it writes nothing to any log, and a ``RecordedRequest``'s ``repr`` leaves out its
headers, query string and body, which carry keys and caller text.

Every name above imports from here. Each vendor's route functions live in a module of its own
(``spanledger.testing.openai``, ``spanledger.testing.bedrock``, ``spanledger.testing.google``
for the Gemini API and Vertex AI, ...), beside its ``ROUTES``: the routes a fresh server
answers for it.
"""

from spanledger.testing.answers import DEFAULT_DIMENSIONS, standin_vector
from spanledger.testing.anthropic import anthropic_messages
from spanledger.testing.azure import azure_embeddings, azure_v1_embeddings
from spanledger.testing.bedrock import (
    bedrock_cohere_embeddings,
    bedrock_cohere_rerank,
    bedrock_nova_embeddings,
    bedrock_rerank,
    bedrock_titan_embeddings,
)
from spanledger.testing.chat import openai_chat_completions, openai_responses
from spanledger.testing.chat_cohere import cohere_chat
from spanledger.testing.cohere import (
    cohere_embeddings,
    cohere_rerank,
    cohere_v1_embeddings,
    cohere_v1_rerank,
)
from spanledger.testing.google import (
    gemini_embed_content,
    gemini_embeddings,
    vertex_batch_embed_contents,
    vertex_embed_content,
    vertex_embeddings,
    vertex_express_embed_content,
    vertex_express_embeddings,
    vertex_rank,
)
from spanledger.testing.jina import jina_embeddings, jina_rerank
from spanledger.testing.mistral import mistral_embeddings
from spanledger.testing.ollama import ollama_embed, ollama_embeddings, ollama_openai_embeddings
from spanledger.testing.openai import openai_embeddings
from spanledger.testing.routes import VENDORS, RecordedRequest, Reply, Route
from spanledger.testing.server import StandIn
from spanledger.testing.tei import TEI_MAX_BATCH, tei_embeddings, tei_rerank
from spanledger.testing.voyage import voyage_embeddings, voyage_rerank

__all__ = [
    "DEFAULT_DIMENSIONS",
    "TEI_MAX_BATCH",
    "VENDORS",
    "RecordedRequest",
    "Reply",
    "Route",
    "StandIn",
    "anthropic_messages",
    "azure_embeddings",
    "azure_v1_embeddings",
    "bedrock_cohere_embeddings",
    "bedrock_cohere_rerank",
    "bedrock_nova_embeddings",
    "bedrock_rerank",
    "bedrock_titan_embeddings",
    "cohere_chat",
    "cohere_embeddings",
    "cohere_rerank",
    "cohere_v1_embeddings",
    "cohere_v1_rerank",
    "gemini_embed_content",
    "gemini_embeddings",
    "jina_embeddings",
    "jina_rerank",
    "mistral_embeddings",
    "ollama_embed",
    "ollama_embeddings",
    "ollama_openai_embeddings",
    "openai_chat_completions",
    "openai_embeddings",
    "openai_responses",
    "standin_vector",
    "tei_embeddings",
    "tei_rerank",
    "vertex_batch_embed_contents",
    "vertex_embed_content",
    "vertex_embeddings",
    "vertex_express_embed_content",
    "vertex_express_embeddings",
    "vertex_rank",
    "voyage_embeddings",
    "voyage_rerank",
]
