"""LangChain's and LlamaIndex's wrappers record through the model they hold: one event per
underlying call, none doubled, under the process-wide switch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger import EmbeddingEvent, RerankEvent

from .conftest import Tape

TEXTS = ["a tick is a small arachnid", "ticks feed on blood", "the clock ticks"]
QUERY = "what is a tick"


@pytest.fixture
def switched(tape: Tape) -> Tape:
    spanledger.instrument(sdks=["sentence_transformers"])
    return tape


def _usage_counted(events: list[Any]) -> bool:
    return all(e.usage is not None and e.usage_source == "tokenizer" for e in events)


def test_langchain_huggingface_embeddings(minilm_path: Path, switched: Tape) -> None:
    embeddings_module = pytest.importorskip("langchain_huggingface")
    embeddings = embeddings_module.HuggingFaceEmbeddings(
        model_name=str(minilm_path), model_kwargs={"device": "cpu"}
    )
    vectors = embeddings.embed_documents(TEXTS)
    embeddings.embed_query(QUERY)
    assert len(vectors) == 3
    assert [type(e) for e in switched.events] == [EmbeddingEvent, EmbeddingEvent]
    assert [e.input_count for e in switched.events] == [3, 1]
    assert _usage_counted(switched.events)


def test_langchain_cross_encoder_reranker(minilm_path: Path, switched: Tape) -> None:
    cross_encoders = pytest.importorskip("langchain_community.cross_encoders")
    compressors = pytest.importorskip("langchain_classic.retrievers.document_compressors")
    documents_module = pytest.importorskip("langchain_core.documents")
    model = cross_encoders.HuggingFaceCrossEncoder(
        model_name=str(minilm_path), model_kwargs={"device": "cpu"}
    )
    reranker = compressors.CrossEncoderReranker(model=model, top_n=2)
    documents = [documents_module.Document(page_content=text) for text in TEXTS]
    kept = reranker.compress_documents(documents, QUERY)
    assert len(kept) == 2
    (event,) = switched.events
    assert isinstance(event, RerankEvent)
    assert event.document_count == 3
    assert event.query_length == len(QUERY)
    assert _usage_counted(switched.events)


def test_llama_index_huggingface_embedding(minilm_path: Path, switched: Tape) -> None:
    huggingface = pytest.importorskip("llama_index.embeddings.huggingface")
    model = huggingface.HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu")
    vectors = model.get_text_embedding_batch(TEXTS)
    model.get_query_embedding(QUERY)
    assert len(vectors) == 3
    assert [e.input_count for e in switched.events] == [3, 1]
    assert _usage_counted(switched.events)


def test_llama_index_sentence_transformer_rerank(minilm_path: Path, switched: Tape) -> None:
    postprocessor = pytest.importorskip("llama_index.core.postprocessor")
    schema = pytest.importorskip("llama_index.core.schema")
    reranker = postprocessor.SentenceTransformerRerank(
        model=str(minilm_path), top_n=2, device="cpu"
    )
    nodes = [schema.NodeWithScore(node=schema.TextNode(text=text)) for text in TEXTS]
    kept = reranker.postprocess_nodes(nodes, query_str=QUERY)
    assert len(kept) == 2
    (event,) = switched.events
    assert isinstance(event, RerankEvent)
    assert event.document_count == 3
    assert _usage_counted(switched.events)
