"""The chat readers (``spanledger.wire.chat``) replayed against chat exchanges other projects
recorded (``recorded/chat``, see its README).

What each recording holds is written down here by hand, from the recording itself, never from
the readers: a reading that disagrees fails. Then the same bytes are served over a loopback
socket and sent inside an open request through ``instrument(http=True)`` (httpx and
``requests``) and the recording transport: the caller reads them exactly as recorded, and the
request's context gets the model call with what the recording says.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

import spanledger
from spanledger.attribution import Evidence, Passage
from spanledger.wire.chat import ChatAnswer, chat_wire_for, documents_named
from spanledger.wire.request import request_path

from .replay import RECORDED, Exchange, LoopbackServer, body_bytes, loopback

CHAT = RECORDED / "chat"
FILES = sorted(CHAT.glob("*/*.json"))
EXCHANGES = [Exchange.load(path) for path in FILES]
REPLAYED = [ex for ex in EXCHANGES if not ex.body_only]


@dataclass(frozen=True)
class Recorded:
    """What one recording shows, read by eye."""

    provider: str
    parts: tuple[str, ...] | None = None
    """The prompt's text parts, exactly, where they are short enough to write down."""
    prompt_holds: tuple[str, ...] = ()
    prompt_lacks: tuple[str, ...] = ()
    documents: tuple[tuple[str, str], ...] = ()
    answer: str | None = None
    answer_starts: str = ""
    answer_holds: tuple[str, ...] = ()
    answer_lacks: tuple[str, ...] = ()
    cited: tuple[str, ...] = ()
    """The texts of the request's documents the provider's citations name."""
    input_tokens: int | None = None
    model: str | None = None


QUESTION = "What is the capital of France?"
PARIS = "The capital of France is Paris."
RIVER = "Crossing a river is deceptively similar to crossing a street"

RECORDINGS: dict[str, Recorded] = {
    "messages-system-prompt": Recorded(
        "anthropic",
        parts=("You are a helpful assistant.\n\n", QUESTION),
        answer=PARIS,
        input_tokens=20,
        model="claude-3-opus-20240229",
    ),
    "messages-cache-read": Recorded(
        "anthropic",
        prompt_holds=("Please explain what Python is and its main use cases.",),
        answer_holds=("Python",),
        input_tokens=3 + 1111,
        model="claude-sonnet-4-5-20250929",
    ),
    "messages-web-search-citations": Recorded(
        "anthropic",
        parts=("What is the weather in San Francisco today?",),
        answer_starts="Based on the search results, here's the weather information",
        answer_holds=(
            "Temperature: 66°F with clear skies\n- Wind: W at 3 mph with gusts up to 5 mph",
        ),
        answer_lacks=("The user is asking about the weather", "encrypted"),
        input_tokens=8984,
        model="claude-sonnet-4-20250514",
    ),
    "chat-v2-documents-with-ids": Recorded(
        "cohere",
        parts=("who is the founder of cohere?",),
        documents=(
            ("Langchain supports cohere RAG!", "doc-0"),
            ("The sky is a mixture of brown and purple!", "doc-1"),
            ("Barack Obama is the founder of Cohere!", "doc-2"),
        ),
        answer="According to my sources, Cohere was founded by Barack Obama.",
        cited=("Barack Obama is the founder of Cohere!",),
        input_tokens=735,
        model="command-r",
    ),
    "chat-v2-one-document": Recorded(
        "cohere",
        parts=("What color is the sky?",),
        documents=(("The sky is green.", "doc-0"),),
        answer="The sky is green.",
        cited=("The sky is green.",),
        input_tokens=693,
        model="command-r",
    ),
    "chat-v2-no-documents": Recorded(
        "cohere",
        parts=("hello",),
        answer="Hello! How can I assist you today?",
        input_tokens=496,
        model="command-r7b-12-2024",
    ),
    "chat-completions-system": Recorded(
        "openai",
        parts=("You are a helpful assistant.", QUESTION),
        answer=PARIS,
        input_tokens=24,
        model="gpt-4o-2024-08-06",
    ),
    "responses-file-citation": Recorded(
        "openai",
        parts=(
            "You are a helpful assistant.",
            QUESTION,
            PARIS,
            "Tell me about the Eiffel Tower.",
        ),
        answer_starts="The Eiffel Tower is a famous landmark in Paris",
        input_tokens=1188,
        model="gpt-4o-2024-08-06",
    ),
    "responses-function-call-output-background": Recorded(
        "openai",
        parts=("What is the weather in Paris? Use the get_weather tool.", "Sunny and 72F in Paris"),
        answer="",
        model="gpt-4o-2024-08-06",
    ),
    "converse-system": Recorded(
        "aws.bedrock",
        parts=("You are a helpful assistant.", QUESTION),
        answer_starts=PARIS,
        input_tokens=13,
        model="us.amazon.nova-pro-v1:0",
    ),
    "converse-txt-document": Recorded(
        "aws.bedrock",
        parts=("You are a helpful chatbot.", "What is the main content on this document?"),
        documents=(("This is a test document.", "document:0"),),
        answer_starts="The document you're referring to appears to be a test document",
        input_tokens=21,
        model="us.amazon.nova-pro-v1:0",
    ),
    "converse-cache-write": Recorded(
        "aws.bedrock",
        prompt_holds=("What is 10 + 11?", "YOU MUST RESPONSE ONLY WITH SINGLE NUMBER"),
        documents=(("You are a great mathematician", "document:0"),),
        answer="21",
        input_tokens=2 + 1322,
        model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ),
    "generate-content-system": Recorded(
        "gcp.gemini",
        parts=("You are a helpful assistant.", QUESTION),
        answer=PARIS + "\n",
        input_tokens=13,
        model="gemini-2.0-flash",
    ),
    "generate-content-thoughts": Recorded(
        "gcp.gemini",
        prompt_holds=("How do I cross the street?", "Crossing the street safely is a fundamental"),
        prompt_lacks=("**A Safe Street-Crossing Guide: My Thought Process**",),
        answer_starts=RIVER,
        answer_lacks=("**Navigating Nature's Road",),
        input_tokens=1280,
        model="gemini-3-pro-preview",
    ),
}


def ids(exchanges: list[Exchange]) -> list[Any]:
    return [pytest.param(ex, id=ex.stem) for ex in exchanges]


@dataclass(frozen=True)
class Reading:
    parts: tuple[str, ...]
    documents: tuple[tuple[str, str | None], ...]
    answer: ChatAnswer
    cited: list[str]
    provider: str
    model: str | None


def read(ex: Exchange) -> Reading:
    """``ex`` read by spanledger's chat readers, as the capture reads it."""
    assert ex.url is not None
    path = request_path(httpx.URL(ex.url))
    wire = chat_wire_for(path)
    assert wire is not None, f"{ex.stem}: {path} is no chat route"
    prompt = wire.prompt(ex.request_body)
    answer = wire.answer(ex.body)
    return Reading(
        prompt.parts,
        prompt.documents,
        answer,
        documents_named(prompt.documents, answer),
        wire.provider,
        answer.model or prompt.model or wire.route_model(path),
    )


def test_every_recording_is_described() -> None:
    assert {ex.stem for ex in REPLAYED} == set(RECORDINGS)
    assert [ex.stem for ex in EXCHANGES if ex.body_only] == ["chat-v2-doc-0-citations-body-only"]


@pytest.mark.parametrize("ex", ids(REPLAYED))
def test_a_recording_reads_as_it_was_recorded(ex: Exchange) -> None:
    wanted = RECORDINGS[ex.stem]
    reading = read(ex)
    prompt = "\n".join(reading.parts)
    if wanted.parts is not None:
        assert reading.parts == wanted.parts
    assert all(text in prompt for text in wanted.prompt_holds)
    assert not any(text in prompt for text in wanted.prompt_lacks)
    assert reading.documents == wanted.documents
    text = reading.answer.text
    if wanted.answer is not None:
        assert text == wanted.answer
    assert text.startswith(wanted.answer_starts)
    assert all(part in text for part in wanted.answer_holds)
    assert not any(part in text for part in wanted.answer_lacks)
    assert reading.cited == list(wanted.cited)
    assert reading.answer.input_tokens == wanted.input_tokens
    assert (reading.provider, reading.model) == (wanted.provider, wanted.model)


def test_a_cohere_document_sent_without_an_id_is_cited_by_the_name_cohere_gives_it() -> None:
    """vercel/ai sends ``{data: {text, title}}`` with no id; Cohere's citation names it
    ``doc:0``."""
    (ex,) = (ex for ex in EXCHANGES if ex.body_only)
    wire = chat_wire_for("/v2/chat")
    assert wire is not None
    text = "AI provides: 1. Automation of tasks 2. Better decision-making 3. Cost reduction"
    prompt = wire.prompt(
        {
            "model": "command-r-plus",
            "messages": [{"role": "user", "content": "What are the key benefits?"}],
            "documents": [{"data": {"text": text, "title": "benefits.txt"}}, "an unread one"],
        }
    )
    answer = wire.answer(ex.body)
    assert answer.cited_ids == ("doc:0", "doc:0", "doc:0")
    assert answer.input_tokens == 1683
    assert documents_named(prompt.documents, answer) == [f"{text}\nbenefits.txt"]


# --- the same bytes over a socket, inside an open request ----------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    yield from loopback()


@pytest.fixture
def switched() -> Iterator[None]:
    spanledger.instrument(sdks=[], http=True)
    try:
        yield
    finally:
        spanledger.uninstrument()


def send_httpx(url: str, content: bytes) -> bytes:
    with httpx.Client(timeout=5.0) as client:
        return client.post(
            url, content=content, headers={"content-type": "application/json"}
        ).content


def send_requests(url: str, content: bytes) -> bytes:
    answer = requests.post(
        url, data=content, headers={"content-type": "application/json"}, timeout=5
    )
    return answer.content


def send_transport(url: str, content: bytes) -> bytes:
    transport = spanledger.instrumentation.transport()
    with httpx.Client(transport=transport, timeout=5.0) as client:
        return client.post(
            url, content=content, headers={"content-type": "application/json"}
        ).content


PATHS = {"httpx": send_httpx, "requests": send_requests, "transport": send_transport}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("ex", ids(REPLAYED))
def test_a_recording_sent_inside_a_request_reaches_its_context(
    ex: Exchange, path: str, server: LoopbackServer, switched: None
) -> None:
    wanted = RECORDINGS[ex.stem]
    url = server.serve(ex)
    events: list[spanledger.Event] = []
    with (
        spanledger.use(spanledger.Recorder([events.append])),
        spanledger.request(f"replay-{ex.stem}") as turn,
    ):
        served = turn.context.served(
            [Passage(text) for text, _ in wanted.documents], provider_id="search"
        )
        content = PATHS[path](url, body_bytes(ex.request_body))
        report = turn.frames.report()
        (call,) = turn.context.calls()
    assert content == body_bytes(ex.body)
    assert events == []  # a chat call records no event
    assert call.answered
    assert (call.input_tokens, call.provider, call.model) == (
        wanted.input_tokens,
        wanted.provider,
        wanted.model,
    )
    for frame, (text, _) in zip(served, wanted.documents, strict=True):
        use = report.use_of(frame)
        assert use is not None
        assert use.rendered
        assert use.cited == (text in wanted.cited)
        if use.cited:
            assert use.evidence is Evidence.PROVIDER_CITATION


def test_the_recordings_are_where_the_readme_lists_them() -> None:
    listed = (CHAT / "README.md").read_text(encoding="utf-8")
    for path in FILES:
        assert f"| {path.relative_to(CHAT).as_posix()} |" in listed
    assert Path(RECORDED / "README.md").exists()
