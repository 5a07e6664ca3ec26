"""What the LlamaIndex attribution suites share, in ``.venv`` and in ``.venv-older``: a
knowledge base indexed over the stand-in's OpenAI embeddings, a small LLM of the test's own that
posts each prompt to the stand-in's chat route (LlamaIndex's LLM callbacks and events fire as
for a real one), a sink keeping reports and events, and the share counted by hand.

Every document, question and answer carries ``SENTINEL``; nothing of it may leave the process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CitationBlock,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
    TextBlock,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.embeddings.openai import OpenAIEmbedding  # type: ignore[import-untyped]

import spanledger
from spanledger import Event
from spanledger.attribution import RequestReport
from spanledger.events import AttributionRecord
from spanledger.testing import StandIn

SENTINEL = "SENTINEL-llamaindex-8e41"
API_KEY = "sk-llamaindex-test-5d0c"
PRIVATE = (SENTINEL, API_KEY)
QUESTION = f"What do ticks feed on, and where do they wait? {SENTINEL}"
DOCUMENTS = {
    "kb-0": f"Ticks feed on the blood of deer and mice. They wait in tall grass for a host. "
    f"Marker {SENTINEL} zero.",
    "kb-1": f"Clocks tick every second of the day. Some clocks chime on the hour. "
    f"Marker {SENTINEL} one.",
    "kb-2": f"Deer carry ticks through the woods in spring and summer. Hikers pick them up "
    f"on trails. Marker {SENTINEL} two.",
    "kb-3": f"Lyme disease spreads through tick bites. Early removal lowers the risk a lot. "
    f"Marker {SENTINEL} three.",
    "kb-4": f"Ticks survive the winter under leaf litter. They become active again once "
    f"temperatures rise above freezing. Marker {SENTINEL} four.",
}
CHAT_ROUTE = "/chat/completions"


def accounting_tokens(text: str) -> int:
    """``ceil(utf8 bytes / 4)``, counted here apart from the library."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def share(cited: Sequence[str], rendered: Sequence[str]) -> float:
    """The cited token share counted by hand: cited frames' tokens over rendered frames'."""
    return sum(map(accounting_tokens, cited)) / sum(map(accounting_tokens, rendered))


def nodes(labelled: bool = False) -> list[TextNode]:
    """The knowledge base as nodes named ``kb-<n>``, each with a metadata line LlamaIndex puts
    above it in a prompt; ``labelled``: rendered as ``Source <n+1>:`` through the node's own
    templates instead."""
    made = []
    for number, (node_id, text) in enumerate(DOCUMENTS.items()):
        if labelled:
            made.append(
                TextNode(
                    text=text,
                    id_=node_id,
                    metadata={"n": number + 1},
                    metadata_template="{value}",
                    text_template="Source {metadata_str}:\n{content}",
                )
            )
        else:
            made.append(TextNode(text=text, id_=node_id, metadata={"file_name": f"{node_id}.txt"}))
    return made


def embedding(standin: StandIn) -> Any:
    return OpenAIEmbedding(
        model="text-embedding-3-small",
        api_key=API_KEY,
        api_base=standin.base_url("openai") + "/v1",
    )


def index_of(standin: StandIn, *, labelled: bool = False) -> VectorStoreIndex:
    """The knowledge base in a vector index over the stand-in's OpenAI embeddings."""
    return VectorStoreIndex(nodes(labelled), embed_model=embedding(standin))


def ids(found: Sequence[NodeWithScore]) -> list[str]:
    return [item.node.node_id for item in found]


class StandInLLM(CustomLLM):
    """A small LLM of the test's own: each prompt goes to the stand-in's OpenAI chat route with
    httpx. As a chat model (``chat_model``) it answers chats directly and turns each of
    ``citing`` into a ``CitationBlock`` of its answer, as a provider with citations does."""

    base_url: str
    model: str = "gpt-4o-mini"
    chat_model: bool = False
    window: int = 3900
    citing: list[str] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name=self.model,
            context_window=self.window,
            num_output=256,
            is_chat_model=self.chat_model,
        )

    def _post(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        response = httpx.post(
            self.base_url + CHAT_ROUTE,
            json={"model": self.model, "messages": messages},
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=30,
        )
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        body = self._post([{"role": "user", "content": prompt}])
        return CompletionResponse(text=body["choices"][0]["message"]["content"], raw=body)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        yield self.complete(prompt, formatted=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        body = self._post(
            [{"role": message.role.value, "content": message.content or ""} for message in messages]
        )
        blocks: list[Any] = [TextBlock(text=body["choices"][0]["message"]["content"])]
        blocks += [
            CitationBlock(cited_content=text, source="kb", title="", additional_location_info={})
            for text in self.citing
        ]
        message = ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)
        return ChatResponse(message=message, raw=body)


class KeepFirst(BaseNodePostprocessor):
    """A node postprocessor of the test's own that keeps the first ``keep`` nodes (LlamaIndex
    spans its ``_postprocess_nodes`` as any other's; it raises no rerank event)."""

    keep: int = 2

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return nodes[: self.keep]


def labels_in(prompt: str) -> list[str]:
    """The ``Source <n>:`` labels of a prompt's context, in order (a citation template's
    few-shot example, before the first ``------`` line, left out)."""
    _, rule, context = prompt.partition("\n------\n")
    return re.findall(r"^Source (\d+):$", context if rule else prompt, re.MULTILINE)


def answering(*picks: int | str) -> Callable[[str], str]:
    """A scripted answer citing, for each of ``picks``, the label at that position among the
    prompt's labels (an int) or that label itself (a str)."""

    def answer(prompt: str) -> str:
        found = labels_in(prompt)
        cited = [found[pick] if isinstance(pick, int) else pick for pick in picks]
        return " ".join(f"Ticks drink blood [{label}]." for label in cited) + f" {SENTINEL}"

    return answer


def plain_answer(prompt: str) -> str:
    return f"Ticks drink blood and wait in tall grass. {SENTINEL}"


def refining(first: Callable[[str], str]) -> Callable[[str], str]:
    """A scripted answer: ``first`` for the first call, then the existing answer a refine
    prompt carries, unchanged (as a model does when the new context adds nothing)."""

    def answer(prompt: str) -> str:
        carried = re.search(r"existing answer: (.*?" + re.escape(SENTINEL) + ")", prompt, re.S)
        return carried.group(1) if carried else first(prompt)

    return answer


def prompts(standin: StandIn) -> list[str]:
    """The prompts the stand-in's chat route received, in order (messages joined)."""
    return [
        "\n".join(message["content"] for message in request.json()["messages"])
        for request in standin.requests
        if request.path.endswith(CHAT_ROUTE)
    ]


def chunk_sources(source_nodes: Sequence[NodeWithScore]) -> dict[str, str]:
    """A ``CitationQueryEngine`` response's chunks (``Source N:`` and a piece of a node), as
    label to the id of the document whose text holds the piece."""
    found: dict[str, str] = {}
    for item in source_nodes:
        label, _, chunk = item.node.get_content().partition(":\n")
        [node_id] = [key for key, text in DOCUMENTS.items() if chunk.strip() in text]
        found[label.removeprefix("Source ")] = node_id
    return found


def sets(report: RequestReport) -> dict[str, set[str]]:
    """The request's served, selected, rendered and cited frames, by node id."""
    uses = report.attribution.uses
    return {
        "served": {use.frame.frame_id for use in uses},
        "selected": {use.frame.frame_id for use in uses if use.selected},
        "rendered": {use.frame.frame_id for use in uses if use.rendered},
        "cited": {use.frame.frame_id for use in uses if use.cited},
    }


@contextmanager
def switched_on(*sdks: str) -> Iterator[Kept]:
    """The switch on for OpenAI (the embeddings) and LlamaIndex, a recorder keeping what it
    is handed; everything uninstrumented after."""
    kept = Kept()
    spanledger.instrument(sdks=["openai", "llama_index.core", *sdks])
    try:
        with spanledger.use(spanledger.Recorder([kept])):
            yield kept
    finally:
        spanledger.uninstrument()


@dataclass
class Kept:
    """A sink keeping every event and every request's attribution record."""

    events: list[Event] = field(default_factory=list)
    records: list[AttributionRecord] = field(default_factory=list)

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def attribution(self, record: AttributionRecord) -> None:
        self.records.append(record)

    def only_record(self) -> AttributionRecord:
        [record] = self.records
        return record


def texts(node_ids: Sequence[str]) -> list[str]:
    return [DOCUMENTS[node_id] for node_id in node_ids]
