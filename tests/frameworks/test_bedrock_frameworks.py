"""The frameworks' Bedrock components under the process-wide switch, against the loopback
stand-in with real SigV4-signed requests: each HTTP call is exactly one event, its figures are
what the stand-in sent, the framework's result is what it is with the switch off, and no input
text or key reaches an event.

LangChain's ``BedrockEmbeddings`` and LlamaIndex's ``BedrockEmbedding`` build their boto3
``bedrock-runtime`` client inside (after the switch, so the switch's creation hook catches it);
LangChain's ``BedrockRerank`` takes a ``bedrock-agent-runtime`` client made after the switch
(its own ignores any endpoint setting). LlamaIndex has no endpoint setting: it is pointed at the
stand-in by ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``. LiteLLM signs its own httpx requests with
botocore's SigV4 and makes no boto3 client, so it is recorded by ``http=True``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download

import boto3  # type: ignore[import-untyped]
import litellm
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from langchain_aws import BedrockEmbeddings, BedrockRerank
from langchain_core.documents import Document
from llama_index.embeddings.bedrock import BedrockEmbedding  # type: ignore[import-untyped]
from pydantic import SecretStr

import spanledger
from spanledger import EmbeddingEvent, Event, RerankEvent
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

KEY_ID = "AKIDSENTINELKEY0042"
SECRET = "secret-SENTINEL-bedrock-7c3e"
SENTINEL = "SENTINEL-bedrock-fw-2b9d"
QUERY = f"what do ticks eat {SENTINEL}"
TEXTS = [
    f"ticks feed on the blood of mammals {SENTINEL}",
    f"the clock ticks every second {SENTINEL}",
    f"deer carry ticks through the woods {SENTINEL}",
]
TITAN = "amazon.titan-embed-text-v2:0"
RERANK_ARN = "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"
PRIVATE = (SENTINEL, KEY_ID, SECRET)


@pytest.fixture(autouse=True)
def _credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials and region for whatever builds a client from the environment."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield
    spanledger.uninstrument()


def run(
    recording: Recording, work: Callable[[], Any], *, http: bool = False
) -> tuple[Any, list[Event]]:
    """``work``'s result with the switch on (``http``: other code's HTTP too), and the events
    it made, one per HTTP call, each Bedrock's and private; checked against the same work with
    the switch off."""
    result, events = recording.run(
        work, lambda: spanledger.instrument(http=http), comparable=_comparable
    )
    assert all(event.provider == "aws.bedrock" for event in events)
    return result, events


def _comparable(result: Any) -> Any:
    if isinstance(result, list):
        return [_comparable(item) for item in result]
    if isinstance(result, Document):
        return (result.page_content, result.metadata)
    if hasattr(result, "data"):  # LiteLLM's embedding response
        return [item["embedding"] for item in result.data]
    if hasattr(result, "results"):  # LiteLLM's rerank response
        return [(item["index"], item["relevance_score"]) for item in result.results]
    return result


def embedding_events(events: list[Event]) -> list[EmbeddingEvent]:
    found = [event for event in events if isinstance(event, EmbeddingEvent)]
    assert len(found) == len(events)
    return found


def test_langchain_bedrock_embeddings_titan(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:  # made inside the switch, as an application would at start-up
        embedder = BedrockEmbeddings(
            model_id=TITAN,
            endpoint_url=standin.base_url("aws.bedrock"),
            region_name="us-east-1",
        )
        return embedder.embed_documents(TEXTS)

    vectors, events = run(recording, work)
    assert len(vectors) == len(TEXTS)
    found = embedding_events(events)
    assert len(found) == len(TEXTS)  # LangChain sends one InvokeModel per Titan text
    assert [event.usage.input_tokens for event in found if event.usage] == [
        tokens(text) for text in TEXTS
    ]
    assert {event.model for event in found} == {TITAN}


def test_langchain_bedrock_embeddings_cohere(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        embedder = BedrockEmbeddings(
            model_id="cohere.embed-english-v3",
            endpoint_url=standin.base_url("aws.bedrock"),
            region_name="us-east-1",
        )
        return embedder.embed_documents(TEXTS)

    vectors, events = run(recording, work)
    assert len(vectors) == len(TEXTS)
    [event] = embedding_events(events)
    assert event.input_count == len(TEXTS)
    assert event.usage is not None
    assert event.usage.input_tokens == sum(tokens(text) for text in TEXTS)  # from the header


def test_langchain_bedrock_rerank(standin: StandIn, recording: Recording) -> None:
    documents = [Document(page_content=text, metadata={"n": i}) for i, text in enumerate(TEXTS)]

    def work() -> Any:
        agent = boto3.client(
            "bedrock-agent-runtime",
            endpoint_url=standin.base_url("aws.bedrock"),
            config=Config(retries={"total_max_attempts": 1}),
        )
        reranker = BedrockRerank(
            model_arn=RERANK_ARN,
            client=agent,
            region_name="us-east-1",
            aws_access_key_id=SecretStr(KEY_ID),
            aws_secret_access_key=SecretStr(SECRET),
            top_n=2,
        )
        return reranker.compress_documents(documents, QUERY)

    ranked, events = run(recording, work)
    assert len(ranked) == 2
    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.model == "amazon.rerank-v1:0"
    assert event.usage is None  # Bedrock's rerank reports none
    assert (event.document_count, event.top_k, event.result_count) == (3, 2, 2)


def test_llamaindex_bedrock_embedding(
    standin: StandIn, recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", standin.base_url("aws.bedrock"))

    def work() -> Any:
        embedder = BedrockEmbedding(model_name=TITAN, region_name="us-east-1", max_retries=1)
        return embedder.get_text_embedding_batch(TEXTS)

    vectors, events = run(recording, work)
    assert len(vectors) == len(TEXTS)
    found = embedding_events(events)
    assert len(found) == len(TEXTS)
    assert sorted(e.usage.input_tokens or 0 for e in found if e.usage) == sorted(
        tokens(text) for text in TEXTS
    )


def test_litellm_bedrock_embedding(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model=f"bedrock/{TITAN}",
            input=TEXTS,
            api_base=standin.base_url("aws.bedrock"),
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            aws_region_name="us-east-1",
        )

    result, events = run(recording, work, http=True)
    assert len(result.data) == len(TEXTS)
    found = embedding_events(events)
    assert len(found) == len(TEXTS)  # one POST per Titan text
    assert sorted(e.usage.input_tokens or 0 for e in found if e.usage) == sorted(
        tokens(text) for text in TEXTS
    )
    assert {event.model for event in found} == {TITAN}


def test_litellm_bedrock_rerank(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.rerank(
            model=f"bedrock/{RERANK_ARN}",
            query=QUERY,
            documents=TEXTS,
            top_n=2,
            api_base=standin.base_url("aws.bedrock"),
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            aws_region_name="us-east-1",
        )

    result, events = run(recording, work, http=True)
    assert len(result.results) == 2
    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.model == "amazon.rerank-v1:0"
    assert event.usage is None
    assert (event.document_count, event.result_count) == (3, 2)
