"""Cohere's chat route (v2) with scripted answers that cite the documents passed beside the
messages, as Cohere's RAG citations do (``cohere.ClientV2`` takes
``StandIn.base_url("cohere")`` as its ``base_url``).

Each document is a text or ``{"id", "data": {...}}``; one sent without an id is named
``doc:<position>``, as Cohere names it. The default answer cites the first two documents, one
sentence each, every citation naming its document in ``sources`` by id. With no documents the
answer reads the prompt's labels as ``spanledger.testing.chat`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from spanledger.testing.answers import _Answer, _answer_id, _reports, _tokens, _usage_value
from spanledger.testing.chat import Answer, cited_sentence, messages_text, reply_text
from spanledger.testing.routes import Route, _built_in, _figure

__all__ = ["ROUTES", "cohere_chat"]


def _documents(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each document's id and the fields a citation's source echoes."""
    given = body.get("documents")
    found: list[tuple[str, dict[str, Any]]] = []
    for position, document in enumerate(given if isinstance(given, list) else ()):
        if isinstance(document, dict):
            data = document.get("data")
            fields = dict(data) if isinstance(data, dict) else {"text": str(data)}
            ident = document.get("id")
            found.append((ident if isinstance(ident, str) and ident else f"doc:{position}", fields))
        else:
            found.append((f"doc:{position}", {"text": str(document)}))
    return found


def _source(index: int, documents: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    ident, fields = documents[index] if index < len(documents) else (f"doc:{index}", {})
    return {"type": "document", "id": ident, "document": {"id": ident, **fields}}


def cohere_chat(
    *,
    answer: Answer = None,
    cite: Sequence[int] | None = None,
    input_tokens: int | None = None,
    report_usage: bool = True,
) -> Route:
    """Cohere ``POST /v2/chat``: an assistant message whose ``citations`` name, by id, the
    documents ``cite`` gives the positions of (by default the first two; a position past the
    request's documents is cited as ``doc:<position>``), with ``answer`` as the text when it
    is set; and ``usage.tokens.input_tokens`` (and ``billed_units``) = ``input_tokens`` (by
    default counted from the messages and the documents)."""
    figure = _figure("input_tokens", input_tokens)
    chosen = None if cite is None else tuple(cite)

    def respond(body: dict[str, Any], model: str) -> _Answer:
        documents = _documents(body)
        prompt = messages_text(body.get("messages"))
        cited = chosen if chosen is not None else tuple(range(len(documents)))[:2]
        citations: list[dict[str, Any]] = []
        if cited and answer is None:
            sentences = []
            start = 0
            for number, index in enumerate(cited):
                sentence = cited_sentence(number)
                citations.append(
                    {
                        "start": start,
                        "end": start + len(sentence),
                        "text": sentence,
                        "sources": [_source(index, documents)],
                        "type": "TEXT_CONTENT",
                    }
                )
                sentences.append(sentence)
                start += len(sentence) + 1
            text = " ".join(sentences)
        else:
            text = reply_text(answer, prompt)
            if cited:
                citations.append(
                    {
                        "start": 0,
                        "end": len(text),
                        "text": text,
                        "sources": [_source(index, documents) for index in cited],
                        "type": "TEXT_CONTENT",
                    }
                )
        message: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        if citations:
            message["citations"] = citations
        payload: dict[str, Any] = {
            "id": _answer_id(body),
            "message": message,
            "finish_reason": "COMPLETE",
        }
        if _reports(model, report_usage):
            read = figure
            if read is None:
                texts = [prompt, *("\n".join(map(str, f.values())) for _, f in documents)]
                read = _tokens("\n".join(texts))
            written = _tokens(text)
            payload["usage"] = {
                "billed_units": {
                    "input_tokens": _usage_value(model, read),
                    "output_tokens": written,
                },
                "tokens": {"input_tokens": _usage_value(model, read), "output_tokens": written},
            }
        return 200, payload, {}

    return _built_in("cohere", "/v2/chat", respond)


ROUTES: tuple[Callable[[], Route], ...] = (cohere_chat,)
"""The Cohere chat routes a fresh ``StandIn`` answers."""
