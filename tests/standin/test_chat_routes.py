"""The stand-in's chat routes, driven by the real SDKs: OpenAI's chat completions (streamed too)
and Responses, Anthropic's Messages citing documents by ``document_index``, Cohere's chat citing
documents by id, each with its usage figures and its vendor's failures. Anthropic is a vendor
the stand-in answers for, and no vendor the embedding and rerank recognition knows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import cohere
import httpx
import openai
import pytest

from spanledger.capture.vendors import checked_vendors, recognise
from spanledger.testing import (
    VENDORS,
    StandIn,
    anthropic_messages,
    cohere_chat,
    openai_chat_completions,
    openai_responses,
)
from spanledger.wire.endpoints import Vendor

KEY = "sk-standin-chat"
MOON = "The moon's gravity raises the tides twice a day."
SUN = "The sun pulls on the sea too, so spring tides come twice a month."
CLOCK = "Clocks tick every second."


@pytest.fixture(scope="module")
def server() -> Iterator[StandIn]:
    with StandIn() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh(server: StandIn) -> None:
    server.reset()


def document(text: str, *, cited: bool = True) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": text},
        "title": text.split()[1],
        "citations": {"enabled": cited},
    }


def claude(server: StandIn) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=server.base_url("anthropic"), max_retries=0)


def test_anthropic_cites_the_first_two_citable_documents_by_their_index(server: StandIn) -> None:
    pdf = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
    content: Any = [
        pdf,
        document(CLOCK, cited=False),
        document(MOON),
        document(SUN),
        {"type": "text", "text": "Why are there tides?"},
    ]
    message = claude(server).messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": content}]
    )
    cited = [
        (getattr(c, "document_index", None), getattr(c, "cited_text", None))
        for block in message.content
        if isinstance(block, anthropic.types.TextBlock)
        for c in block.citations or ()
    ]
    assert cited == [(2, MOON), (3, SUN)]
    assert message.model == "claude-sonnet-4-5"
    read = "\n".join(["Why are there tides?", "", CLOCK, MOON, SUN])
    assert message.usage.input_tokens == -(-len(read.encode()) // 4)
    assert message.usage.cache_read_input_tokens == 0


def test_anthropic_cites_what_the_test_scripts_and_reports_the_figure_given(
    server: StandIn,
) -> None:
    server.route(anthropic_messages(answer="Only the sun [9].", cite=[1, 7], input_tokens=321))
    content: Any = [document(MOON), document(SUN), {"type": "text", "text": "Tides?"}]
    message = claude(server).messages.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": content}]
    )
    (block,) = message.content
    assert isinstance(block, anthropic.types.TextBlock)
    assert block.text == "Only the sun [9]."
    assert [getattr(c, "document_index", None) for c in block.citations or ()] == [1, 7]
    assert message.usage.input_tokens == 321


def test_anthropic_without_documents_answers_the_prompt_labels(server: StandIn) -> None:
    message = claude(server).messages.create(
        model="claude-haiku-4-5",
        max_tokens=64,
        system="Cite as [n].",
        messages=[{"role": "user", "content": f"[1] {MOON}\n[2] {SUN}\nWhy?"}],
    )
    (block,) = message.content
    assert isinstance(block, anthropic.types.TextBlock)
    assert block.text == "The sources say so [1]. They agree [2]."
    assert block.citations is None


def test_anthropic_fails_as_anthropic_does(server: StandIn) -> None:
    server.route(anthropic_messages().failing(429, retry_after=4))
    with pytest.raises(anthropic.RateLimitError) as raised:
        claude(server).messages.create(
            model="claude-haiku-4-5", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    assert raised.value.response.headers["retry-after"] == "4"
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "stand-in error 429"},
    }


def cohere_client(server: StandIn) -> cohere.ClientV2:
    return cohere.ClientV2(api_key=KEY, base_url=server.base_url("cohere"))


def test_cohere_cites_documents_by_their_id_or_by_cohere_s_name_for_them(server: StandIn) -> None:
    client = cohere_client(server)
    asked: list[cohere.ChatMessageV2] = [cohere.UserChatMessageV2(content="Why are there tides?")]
    named = client.chat(
        model="command-a-03-2025",
        messages=asked,
        documents=[cohere.Document(id="moon", data={"text": MOON}), SUN, CLOCK],
    )
    sources = [s for c in named.message.citations or () for s in c.sources or ()]
    assert [source.id for source in sources] == ["moon", "doc:1"]
    assert [c.text for c in named.message.citations or ()] == ["The sources say so.", "They agree."]
    text = named.message.content[0].text  # type: ignore[index, union-attr]
    for citation in named.message.citations or ():
        assert text[citation.start : citation.end] == citation.text
    assert named.usage is not None
    assert named.usage.tokens is not None
    assert named.usage.billed_units is not None
    assert named.usage.tokens.input_tokens == named.usage.billed_units.input_tokens

    server.route(cohere_chat(cite=[2], input_tokens=77))
    scripted = client.chat(model="command-a-03-2025", messages=asked, documents=[MOON, SUN, CLOCK])
    assert [s.id for c in scripted.message.citations or () for s in c.sources or ()] == ["doc:2"]
    assert scripted.usage.tokens.input_tokens == 77  # type: ignore[union-attr]


def test_cohere_without_documents_cites_nothing(server: StandIn) -> None:
    reply = cohere_client(server).chat(
        model="command-a-03-2025", messages=[cohere.UserChatMessageV2(content="hello")]
    )
    assert reply.message.citations is None
    assert reply.message.content[0].text == "The context does not say."  # type: ignore[index, union-attr]


def test_openai_responses_answers_with_one_message(server: StandIn) -> None:
    client = openai.OpenAI(api_key=KEY, base_url=server.base_url("openai") + "/v1")
    response = client.responses.create(
        model="gpt-4.1-mini", instructions="Cite as [n].", input=f"[1] {MOON}\nWhy?"
    )
    assert response.output_text == "The sources say so [1]."
    assert response.usage is not None
    assert response.usage.input_tokens > 0

    server.route(openai_responses(answer=lambda prompt: str(len(prompt)), report_usage=False))
    scripted = client.responses.create(model="gpt-4.1-mini", input="abc")
    assert scripted.output_text == "3"
    assert scripted.usage is None


def test_openai_chat_streams_when_asked(server: StandIn) -> None:
    server.route(openai_chat_completions(answer="Streamed [1]."))
    client = openai.OpenAI(api_key=KEY, base_url=server.base_url("openai") + "/v1")
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Streamed [1]."
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_anthropic_is_a_stand_in_vendor_and_no_embedding_vendor() -> None:
    assert "anthropic" in VENDORS
    assert "anthropic" not in {vendor.value for vendor in Vendor}
    with pytest.raises(ValueError, match="unknown vendor"):
        checked_vendors({"https://api.anthropic.com": "anthropic"})
    url = httpx.URL("https://api.anthropic.com/v1/messages")
    assert recognise(url, {"model": "claude-x", "messages": []}, {}) is None
