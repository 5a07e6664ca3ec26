"""The Haystack switch and what it reads: the tracer goes in when Haystack is imported (never
before), comes out on undo with the application's tracer back, and a failure leaves Haystack as
it was; components are classified by class name and sockets, and their values read by the rules
of ``spanledger.integrations.haystack.components``."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import cohere
import pytest
from haystack import Document
from haystack.dataclasses import ChatMessage, ToolCall, ToolCallResult
from haystack.tracing.tracer import NullTracer, ProxyTracer, disable_tracing
from haystack.tracing.tracer import tracer as haystack_tracer

import spanledger
from spanledger.instrumentation import SdkState, sdk_status
from spanledger.integrations.haystack import tracer as ledger_tracer
from spanledger.integrations.haystack.components import (
    Component,
    Role,
    documents_in,
    marked_texts,
    passages,
    prompt_parts,
    replies,
)
from spanledger.integrations.haystack.runs import request_name

BEFORE_IMPORT = """
import sys
import spanledger
spanledger.instrument(sdks=["haystack"])
assert "haystack" not in sys.modules
from haystack.tracing.tracer import ProxyTracer, tracer
from haystack.tracing.logging_tracer import LoggingTracer
print(type(tracer.actual_tracer).__name__, type(tracer.actual_tracer.wrapped).__name__)
from spanledger.instrumentation import instrumented_sdks
print(instrumented_sdks())
spanledger.uninstrument()
print(type(tracer.actual_tracer).__name__, type(tracer) is ProxyTracer)
spanledger.instrument(sdks=["haystack"])
spanledger.uninstrument()
"""


def test_the_tracer_goes_in_when_haystack_is_imported_and_out_on_undo() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_IMPORT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HAYSTACK_TELEMETRY_ENABLED": "False", "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "LedgerTracer NullTracer",
        "('haystack',)",
        "NullTracer True",
    ]


def test_undone_before_the_import_it_never_goes_in() -> None:
    code = (
        "import spanledger\n"
        "spanledger.instrument(sdks=['haystack'])\n"
        "spanledger.uninstrument()\n"
        "from haystack.tracing.tracer import tracer\n"
        "print(type(tracer.actual_tracer).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HAYSTACK_TELEMETRY_ENABLED": "False", "PATH": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "NullTracer"


def test_a_tracer_that_cannot_be_put_in_leaves_haystack_as_it_was(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    disable_tracing()

    def refusing(self: Any, wrapped: Any) -> None:
        raise RuntimeError("no")

    monkeypatch.setattr(ledger_tracer.LedgerTracer, "__init__", refusing)
    try:
        spanledger.instrument(sdks=["haystack"])
        assert isinstance(haystack_tracer.actual_tracer, NullTracer)
        assert type(haystack_tracer) is ProxyTracer
        status = sdk_status()["haystack"]
        assert status.state is SdkState.FAILED
        assert any(
            "library_not_patched" in r.getMessage() and "haystack-ai" in r.getMessage()
            for r in caplog.records
            if r.levelno == logging.WARNING
        )
    finally:
        spanledger.uninstrument()


def spec(*sockets: str) -> dict[str, Any]:
    return {socket: {"type": "list", "senders": []} for socket in sockets}


@pytest.mark.parametrize(
    ("kind", "inputs", "outputs", "role"),
    [
        ("InMemoryBM25Retriever", ("query",), ("documents",), Role.RETRIEVER),
        ("SerperDevWebSearch", ("query",), ("documents", "links"), Role.RETRIEVER),
        ("CohereRanker", ("query", "documents"), ("documents",), Role.RANKER),
        ("PromptBuilder", ("query", "documents"), ("prompt",), Role.PROMPT_BUILDER),
        ("ChatPromptBuilder", ("query",), ("prompt",), Role.PROMPT_BUILDER),
        ("OpenAIChatGenerator", ("messages",), ("replies",), Role.GENERATOR),
        ("OpenAIGenerator", ("prompt",), ("replies", "meta"), Role.GENERATOR),
        ("AnswerBuilder", ("replies", "documents"), ("answers",), Role.ANSWER_BUILDER),
        ("DocumentJoiner", ("documents",), ("documents",), None),
        ("LostInTheMiddleRanker", ("documents",), ("documents",), Role.RANKER),
        ("OpenAITextEmbedder", ("text",), ("embedding", "meta"), None),
        ("MyRetriever", ("query",), ("answers",), None),  # a retriever with no documents out
        ("OpenAIImageGenerator", ("prompt",), ("images",), None),
    ],
)
def test_a_component_is_classified_by_its_class_name_and_sockets(
    kind: str, inputs: tuple[str, ...], outputs: tuple[str, ...], role: Role | None
) -> None:
    tags = {
        "haystack.component.name": "it",
        "haystack.component.type": kind,
        "haystack.component.input_spec": spec(*inputs),
        "haystack.component.output_spec": spec(*outputs),
    }
    found = Component.of(tags)
    assert (found.role if found else None) is role


def test_a_generator_is_named_after_its_provider() -> None:
    tags = {
        "haystack.component.type": "OpenAIChatGenerator",
        "haystack.component.output_spec": spec("replies"),
    }
    found = Component.of(tags)
    assert found is not None
    assert (found.name, found.provider) == ("OpenAIChatGenerator", "openai")


def test_documents_are_passages_named_by_their_id_and_blobs_are_left_out() -> None:
    text = Document(content="Ticks bite.")
    blob = Document(content=None, meta={"file": "x.pdf"})
    found = passages([text, blob])
    assert [(p.text, p.id) for p in found] == [("Ticks bite.", text.id)]
    assert passages("Ticks bite.") == []
    assert passages([{"content": "not a document"}]) == []
    assert documents_in({"query": "q", "docs": [text], "more": [text]}) == found * 2


def test_a_prompt_is_read_from_texts_and_chat_messages_with_their_tool_results() -> None:
    tool = ToolCallResult(
        result="Tool found: ticks bite.", origin=ToolCall("search", {}), error=False
    )
    messages = [
        ChatMessage.from_system("Cite as [n]."),
        ChatMessage.from_user("Document 1:\nTicks bite."),
        ChatMessage.from_tool(tool.result, tool.origin),
    ]
    values = {"system_prompt": "Be brief.", "messages": messages, "other": "ignored"}
    assert prompt_parts(values, ("system_prompt", "prompt", "messages")) == [
        "Be brief.",
        "Cite as [n].",
        "Document 1:\nTicks bite.",
        "Tool found: ticks bite.",
    ]
    assert prompt_parts({"messages": "Document 1:\nA."}, ("messages",)) == ["Document 1:\nA."]


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"prompt_tokens": 42, "completion_tokens": 3}, 42),
        ({"input_tokens": 7}, 7),
        ({"prompt_tokens": "42"}, None),
        ({"prompt_tokens": -1}, None),
        ({"prompt_tokens": True}, None),
        ({"prompt_tokens": 4.0}, None),
        (None, None),
    ],
)
def test_input_tokens_are_what_the_usage_reports_or_unknown(
    usage: dict[str, Any] | None, tokens: int | None
) -> None:
    reply = ChatMessage.from_assistant("It bites [1].", meta={"usage": usage, "model": "m-1"})
    [found] = replies({"replies": [reply]})
    assert (found.text, found.input_tokens, found.model) == ("It bites [1].", tokens, "m-1")


def test_a_completion_generators_replies_take_their_meta_by_position() -> None:
    found = replies(
        {
            "replies": ["one", "two"],
            "meta": [{"usage": {"prompt_tokens": 5}}, {"usage": {"prompt_tokens": 6}}],
        }
    )
    assert [(r.text, r.input_tokens) for r in found] == [("one", 5), ("two", 6)]


def test_provider_citations_name_the_documents_they_cite() -> None:
    citation = cohere.Citation(
        start=0,
        end=8,
        text="It bites",
        sources=[
            cohere.DocumentSource(id="doc-0", document={"id": "doc-0", "text": "Ticks bite."}),
            cohere.DocumentSource(id="doc-1", document={"snippet": "Deer carry ticks."}),
        ],
    )
    quoted = {"cited_text": "Clocks tick.", "sources": []}
    reply = ChatMessage.from_assistant("It bites.", meta={"citations": [citation, quoted]})
    [found] = replies({"replies": [reply]})
    assert found.cited == ("Ticks bite.", "Deer carry ticks.", "Clocks tick.")


def test_the_answer_builders_marking_is_read_from_referenced_documents() -> None:
    from haystack import GeneratedAnswer

    used = Document(content="Ticks bite.", meta={"referenced": True, "source_index": 1})
    unused = Document(content="Clocks tick.", meta={"referenced": False, "source_index": 2})
    truthy = Document(content="Deer.", meta={"referenced": "yes", "source_index": 3})
    answer = GeneratedAnswer(data="[1]", query="q", documents=[used, unused, truthy])
    assert marked_texts({"answers": [answer]}) == ["Ticks bite."]


def test_a_run_of_its_own_is_named_after_its_pipeline() -> None:
    named = request_name({"haystack.pipeline.metadata": {"name": "support bot/v2"}})
    assert named.startswith("haystack:support-bot-v2:")
    assert request_name({"haystack.pipeline.metadata": {}}).startswith("haystack:run:")
    assert request_name(None).startswith("haystack:run:")
