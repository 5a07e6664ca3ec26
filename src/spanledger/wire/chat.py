"""The chat wires a request's model calls go over, read for attribution: which route is a chat
call, what its request put before the model (messages, a system prompt, tool results, documents
passed beside them), what the model answered, which documents the provider says it cited, and
how many input tokens it says it read.

Nothing here is recorded as an event (spanledger records embedding and rerank calls); the chat
capture hands these readings to the request's context while the request is open, in memory
only. Every reader takes a decoded JSON body and never raises: a shape it does not know reads
as nothing. Each provider's shapes were checked against exchanges other projects recorded
(``tests/wire/recorded/chat``).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

__all__ = [
    "CHAT_ENDINGS",
    "CHAT_ONLY_PROVIDERS",
    "CHAT_WIRES",
    "ChatAnswer",
    "ChatPrompt",
    "ChatWire",
    "chat_wire_for",
    "documents_named",
]

CHAT_ONLY_PROVIDERS = ("anthropic",)
"""Chat wires whose provider serves no embedding or rerank endpoint spanledger records (so no
``Vendor`` names it, and nothing that recognises embedding traffic looks at its hosts)."""


@dataclass(frozen=True)
class ChatPrompt:
    """What a chat request put before the model: its text parts in order (system prompt,
    messages, tool results), and the documents passed beside them (in request order, each a
    text and the id its citations name it by)."""

    parts: tuple[str, ...] = ()
    documents: tuple[tuple[str, str | None], ...] = ()
    model: str | None = None


@dataclass(frozen=True)
class ChatAnswer:
    """What the model answered: its text, the ids of the request's documents the provider's
    own citations name, and the input tokens the provider reported (``None``: not
    reported)."""

    text: str = ""
    cited_ids: tuple[str, ...] = ()
    input_tokens: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class ChatWire:
    """One provider's chat route and how its bodies read. ``streamed``: the route always
    answers as a stream (its prompt is read, its answer is not)."""

    provider: str
    pattern: re.Pattern[str]
    prompt: Callable[[Any], ChatPrompt]
    answer: Callable[[Any], ChatAnswer]
    streamed: bool = False

    def route_model(self, path: str) -> str | None:
        """The model the route names (Bedrock's and Gemini's, decoded), or ``None``."""
        found = self.pattern.search(path)
        if found is None or not found.groupdict().get("model"):
            return None
        return unquote(found.group("model"))


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


def _list(value: object) -> list[Any]:
    """``value`` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def _count(value: object) -> int | None:
    """A reported token count: a non-negative integer, never a coerced value."""
    return value if type(value) is int and value >= 0 else None


def _summed(first: int | None, *more: object) -> int | None:
    """``first`` plus the sound figures among ``more`` (``None`` when ``first`` is)."""
    if first is None:
        return None
    return first + sum(_count(value) or 0 for value in more)


def _dig(body: object, *path: str) -> object:
    node = body
    for step in path:
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# -- OpenAI-compatible chat completions (OpenAI, Azure, Mistral, Ollama, vLLM, ...) ------------


def _openai_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    for message in _list(_dig(body, "messages")):
        if isinstance(message, dict):
            parts.extend(_texts(message.get("content")))
    return ChatPrompt(tuple(parts), model=_name(_dig(body, "model")))


def _openai_answer(body: Any) -> ChatAnswer:
    choices = _list(_dig(body, "choices"))
    first = choices[0] if choices else None
    return ChatAnswer(
        "\n".join(_texts(_dig(first, "message", "content"))),
        input_tokens=_count(_dig(body, "usage", "prompt_tokens")),
        model=_name(_dig(body, "model")),
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
    for item in _list(given):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":  # a tool's result, as the model reads it
            parts.extend(_texts(item.get("output")))
        else:
            parts.extend(_texts(item.get("content")))
    return ChatPrompt(tuple(parts), model=_name(_dig(body, "model")))


def _responses_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    for item in _list(_dig(body, "output")):
        if isinstance(item, dict) and item.get("type") == "message":
            texts.extend(_texts(item.get("content")))
    return ChatAnswer(
        "\n".join(texts),
        input_tokens=_count(_dig(body, "usage", "input_tokens")),
        model=_name(_dig(body, "model")),
    )


# -- Anthropic Messages -------------------------------------------------------------------------


class _Numbered:
    """Anthropic's citations name a document by its position among the request's document
    blocks (``document_index``) and a search result by its position among its search results
    (``search_result_index``), each counted whether or not its text can be read here."""

    def __init__(self) -> None:
        self.documents = 0
        self.results = 0
        self.read: list[tuple[str, str | None]] = []

    def document(self, block: dict[str, Any]) -> None:
        text = _anthropic_document(block)
        if text is not None:
            self.read.append((text, f"document:{self.documents}"))
        self.documents += 1

    def search_result(self, block: dict[str, Any]) -> None:
        self.read.append(("\n".join(_texts(block.get("content"))), f"search_result:{self.results}"))
        self.results += 1


def _anthropic_document(block: dict[str, Any]) -> str | None:
    """A ``document`` block's text (a plain-text source, or custom content blocks); ``None``
    for one whose text is not in the request (a PDF, a URL, a file id)."""
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    data = source.get("data")
    if source.get("type") == "text" and isinstance(data, str):
        return data
    content = source.get("content")
    if source.get("type") == "content":
        return content if isinstance(content, str) else "\n".join(_texts(content))
    return None


def _anthropic_blocks(content: object, parts: list[str], numbered: _Numbered) -> None:
    """Walk a message's content: text into ``parts``, documents and search results (at the top
    level or inside a tool's result) into ``numbered``."""
    if isinstance(content, str):
        parts.append(content)
        return
    for block in _list(content):
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "document":
            numbered.document(block)
        elif kind == "search_result":
            numbered.search_result(block)
        elif kind == "tool_result":
            _anthropic_blocks(block.get("content"), parts, numbered)
        else:
            parts.extend(_texts([block]))


def _anthropic_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = list(_texts(_dig(body, "system")))
    numbered = _Numbered()
    for message in _list(_dig(body, "messages")):
        if isinstance(message, dict):
            _anthropic_blocks(message.get("content"), parts, numbered)
    return ChatPrompt(tuple(parts), tuple(numbered.read), model=_name(_dig(body, "model")))


_ANTHROPIC_CITED = (("document_index", "document"), ("search_result_index", "search_result"))
"""Where a citation names what it cites, and the kind of block it counts."""


def _anthropic_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    cited: list[str] = []
    for block in _list(_dig(body, "content")):
        if not isinstance(block, dict) or block.get("type") != "text":
            continue
        text = block.get("text")
        if isinstance(text, str):
            texts.append(text)
        for citation in _list(block.get("citations")):
            for key, kind in _ANTHROPIC_CITED:
                position = _count(_dig(citation, key))
                if position is not None:
                    cited.append(f"{kind}:{position}")
                    break
    usage = _dig(body, "usage")
    read = _summed(
        _count(_dig(usage, "input_tokens")),
        _dig(usage, "cache_read_input_tokens"),
        _dig(usage, "cache_creation_input_tokens"),
    )
    return ChatAnswer("".join(texts), tuple(cited), read, _name(_dig(body, "model")))


# -- Cohere chat (v2) ---------------------------------------------------------------------------


def _cohere_document(document: object, position: int) -> tuple[str, str] | None:
    """A document as text and the id its citations name it by: the one the request gave, else
    ``doc:<position>``, the name Cohere gives a document sent without one."""
    if isinstance(document, str):
        return document, f"doc:{position}"
    if not isinstance(document, dict):
        return None
    data = document.get("data")
    if isinstance(data, dict):
        text = "\n".join(value for value in data.values() if isinstance(value, str))
    elif isinstance(data, str):
        text = data
    else:
        return None
    return text, _name(document.get("id")) or f"doc:{position}"


def _cohere_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    for message in _list(_dig(body, "messages")):
        if isinstance(message, dict):
            parts.extend(_texts(message.get("content")))
    documents = [
        read
        for position, document in enumerate(_list(_dig(body, "documents")))
        if (read := _cohere_document(document, position)) is not None
    ]
    return ChatPrompt(tuple(parts), tuple(documents), model=_name(_dig(body, "model")))


def _cohere_answer(body: Any) -> ChatAnswer:
    message = _dig(body, "message")
    ids: list[str] = []
    for citation in _list(_dig(message, "citations")):
        for source in _list(_dig(citation, "sources")):
            ident = _name(_dig(source, "id"))
            if ident is not None and _dig(source, "type") in ("document", None):
                ids.append(ident)
    read = _count(_dig(body, "usage", "tokens", "input_tokens"))
    if read is None:
        read = _count(_dig(body, "usage", "billed_units", "input_tokens"))
    return ChatAnswer("".join(_texts(_dig(message, "content"))), tuple(ids), read)


# -- Bedrock Converse -----------------------------------------------------------------------------

_TEXT_FORMATS = frozenset({"txt", "md", "html", "csv"})
"""Document formats whose bytes are text (boto3 sends them base64-encoded in the JSON)."""


def _converse_document(document: dict[str, Any]) -> str | None:
    """A Converse document's text: ``source.text``, its ``content`` blocks, or the bytes of a
    text format; ``None`` for a PDF, a spreadsheet, an S3 location."""
    source = document.get("source")
    if not isinstance(source, dict):
        return None
    if isinstance(source.get("text"), str):
        return str(source["text"])
    if isinstance(source.get("content"), list):
        return "\n".join(_texts(source["content"]))
    encoded = source.get("bytes")
    if isinstance(encoded, str) and document.get("format") in _TEXT_FORMATS:
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
    return None


def _converse_prompt(body: Any) -> ChatPrompt:
    parts: list[str] = []
    documents: list[tuple[str, str | None]] = []
    counted = 0
    for block in _list(_dig(body, "system")):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    for message in _list(_dig(body, "messages")):
        for block in _list(_dig(message, "content")):
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                parts.append(block["text"])
            for result in _list(_dig(block, "toolResult", "content")):
                if isinstance(result, dict) and isinstance(result.get("text"), str):
                    parts.append(result["text"])
            document = block.get("document")
            if isinstance(document, dict):
                text = _converse_document(document)
                if text is not None:
                    documents.append((text, f"document:{counted}"))
                counted += 1
    return ChatPrompt(tuple(parts), tuple(documents))


def _converse_answer(body: Any) -> ChatAnswer:
    texts: list[str] = []
    cited: list[str] = []
    for block in _list(_dig(body, "output", "message", "content")):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        cited_block = block.get("citationsContent")
        if not isinstance(cited_block, dict):
            continue
        for part in _list(cited_block.get("content")):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        for citation in _list(cited_block.get("citations")):
            location = _dig(citation, "location")
            for spot in location.values() if isinstance(location, dict) else ():
                index = _count(_dig(spot, "documentIndex"))
                if index is not None:
                    cited.append(f"document:{index}")
    usage = _dig(body, "usage")
    read = _summed(
        _count(_dig(usage, "inputTokens")),
        _dig(usage, "cacheReadInputTokens"),
        _dig(usage, "cacheWriteInputTokens"),
    )
    return ChatAnswer("".join(texts), tuple(cited), read)


# -- Gemini generateContent (the Gemini API and Vertex AI) -------------------------------------


def _gemini_parts(parts: object) -> Iterator[str]:
    """The text of ``parts`` the model reads or wrote, leaving thoughts out; a function's
    response as the strings it returned."""
    for part in _list(parts):
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        if isinstance(part.get("text"), str):
            yield part["text"]
        response = _dig(part, "functionResponse", "response")
        if isinstance(response, dict):
            yield from (value for value in response.values() if isinstance(value, str))


def _gemini_prompt(body: Any) -> ChatPrompt:
    parts = list(_gemini_parts(_dig(body, "systemInstruction", "parts")))
    for content in _list(_dig(body, "contents")):
        parts.extend(_gemini_parts(_dig(content, "parts")))
    return ChatPrompt(tuple(parts))


def _gemini_answer(body: Any) -> ChatAnswer:
    candidates = _list(_dig(body, "candidates"))
    first = candidates[0] if candidates else None
    return ChatAnswer(
        "".join(_gemini_parts(_dig(first, "content", "parts"))),
        input_tokens=_count(_dig(body, "usageMetadata", "promptTokenCount")),
        model=_name(_dig(body, "modelVersion")),
    )


_BEDROCK_MODEL = r"/model/(?P<model>[^/]+)"
_GEMINI_MODEL = r"/models/(?P<model>[^/:]+)"

CHAT_WIRES: tuple[ChatWire, ...] = (
    ChatWire("anthropic", re.compile(r"/v1/messages$"), _anthropic_prompt, _anthropic_answer),
    ChatWire("cohere", re.compile(r"/v2/chat$"), _cohere_prompt, _cohere_answer),
    ChatWire(
        "aws.bedrock",
        re.compile(_BEDROCK_MODEL + r"/converse$"),
        _converse_prompt,
        _converse_answer,
    ),
    ChatWire(
        "aws.bedrock",
        re.compile(_BEDROCK_MODEL + r"/converse-stream$"),
        _converse_prompt,
        _converse_answer,
        streamed=True,
    ),
    ChatWire(
        "gcp.gemini",
        re.compile(_GEMINI_MODEL + r":generateContent$"),
        _gemini_prompt,
        _gemini_answer,
    ),
    ChatWire(
        "gcp.gemini",
        re.compile(_GEMINI_MODEL + r":streamGenerateContent$"),
        _gemini_prompt,
        _gemini_answer,
        streamed=True,
    ),
    ChatWire("openai", re.compile(r"/responses$"), _responses_prompt, _responses_answer),
    ChatWire("openai", re.compile(r"/chat/completions$"), _openai_prompt, _openai_answer),
)
"""Every chat route read for attribution, the most specific first."""

CHAT_ENDINGS = (
    "/messages",
    "/chat",
    "/converse",
    "/converse-stream",
    ":generateContent",
    ":streamGenerateContent",
    "/responses",
    "/completions",
)
"""How the path of every chat route ends: the cheap first test."""


def chat_wire_for(path: str) -> ChatWire | None:
    """The chat wire a POST to ``path`` (as sent, percent-encoding kept; no query string) is,
    or ``None``."""
    path = path.rstrip("/")
    if not path.endswith(CHAT_ENDINGS):
        return None
    for wire in CHAT_WIRES:
        if wire.pattern.search(path):
            return wire
    return None


def documents_named(documents: Sequence[tuple[str, str | None]], answer: ChatAnswer) -> list[str]:
    """The texts of the request's documents the answer's citations name, each once; an id
    the request gave no document is left out."""
    if not answer.cited_ids:
        return []
    by_id = {ident: text for text, ident in documents if ident is not None}
    texts = [by_id[ident] for ident in answer.cited_ids if ident in by_id]
    return list(dict.fromkeys(texts))
