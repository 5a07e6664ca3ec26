"""What the Haystack attribution tests share: the RAG pipelines they run against the stand-in
(BM25 retriever, an optional ranker, a prompt builder labelling each document ``Document N:``,
a chat generator, the answer builder), the reports requests give at close, and an application
tracer that remembers what it was handed.

It imports only what Haystack 2.x and 3.x both have, so ``tests/older_sdks`` uses it too.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from haystack import Document, Pipeline
from haystack.components.builders import AnswerBuilder, PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.tracing.tracer import Span, Tracer
from haystack.utils import Secret

from spanledger.attribution import RequestReport, RequestScope
from spanledger.testing import StandIn

TEMPLATE = """Answer from the documents below and cite them as [n].
{% for doc in documents %}
Document {{ loop.index }}:
{{ doc.content }}
{% endfor %}
Question: {{ query }}"""

API_KEY = "sk-haystack-rig-7c21"

try:  # Haystack 2.x: the completion generator takes the prompt builder's text
    from haystack.components.generators import (  # type: ignore[attr-defined,unused-ignore]
        OpenAIGenerator as _Generator,
    )

    GENERATOR_TAKES_PROMPT = True
except ImportError:  # 3.x removed it: the chat generator takes a text as its messages
    from haystack.components.generators.chat import OpenAIChatGenerator as _Generator

    GENERATOR_TAKES_PROMPT = False


def generator(standin: StandIn, behaviour: str | None = None) -> Any:
    """OpenAI's generator on the stand-in (``behaviour``: ``slow-300`` answers late)."""
    return _Generator(
        model="gpt-4o-mini",
        api_key=Secret.from_token(API_KEY),
        api_base_url=standin.base_url("openai", behaviour) + "/v1",
    )


def tokens(text: str) -> int:
    """Accounting tokens of a text (a token per four UTF-8 bytes, up)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def documents(*texts: str) -> list[Document]:
    return [Document(content=text) for text in texts]


def rag_pipeline(
    standin: StandIn,
    docs: list[Document],
    *,
    ranker: Any = None,
    name: str = "ticks",
    behaviour: str | None = None,
) -> Pipeline:
    """BM25 over ``docs`` → (``ranker``) → prompt builder → OpenAI chat generator on the
    stand-in → answer builder reading ``[n]``."""
    store = InMemoryDocumentStore()
    store.write_documents(docs)
    pipe = Pipeline(metadata={"name": name})
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=len(docs)))
    pipe.add_component("prompt", PromptBuilder(TEMPLATE, required_variables=["query", "documents"]))
    pipe.add_component("llm", generator(standin, behaviour))
    pipe.add_component("answers", AnswerBuilder(reference_pattern=r"\[(\d+)\]"))
    source = "retriever.documents"
    if ranker is not None:
        pipe.add_component("ranker", ranker)
        pipe.connect("retriever.documents", "ranker.documents")
        source = "ranker.documents"
    pipe.connect(source, "prompt.documents")
    pipe.connect("prompt.prompt", "llm.prompt" if GENERATOR_TAKES_PROMPT else "llm.messages")
    pipe.connect("llm.replies", "answers.replies")
    pipe.connect(source, "answers.documents")
    return pipe


def inputs(question: str, *, ranker: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "retriever": {"query": question},
        "prompt": {"query": question},
        "answers": {"query": question},
    }
    if ranker:
        data["ranker"] = {"query": question}
    return data


def shown(result: dict[str, Any], *, ranker: bool = False) -> list[Document]:
    """The documents the prompt showed, in its order (run with ``include_outputs_from``)."""
    found: list[Document] = result["ranker" if ranker else "retriever"]["documents"]
    return found


@pytest.fixture
def reports(monkeypatch: pytest.MonkeyPatch) -> list[RequestReport]:
    """Every request report made during the test (a request that captured context makes one
    when it closes)."""
    found: list[RequestReport] = []
    real = RequestScope.report

    def keeping(scope: RequestScope, **options: Any) -> RequestReport:
        report = real(scope, **options)
        found.append(report)
        return report

    monkeypatch.setattr(RequestScope, "report", keeping)
    return found


@pytest.fixture(autouse=True)
def no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Haystack sends a telemetry event per pipeline run unless told not to."""
    from haystack.telemetry import _telemetry

    monkeypatch.setattr(_telemetry, "telemetry", None)


@dataclass
class AppSpan(Span):
    """A span of the application's own tracer: what it was handed."""

    name: str
    tags: dict[str, Any] = field(default_factory=dict)
    parent: AppSpan | None = None

    def set_tag(self, key: str, value: Any) -> None:
        self.tags[key] = value


class AppTracer(Tracer):
    """The application's tracer: keeps every span with its tags and its parent."""

    def __init__(self) -> None:
        self.spans: list[AppSpan] = []

    @contextlib.contextmanager
    def trace(
        self, operation_name: str, tags: dict[str, Any] | None = None, parent_span: Any = None
    ) -> Iterator[Span]:
        span = AppSpan(operation_name, dict(tags or {}), parent_span)
        self.spans.append(span)
        yield span

    def current_span(self) -> Span | None:
        return None

    def shape(self) -> list[tuple[str, list[str], int | None]]:
        """Each span's name, tag names and parent (by position), in order."""
        where = {id(span): n for n, span in enumerate(self.spans)}
        return [(span.name, sorted(span.tags), where.get(id(span.parent))) for span in self.spans]
