"""The chat wires a request's model calls go over, read for attribution: which route is a chat
call, what its request put before the model (messages, a system prompt, documents passed beside
them), what the model answered, which documents the provider says it cited, and how many input
tokens it says it read.

Nothing here is recorded as an event (spanledger records embedding and rerank calls); the
recording core hands these readings to the request's context while the request is open, in
memory only. Every reader takes a decoded JSON body and never raises: a shape it does not know
reads as nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHAT_ENDINGS",
    "CHAT_WIRES",
    "ChatAnswer",
    "ChatPrompt",
    "ChatWire",
    "chat_wire_for",
    "documents_named",
]


@dataclass(frozen=True)
class ChatPrompt:
    """What a chat request put before the model: its text parts in order (system prompt,
    messages, tool results), and the documents passed beside them (in request order, each a
    text and its id where it has one)."""

    parts: tuple[str, ...] = ()
    documents: tuple[tuple[str, str | None], ...] = ()
    model: str | None = None


@dataclass(frozen=True)
class ChatAnswer:
    """What the model answered: its text, the documents the provider's own citations name (by
    their position among the request's documents, or by their id), and the input tokens the
    provider reported (``None``: not reported)."""

    text: str = ""
    cited_positions: tuple[int, ...] = ()
    cited_ids: tuple[str, ...] = ()
    input_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class ChatWire:
    """One provider's chat route and how its bodies read."""

    provider: str
    pattern: re.Pattern[str]
    prompt: Callable[[Any], ChatPrompt]
    answer: Callable[[Any], ChatAnswer]
    hosts: tuple[str, ...] = field(default=())


def _texts(content: object) -> Iterator[str]:
    """The text inside a message's content: a string, or the text of each text-like block."""
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, str):
            yield block
        elif isinstance(block, dict):
            for key in ("text", "input_text", "output_text"):
                value = block.get(key)
                if isinstance(value, str):
                    yield value
                    break
            else:
                inner = block.get("content")
                if inner is not None and block.get("type") in {"tool_result", "search_result"}:
                    yield from _texts(inner)


def _list(value: object) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _count(value: object) -> int | None:
    """A reported token count: a non-negative integer, never a coerced value."""
    return value if type(value) is int and value >= 0 else None


def _dig(body: object, *path: str) -> object:
    node = body
    for step in path:
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def _text_of_model(body: object) -> str | None:
    model = _dig(body, "model")
    return model if isinstance(model, str) and model else None


# -- OpenAI-compatible chat completions (OpenAI, Azure, Mistral, Ollama, vLLM, ...) ------------


def _openai_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    messages = _dig(body, "messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                parts.extend(_texts(message.get("content")))
    return ChatPrompt(tuple(parts), model=_text_of_model(body))


def _openai_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    choices = _dig(body, "choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        texts.extend(_texts(_dig(choices[0], "message", "content")))
    return ChatAnswer(
        "\n".join(texts),
        input_tokens=_count(_dig(body, "usage", "prompt_tokens")),
        model=_text_of_model(body),
    )


# -- OpenAI Responses ---------------------------------------------------------------------------


def _responses_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    instructions = _dig(body, "instructions")
    if isinstance(instructions, str):
        parts.append(instructions)
    given = _dig(body, "input")
    if isinstance(given, str):
        parts.append(given)
    elif isinstance(given, list):
        for item in given:
            if isinstance(item, dict):
                parts.extend(_texts(item.get("content")))
    return ChatPrompt(tuple(parts), model=_text_of_model(body))


def _responses_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    output = _dig(body, "output")
    if isinstance(output, list):
        for item in output:
            if isinstance(item, dict) and item.get("type") == "message":
                texts.extend(_texts(item.get("content")))
    return ChatAnswer(
        "\n".join(texts),
        input_tokens=_count(_dig(body, "usage", "input_tokens")),
        model=_text_of_model(body),
    )


# -- Anthropic Messages -------------------------------------------------------------------------


def _anthropic_document(block: dict[str, Any]) -> str | None:
    """A ``document`` block's text (plain-text source, or content blocks)."""
    source = block.get("source")
    if isinstance(source, dict):
        data = source.get("data")
        if source.get("type") == "text" and isinstance(data, str):
            return data
        content = source.get("content")
        if source.get("type") == "content" and content is not None:
            return "\n".join(_texts(content))
    return None


def _anthropic_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    documents: list[tuple[str, str | None]] = []
    parts.extend(_texts(_dig(body, "system")))
    messages = _dig(body, "messages")
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                for block in content:
                    if not isinstance(block, dict):
                        continue
                    kind = block.get("type")
                    if kind == "document":
                        text = _anthropic_document(block)
                        if text is not None:
                            documents.append((text, None))
                    elif kind == "search_result":
                        text = "\n".join(_texts(block.get("content")))
                        documents.append((text, None))
                    else:
                        parts.extend(_texts([block]))
            else:
                parts.extend(_texts(content))
    return ChatPrompt(tuple(parts), tuple(documents), model=_text_of_model(body))


def _anthropic_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    positions: list[int] = []
    content = _dig(body, "content")
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "text":
                continue
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
            for citation in block.get("citations") or ():
                if not isinstance(citation, dict):
                    continue
                for key in ("document_index", "search_result_index"):
                    position = citation.get(key)
                    if type(position) is int and position >= 0:
                        positions.append(position)
                        break
    usage = _dig(body, "usage")
    read = _count(_dig(usage, "input_tokens"))
    if read is not None:
        for extra in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            more = _count(_dig(usage, extra))
            read += more or 0
    return ChatAnswer(
        "".join(texts), tuple(positions), input_tokens=read, model=_text_of_model(body)
    )


# -- Cohere chat (v2) ---------------------------------------------------------------------------


def _cohere_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    messages = _dig(body, "messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                parts.extend(_texts(message.get("content")))
    documents: list[tuple[str, str | None]] = []
    given = _dig(body, "documents")
    if isinstance(given, list):
        for number, document in enumerate(given):
            if isinstance(document, str):
                documents.append((document, f"doc-{number}"))
            elif isinstance(document, dict):
                data = document.get("data")
                text = (
                    "\n".join(str(value) for value in data.values() if isinstance(value, str))
                    if isinstance(data, dict)
                    else None
                )
                ident = document.get("id")
                if text is not None:
                    documents.append((text, ident if isinstance(ident, str) else None))
    return ChatPrompt(tuple(parts), tuple(documents), model=_text_of_model(body))


def _cohere_answer(body: Any) -> ChatAnswer:
    message = _dig(body, "message")
    texts = list(_texts(_dig(message, "content")))
    ids: list[str] = []
    citations = _dig(message, "citations")
    if isinstance(citations, list):
        for citation in citations:
            sources = citation.get("sources") if isinstance(citation, dict) else None
            for source in sources or ():
                ident = source.get("id") if isinstance(source, dict) else None
                if isinstance(ident, str):
                    ids.append(ident)
    read = _count(_dig(body, "usage", "tokens", "input_tokens"))
    if read is None:
        read = _count(_dig(body, "usage", "billed_units", "input_tokens"))
    return ChatAnswer("".join(texts), cited_ids=tuple(ids), input_tokens=read)


# -- Bedrock Converse -----------------------------------------------------------------------------


def _converse_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    documents: list[tuple[str, str | None]] = []
    for block in _list(_dig(body, "system")):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    messages = _dig(body, "messages")
    if isinstance(messages, list):
        for message in messages:
            for block in (message.get("content") if isinstance(message, dict) else None) or ():
                if not isinstance(block, dict):
                    continue
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                document = block.get("document")
                if isinstance(document, dict):
                    text = _dig(document, "source", "text")
                    if isinstance(text, str):
                        name = document.get("name")
                        documents.append((text, name if isinstance(name, str) else None))
    return ChatPrompt(tuple(parts), tuple(documents))


def _converse_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    positions: list[int] = []
    for block in _list(_dig(body, "output", "message", "content")):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        cited = block.get("citationsContent")
        if isinstance(cited, dict):
            for citation in cited.get("citations") or ():
                location = _dig(citation, "location")
                if isinstance(location, dict):
                    for spot in location.values():
                        index = _dig(spot, "documentIndex")
                        if type(index) is int and index >= 0:
                            positions.append(index)
            for part in cited.get("content") or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    return ChatAnswer(
        "".join(texts), tuple(positions), input_tokens=_count(_dig(body, "usage", "inputTokens"))
    )


# -- Gemini generateContent (the Gemini API and Vertex AI) -------------------------------------


def _gemini_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    for part in _list(_dig(body, "systemInstruction", "parts")):
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    contents = _dig(body, "contents")
    if isinstance(contents, list):
        for content in contents:
            for part in (content.get("parts") if isinstance(content, dict) else None) or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return ChatPrompt(tuple(parts))


def _gemini_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    candidates = _dig(body, "candidates")
    if isinstance(candidates, list) and candidates:
        for part in _list(_dig(candidates[0], "content", "parts")):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return ChatAnswer(
        "".join(texts),
        input_tokens=_count(_dig(body, "usageMetadata", "promptTokenCount")),
        model=_text_of_model({"model": _dig(body, "modelVersion")}),
    )


CHAT_WIRES: tuple[ChatWire, ...] = (
    ChatWire("anthropic", re.compile(r"/v1/messages$"), _anthropic_prompt, _anthropic_answer),
    ChatWire("cohere", re.compile(r"/v2/chat$"), _cohere_prompt, _cohere_answer),
    ChatWire(
        "aws.bedrock", re.compile(r"/model/[^/]+/converse$"), _converse_prompt, _converse_answer
    ),
    ChatWire("gcp.gemini", re.compile(r":generateContent$"), _gemini_prompt, _gemini_answer),
    ChatWire("openai", re.compile(r"/responses$"), _responses_prompt, _responses_answer),
    ChatWire("openai", re.compile(r"/chat/completions$"), _openai_prompt, _openai_answer),
)
"""Every chat route read for attribution, the most specific first."""

CHAT_ENDINGS = ("/messages", "/chat", "/converse", ":generateContent", "/responses", "/completions")
"""How the path of every chat route ends: the cheap first test."""


def chat_wire_for(path: str) -> ChatWire | None:
    """The chat wire a POST to ``path`` (no query string) is, or ``None``."""
    path = path.rstrip("/")
    if not path.endswith(CHAT_ENDINGS):
        return None
    for wire in CHAT_WIRES:
        if wire.pattern.search(path):
            return wire
    return None


def documents_named(documents: Sequence[tuple[str, str | None]], answer: ChatAnswer) -> list[str]:
    """The texts of the request's documents the answer's citations name (by position or id)."""
    texts: list[str] = []
    for position in answer.cited_positions:
        if position < len(documents):
            texts.append(documents[position][0])
    if answer.cited_ids:
        by_id = {ident: text for text, ident in documents if ident is not None}
        for ident in answer.cited_ids:
            text = by_id.get(ident)
            if text is not None:
                texts.append(text)
    return list(dict.fromkeys(texts))
