"""What a Haystack component is, and what its inputs and outputs hold, read from the tags its
pipeline puts on the component's span.

A component is classified by its class name and its sockets, the way Haystack names them: a
retriever (``...Retriever`` or ``...WebSearch`` with a ``documents`` output), a ranker
(``...Ranker`` with ``documents`` in and out), a prompt builder (``...PromptBuilder`` with a
``prompt`` output), a generator (``...Generator`` with a ``replies`` output) and the answer
builder (``...AnswerBuilder`` with an ``answers`` output). Values arrive as the objects the
pipeline holds (``Document``, ``ChatMessage``, ``GeneratedAnswer``); they are read by their
attributes, so this module imports nothing of Haystack and reads 2.x and 3.x alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from spanledger.attribution import Passage

__all__ = [
    "Component",
    "GeneratorReply",
    "Role",
    "documents_in",
    "marked_texts",
    "passages",
    "prompt_parts",
    "replies",
    "reply_texts",
]

NAME = "haystack.component.name"
TYPE = "haystack.component.type"
INPUT_SPEC = "haystack.component.input_spec"
OUTPUT_SPEC = "haystack.component.output_spec"


class Role(Enum):
    """What a component does with a request's context."""

    RETRIEVER = "retriever"
    RANKER = "ranker"
    PROMPT_BUILDER = "prompt_builder"
    GENERATOR = "generator"
    ANSWER_BUILDER = "answer_builder"


@dataclass(frozen=True, slots=True)
class Component:
    """A component as its span names it: its name in the pipeline, its class, its role."""

    name: str
    type: str
    role: Role

    @classmethod
    def of(cls, tags: Mapping[str, Any] | None) -> Component | None:
        """The component a ``haystack.component.run`` span's tags describe, or ``None`` when it
        plays no part in the context (a joiner, a converter, an embedder)."""
        if not tags:
            return None
        kind = tags.get(TYPE)
        if not isinstance(kind, str):
            return None
        role = _role(kind, _sockets(tags.get(INPUT_SPEC)), _sockets(tags.get(OUTPUT_SPEC)))
        if role is None:
            return None
        name = tags.get(NAME)
        return cls(name if isinstance(name, str) and name else kind, kind, role)

    @property
    def provider(self) -> str:
        """A generator's provider, from its class: ``OpenAIChatGenerator`` is ``openai``."""
        stem = self.type
        for suffix in ("ChatGenerator", "Generator"):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        return stem.lower() or self.type.lower()


def _sockets(spec: object) -> frozenset[str]:
    return (
        frozenset(key for key in spec if isinstance(key, str))
        if isinstance(spec, Mapping)
        else frozenset()
    )


def _role(kind: str, inputs: frozenset[str], outputs: frozenset[str]) -> Role | None:
    if "Generator" in kind and "replies" in outputs:
        return Role.GENERATOR
    if kind.endswith("AnswerBuilder") and "answers" in outputs:
        return Role.ANSWER_BUILDER
    if kind.endswith("PromptBuilder") and "prompt" in outputs:
        return Role.PROMPT_BUILDER
    if "Ranker" in kind and "documents" in inputs and "documents" in outputs:
        return Role.RANKER
    if ("Retriever" in kind or "WebSearch" in kind) and "documents" in outputs:
        return Role.RETRIEVER
    return None


def _is_document(item: object) -> bool:
    return hasattr(item, "content") and hasattr(item, "meta") and hasattr(item, "id")


def _documents(value: object) -> list[Any]:
    """``value`` as a list of documents, or empty when it is not one."""
    if not isinstance(value, list) or not value or not all(map(_is_document, value)):
        return []
    return value


def passages(value: object) -> list[Passage]:
    """The passages of a list of documents: each one's text, named by ``Document.id`` (Haystack
    makes it from the content, so a ranker's copy keeps it); a document with no text (a blob)
    is left out."""
    found: list[Passage] = []
    for document in _documents(value):
        text = document.content
        if isinstance(text, str) and text:
            identity = document.id
            found.append(
                Passage(text, identity if isinstance(identity, str) and identity else None)
            )
    return found


def documents_in(values: Mapping[str, Any]) -> list[Passage]:
    """The passages of every list of documents among a component's inputs (a prompt builder's
    template may name its documents anything)."""
    found: list[Passage] = []
    for value in values.values():
        found.extend(passages(value))
    return found


def _message_parts(message: object) -> list[str]:
    """What a chat message showed the model: its texts and its tool results."""
    if isinstance(message, str):
        return [message]
    texts = getattr(message, "texts", None)
    if not isinstance(texts, list):
        text = getattr(message, "text", None)
        texts = [text] if isinstance(text, str) else []
    found = [text for text in texts if isinstance(text, str)]
    for result in getattr(message, "tool_call_results", None) or ():
        shown = getattr(result, "result", None)
        if isinstance(shown, str):
            found.append(shown)
    return found


def prompt_parts(values: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """The prompt a model receives, in parts: each named value that is a text, a chat message
    or a list of them (a generator's ``system_prompt`` / ``prompt`` / ``messages``, a prompt
    builder's ``prompt``)."""
    found: list[str] = []
    for key in keys:
        value = values.get(key)
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is not None:
                found.extend(_message_parts(item))
    return found


@dataclass(frozen=True, slots=True)
class GeneratorReply:
    """A generator's answer, as read from its output."""

    text: str
    cited: tuple[str, ...]
    """Texts of the documents the provider's own citations name (or quote)."""
    input_tokens: int | None
    model: str | None


def replies(output: Mapping[str, Any]) -> list[GeneratorReply]:
    """A generator's replies (texts, or chat messages with their meta), each with what its meta
    reports: the input tokens, the model, the provider's citations."""
    found: list[GeneratorReply] = []
    metas = output.get("meta")
    values = output.get("replies")
    if not isinstance(values, list):
        return found
    for position, reply in enumerate(values):
        meta = getattr(reply, "meta", None)
        if not isinstance(meta, Mapping) and isinstance(metas, list) and position < len(metas):
            meta = metas[position]
        meta = meta if isinstance(meta, Mapping) else {}
        text = "\n".join(_message_parts(reply)) if not isinstance(reply, str) else reply
        model = meta.get("model")
        found.append(
            GeneratorReply(
                text,
                _citation_texts(meta),
                _input_tokens(meta),
                model if isinstance(model, str) else None,
            )
        )
    return found


def reply_texts(values: Mapping[str, Any]) -> set[str]:
    """The texts of the replies an answer builder was handed."""
    found = values.get("replies")
    if not isinstance(found, list):
        return set()
    return {"\n".join(_message_parts(reply)) for reply in found}


def marked_texts(output: Mapping[str, Any]) -> list[str]:
    """The texts of the documents an answer builder marked referenced (``meta["referenced"]``
    is ``True``: the answer named their index with the builder's reference pattern)."""
    found: list[str] = []
    answers = output.get("answers")
    for answer in answers if isinstance(answers, list) else ():
        for document in _documents(getattr(answer, "documents", None)):
            meta = document.meta
            if isinstance(meta, Mapping) and meta.get("referenced") is True:
                text = document.content
                if isinstance(text, str) and text and text not in found:
                    found.append(text)
    return found


def _input_tokens(meta: Mapping[str, Any]) -> int | None:
    """The input tokens a reply's usage reports (``prompt_tokens`` or ``input_tokens``); a
    figure that is not a non-negative integer is not reported."""
    usage = meta.get("usage")
    if not isinstance(usage, Mapping):
        return None
    for key in ("prompt_tokens", "input_tokens"):
        figure = usage.get(key)
        if type(figure) is int and figure >= 0:
            return figure
    return None


def _field(item: object, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _sequence(value: object) -> Sequence[Any]:
    return value if isinstance(value, Sequence) and not isinstance(value, str) else ()


def _citation_texts(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """The texts a reply's citations name (``meta["citations"]``, as Cohere's chat generator
    puts them): each source document's text, and a quoted ``cited_text``."""
    found: list[str] = []
    for citation in _sequence(meta.get("citations")):
        quoted = _field(citation, "cited_text")
        if isinstance(quoted, str) and quoted:
            found.append(quoted)
        for source in _sequence(_field(citation, "sources")):
            document = _field(source, "document")
            if isinstance(document, Mapping):
                for key in ("text", "snippet", "content"):
                    text = document.get(key)
                    if isinstance(text, str) and text:
                        found.append(text)
                        break
    return tuple(dict.fromkeys(found))
