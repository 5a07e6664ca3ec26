"""Reading LlamaIndex's objects as the context capture takes them: nodes as passages, a model
call's messages as prompt parts, its response as an answer with the provider's citations and
its input tokens.

Only texts and figures are read, in memory, for the request's matching; nothing read here is
logged or exported. A node is its text without metadata (the metadata lines LlamaIndex puts
above it in a prompt are not the frame), named by its node id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llama_index.core.schema import MetadataMode

from spanledger.attribution import Passage
from spanledger.figures import count

__all__ = [
    "answer_of",
    "cited_texts",
    "input_tokens",
    "passages",
    "prompt_parts",
    "provider_and_model",
]

_PROMPT_TOKENS = ("prompt_tokens", "input_tokens")
"""Where a provider's usage names the tokens it read (OpenAI's, Anthropic's and most others')."""
_UNNAMED = frozenset({"", "custom_llm", "base_component"})
"""Class names LLMs inherit from LlamaIndex's bases: they name no provider."""


def passages(nodes: object) -> list[Passage]:
    """The passages of a list of ``NodeWithScore`` (or bare nodes): each node's text, with its
    node id; a node with no text (an image) is left out."""
    if not isinstance(nodes, Sequence):
        return []
    found: list[Passage] = []
    for item in nodes:
        node = getattr(item, "node", item)
        get_content = getattr(node, "get_content", None)
        if get_content is None:
            continue
        text = get_content(metadata_mode=MetadataMode.NONE)
        if not isinstance(text, str) or not text:
            continue
        node_id = getattr(node, "node_id", None)
        found.append(Passage(text, node_id if isinstance(node_id, str) and node_id else None))
    return found


def _texts(blocks: Iterable[Any]) -> Iterable[str]:
    """The texts of content blocks: text blocks, and the text blocks a citable block holds."""
    for block in blocks:
        kind = getattr(block, "block_type", None)
        if kind == "text":
            text = getattr(block, "text", None)
            if isinstance(text, str) and text:
                yield text
        elif kind == "citable":
            yield from _texts(getattr(block, "content", ()) or ())


def prompt_parts(messages: Iterable[Any]) -> list[str]:
    """What a chat call's messages show the model as text: each message's text blocks and the
    documents passed in citable blocks."""
    parts: list[str] = []
    for message in messages:
        parts.extend(_texts(getattr(message, "blocks", ()) or ()))
    return parts


def answer_of(response: object) -> str:
    """The answer's text: a completion's ``text``, a chat response's message text."""
    if response is None:
        return ""
    text = getattr(response, "text", None)
    if isinstance(text, str):
        return text
    message = getattr(response, "message", None)
    return "\n".join(_texts(getattr(message, "blocks", ()) or ()))


def cited_texts(response: object, messages: Iterable[Any] = ()) -> list[str]:
    """The texts a provider's citations name (``CitationBlock`` in the answer's blocks): the
    document the call was given under the cited source and title, else the cited excerpt."""
    message = getattr(response, "message", None)
    citations = [
        block
        for block in getattr(message, "blocks", ()) or ()
        if getattr(block, "block_type", None) == "citation"
    ]
    if not citations:
        return []
    documents: dict[tuple[object, object], str] = {}
    for given in messages:
        for block in getattr(given, "blocks", ()) or ():
            if getattr(block, "block_type", None) == "citable":
                key = (getattr(block, "source", None), getattr(block, "title", None))
                documents.setdefault(key, "\n".join(_texts([block])))
    texts: list[str] = []
    for citation in citations:
        key = (getattr(citation, "source", None), getattr(citation, "title", None))
        text = documents.get(key) or "\n".join(_texts([getattr(citation, "cited_content", None)]))
        if text and text not in texts:
            texts.append(text)
    return texts


def _field(holder: object, name: str) -> object:
    if isinstance(holder, Mapping):
        return holder.get(name)
    return getattr(holder, name, None)


def input_tokens(response: object) -> int | None:
    """The input tokens the provider reported for the call: its raw response's ``usage`` when
    it has one, else the counts LlamaIndex copied into ``additional_kwargs``. The first figure
    present decides: a malformed one is not reported (``None``), never replaced by another."""
    if response is None:
        return None
    usage = _field(getattr(response, "raw", None), "usage")
    holder = usage if usage is not None else getattr(response, "additional_kwargs", None)
    for name in _PROMPT_TOKENS:
        value = _field(holder, name)
        if value is not None:
            return count(value)
    return None


def provider_and_model(model_dict: object) -> tuple[str | None, str | None]:
    """The provider and model an LLM names itself by in its event payload: its class name
    (``openai_llm`` is ``openai``; a ``CustomLLM`` that keeps the base class's name names no
    provider) and its metadata's ``model_name``."""
    if not isinstance(model_dict, Mapping):
        return None, None
    name = model_dict.get("class_name")
    model = model_dict.get("model_name")
    provider = None
    if isinstance(name, str) and name not in _UNNAMED:
        provider = name.removesuffix("_llm").lower()
    return provider, model if isinstance(model, str) and model else None
