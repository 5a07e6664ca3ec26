"""Anthropic's Messages route with scripted answers that cite the documents passed in the
request, as Claude's citations do, so a retrieval-augmented turn with provider citations runs
offline (the ``anthropic`` SDK takes ``StandIn.base_url("anthropic")`` as its ``base_url``).

A ``document`` block with ``citations: {enabled: true}`` (a plain-text or custom-content
source) is citable; the default answer cites the first two citable documents, one text block
each carrying a ``char_location`` citation that names its ``document_index`` (counted over every
document block of the request, as Anthropic counts). With no citable document the answer reads
the prompt's labels as ``spanledger.testing.chat`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from spanledger.testing.answers import _Answer, _answer_id, _reports, _tokens, _usage_value
from spanledger.testing.chat import Answer, cited_sentence, content_text, reply_text
from spanledger.testing.routes import Route, _built_in, _figure

__all__ = ["ROUTES", "anthropic_messages"]


def _documents(body: dict[str, Any]) -> list[tuple[str, str | None, bool]]:
    """Every document block in request order: its text, its title, whether it may be cited."""
    found: list[tuple[str, str | None, bool]] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "document":
                continue
            source = block.get("source")
            kind = source.get("type") if isinstance(source, dict) else None
            text = source.get("data") if isinstance(source, dict) and kind == "text" else None
            if isinstance(source, dict) and kind == "content":
                text = content_text(source.get("content"))
            title = block.get("title")
            citations = block.get("citations")
            enabled = isinstance(citations, dict) and citations.get("enabled") is True
            found.append(
                (
                    text if isinstance(text, str) else "",
                    title if isinstance(title, str) else None,
                    enabled,
                )
            )
    return found


def _prompt(body: dict[str, Any]) -> str:
    system = body.get("system")
    parts = [content_text(system)] if system is not None else []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict):
            parts.append(content_text(message.get("content")))
    return "\n".join(parts)


def _citation(index: int, documents: list[tuple[str, str | None, bool]]) -> dict[str, Any]:
    text, title = (
        (documents[index][0], documents[index][1]) if index < len(documents) else ("", None)
    )
    return {
        "type": "char_location",
        "cited_text": text,
        "document_index": index,
        "document_title": title,
        "start_char_index": 0,
        "end_char_index": len(text),
        "file_id": None,
    }


def anthropic_messages(
    *,
    answer: Answer = None,
    cite: Sequence[int] | None = None,
    input_tokens: int | None = None,
    report_usage: bool = True,
) -> Route:
    """Anthropic ``POST /v1/messages``: an assistant message whose text blocks cite, by
    ``document_index``, the documents ``cite`` names (by default the first two documents with
    citations enabled; an index past the request's documents is cited as given), with
    ``answer`` as the text when it is set; and ``usage.input_tokens`` = ``input_tokens`` (by
    default counted from the system prompt, the messages and the documents), with no cache
    reads or writes."""
    figure = _figure("input_tokens", input_tokens)
    chosen = None if cite is None else tuple(cite)

    def respond(body: dict[str, Any], model: str) -> _Answer:
        documents = _documents(body)
        prompt = _prompt(body)
        cited = chosen
        if cited is None:
            cited = tuple(i for i, (_, _, enabled) in enumerate(documents) if enabled)[:2]
        blocks: list[dict[str, Any]]
        if cited and answer is None:
            blocks = [
                {"type": "text", "text": cited_sentence(n), "citations": [_citation(i, documents)]}
                for n, i in enumerate(cited)
            ]
        elif cited:
            text = reply_text(answer, prompt)
            blocks = [
                {
                    "type": "text",
                    "text": text,
                    "citations": [_citation(i, documents) for i in cited],
                }
            ]
        else:
            blocks = [{"type": "text", "text": reply_text(answer, prompt)}]
        payload: dict[str, Any] = {
            "id": "msg_" + _answer_id(body).replace("-", "")[:24],
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": "end_turn",
            "stop_sequence": None,
        }
        if _reports(model, report_usage):
            read = figure
            if read is None:
                read = _tokens("\n".join([prompt, *(text for text, _, _ in documents)]))
            payload["usage"] = {
                "input_tokens": _usage_value(model, read),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": _tokens("".join(str(block["text"]) for block in blocks)),
                "service_tier": "standard",
            }
        return 200, payload, {}

    return _built_in("anthropic", "/v1/messages", respond)


ROUTES: tuple[Callable[[], Route], ...] = (anthropic_messages,)
"""The Anthropic routes a fresh ``StandIn`` answers."""
