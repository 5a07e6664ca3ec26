"""What the handler reads of LangChain's objects: a retriever's documents as passages, a model
call's prompt as text parts (with the documents handed over beside the messages), and its
answer: the text, the documents the provider's own citations name, the input tokens the
provider reported, and who answered.

Reading goes by LangChain's public attributes (``page_content``, ``content``,
``content_blocks``, ``usage_metadata``), so nothing of LangChain is imported here. Whatever
does not have the expected shape is left out, never guessed at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spanledger.attribution import Passage
from spanledger.attribution.passages import framework_passages

__all__ = ["ModelAnswer", "ModelPrompt", "answer", "passages", "prompt", "who"]

_TEXT_KEYS = ("text", "page_content", "content", "snippet")
"""Keys a document handed over as a mapping keeps its text under (Cohere's ``{"text": ...}``,
a serialised ``Document``); Cohere v2's ``{"id", "data": {...}}`` nests them under ``data``."""


def passages(documents: object) -> list[Passage]:
    """A retriever's documents as passages: each ``Document``'s text, and its id where every
    document has one (``Document.id``, else an id in its metadata), as the hand-written
    ``serve`` names them."""
    found = framework_passages(documents)
    if found is None:
        return []
    ids: Sequence[str | None] = found.ids if found.ids is not None else [None] * len(found.texts)
    return [Passage(text, id_) for text, id_ in zip(found.texts, ids, strict=True)]


@dataclass
class ModelPrompt:
    """One model call's prompt: its text parts (every message's content, and the documents
    handed over beside the messages), and the documents a provider's citation may index, in
    the order the request carried them."""

    parts: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)
    """Document blocks of the messages (Anthropic's ``document_index`` counts these), else
    the documents passed beside them (``documents=``)."""
    search_results: list[str] = field(default_factory=list)
    """Search-result blocks of the messages (Anthropic's ``search_result_index``)."""


def prompt(messages: object, invocation_params: object) -> ModelPrompt:
    """A chat model's ``messages`` (one list of ``BaseMessage`` per prompt) or a completion
    model's prompt strings, and the documents in ``invocation_params`` (``documents=``)."""
    read = ModelPrompt()
    for item in _flat(messages):
        if isinstance(item, str):
            read.parts.append(item)
        else:
            _content(getattr(item, "content", None), read)
    beside = invocation_params.get("documents") if isinstance(invocation_params, Mapping) else None
    if isinstance(beside, Sequence) and not isinstance(beside, str):
        texts = [text for text in map(_document_text, beside) if text]
        read.parts.extend(texts)
        if not read.documents:
            read.documents = texts
    return read


def _flat(messages: object) -> Iterable[object]:
    if isinstance(messages, str) or not isinstance(messages, Sequence):
        return
    for item in messages:
        if isinstance(item, Sequence) and not isinstance(item, str):
            yield from item
        else:
            yield item


def _content(content: object, read: ModelPrompt) -> None:
    """A message's content: a text, or a list of blocks (text, documents, search results)."""
    if isinstance(content, str):
        read.parts.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, str):
            read.parts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            text = _block_text(block)
            if not text:
                continue
            read.parts.append(text)
            if kind == "search_result":
                read.search_results.append(text)
            elif kind in ("document", "text-plain", "file"):
                read.documents.append(text)


def _block_text(block: Mapping[str, Any]) -> str:
    """The text of one content block: a text block's ``text``, a document block's text source,
    a search result's text parts."""
    text = block.get("text")
    if isinstance(text, str):
        return text
    source = block.get("source")
    if isinstance(source, Mapping):
        data = source.get("data")
        if source.get("type") == "text" and isinstance(data, str):
            return data
        if source.get("type") == "content":
            return _joined(source.get("content"))
    return _joined(block.get("content"))


def _joined(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    texts = [part.get("text") for part in parts if isinstance(part, Mapping)]
    return "\n".join(text for text in texts if isinstance(text, str))


def _document_text(document: object) -> str:
    """A document handed over beside the messages: a text, a ``Document``, or a mapping."""
    if isinstance(document, str):
        return document
    text = getattr(document, "page_content", None)
    if isinstance(text, str):
        return text
    if isinstance(document, Mapping):
        for key in _TEXT_KEYS:
            found = document.get(key)
            if isinstance(found, str):
                return found
        data = document.get("data")
        if isinstance(data, Mapping):
            return _document_text(data)
    return ""


@dataclass
class ModelAnswer:
    """A model call's answer as the handler hands it to the request."""

    text: str
    cited: list[str]
    """The texts of the documents the provider's own citations name (or the excerpts they
    quote, where they name no document)."""
    input_tokens: int | None


def answer(response: object, read: ModelPrompt | None) -> ModelAnswer:
    """An ``LLMResult``: its generations' text, the documents their citations name (by the
    index a citation gives into what ``read`` handed over, else by the text it quotes), and
    the input tokens the provider reported."""
    texts: list[str] = []
    cited: list[str] = []
    tokens: int | None = None
    for generations in _listed(getattr(response, "generations", None)):
        for generation in _listed(generations):
            text = getattr(generation, "text", None)
            if isinstance(text, str) and text:
                texts.append(text)
            message = getattr(generation, "message", None)
            if message is None:
                continue
            cited.extend(_citations(message, read))
            if tokens is None:
                tokens = _count(_get(getattr(message, "usage_metadata", None), "input_tokens"))
    if tokens is None:
        usage = _get(getattr(response, "llm_output", None), "token_usage")
        tokens = _count(_get(usage, "prompt_tokens"))
    return ModelAnswer("\n".join(texts), list(dict.fromkeys(cited)), tokens)


def _citations(message: object, read: ModelPrompt | None) -> list[str]:
    """The documents an answer's ``Citation`` annotations name. Only a message whose content
    is a list of blocks can carry any: a plain text answer costs nothing here."""
    if not isinstance(getattr(message, "content", None), list):
        return []
    found: list[str] = []
    for block in _listed(getattr(message, "content_blocks", None)):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            continue
        for note in _listed(block.get("annotations")):
            if isinstance(note, Mapping) and note.get("type") == "citation":
                named = _named(note, read)
                if named:
                    found.append(named)
    return found


def _named(citation: Mapping[str, Any], read: ModelPrompt | None) -> str:
    """The document one citation names: the one its index points at among those the call
    handed over, else the excerpt it quotes."""
    extras = citation.get("extras")
    if read is not None and isinstance(extras, Mapping):
        for key, documents in (
            ("document_index", read.documents),
            ("search_result_index", read.search_results),
        ):
            index = extras.get(key)
            if type(index) is int and 0 <= index < len(documents):
                return documents[index]
    quoted = citation.get("cited_text")
    return quoted if isinstance(quoted, str) else ""


def who(metadata: object, invocation_params: object) -> tuple[str | None, str | None]:
    """The provider and model of a model call: LangChain's own ``ls_provider`` and
    ``ls_model_name`` metadata, else the model named in its invocation parameters."""
    provider = _get(metadata, "ls_provider")
    model = _get(metadata, "ls_model_name")
    if not isinstance(model, str):
        model = _get(invocation_params, "model") or _get(invocation_params, "model_name")
    return (
        provider if isinstance(provider, str) and provider else None,
        model if isinstance(model, str) and model else None,
    )


def _count(value: object) -> int | None:
    """A token count as the provider reported it: a whole number >= 0, else not reported."""
    return value if type(value) is int and value >= 0 else None


def _get(mapping: object, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, Mapping) else None


def _listed(value: object) -> Sequence[Any]:
    return value if isinstance(value, list | tuple) else ()
