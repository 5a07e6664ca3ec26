"""Chat routes with scripted answers, so a whole retrieval-augmented turn runs offline: the
model's answer cites the sources the prompt labelled (``[1]``, ``Source 2:``, ``Document 3``),
or says what the test scripts. OpenAI's chat completions and Responses live here; Anthropic's
Messages and Cohere's chat, whose answers cite the documents passed beside the prompt, in
``spanledger.testing.anthropic`` and ``spanledger.testing.chat_cohere``.

The default answer reads the prompt the way a model asked to cite would: it names the first two
labels that stand before a passage in the prompt, one sentence each (``The sources say so
[1]. They agree [2].``), and cites nothing when the prompt labels nothing. ``answer=`` scripts
it instead: a fixed text, or a function of the prompt text. Usage is reported as the vendor
does (a token per four UTF-8 bytes of every message), unless ``report_usage`` is False. A chat
completion asked for with ``stream: true`` is answered as OpenAI streams one (server-sent
events, the text in one chunk).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from spanledger.testing.answers import (
    _Answer,
    _answer_id,
    _model_of,
    _reports,
    _tokens,
    _usage_value,
)
from spanledger.testing.routes import RecordedRequest, Reply, Route, _built_in, _figure

__all__ = ["ROUTES", "openai_chat_completions", "openai_responses"]

Answer = str | Callable[[str], str] | None
"""What a chat route answers: a fixed text, a function of the prompt's text, or ``None`` for
the default answer, which cites the first two labels the prompt gives its passages."""

_LABELS = re.compile(
    r"^\s*(?:\[(\w{1,12})\]|(?:source|document|doc)\s*#?(\d{1,6})\s*:?)",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCES = ("The sources say so", "They agree")
_CREATED = 1764806400


def default_answer(prompt: str) -> str:
    """Cite the first two labels that lead a line of ``prompt``, one sentence each; nothing
    to cite, no citation."""
    labels: list[str] = []
    for found in _LABELS.finditer(prompt):
        label = found.group(1) or found.group(2)
        if label not in labels:
            labels.append(label)
        if len(labels) == len(_SENTENCES):
            break
    if not labels:
        return "The context does not say."
    return " ".join(
        f"{sentence} [{label}]." for sentence, label in zip(_SENTENCES, labels, strict=False)
    )


def cited_sentence(number: int) -> str:
    """The sentence a scripted answer gives the ``number``-th document it cites (from 0)."""
    return f"{_SENTENCES[number]}." if number < len(_SENTENCES) else "Another passage agrees."


def reply_text(answer: Answer, prompt: str) -> str:
    """What ``answer`` says to ``prompt``."""
    if answer is None:
        return default_answer(prompt)
    return answer if isinstance(answer, str) else answer(prompt)


def content_text(content: object) -> str:
    """A message's content as text: itself, or its text blocks joined by lines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""


def messages_text(messages: object) -> str:
    """Every message's content as one text, a line between messages."""
    if not isinstance(messages, list):
        return ""
    return "\n".join(
        content_text(message.get("content")) for message in messages if isinstance(message, dict)
    )


def openai_chat_completions(
    *, answer: Answer = None, input_tokens: int | None = None, report_usage: bool = True
) -> Route:
    """OpenAI ``POST /v1/chat/completions`` (the wire LangChain's ``ChatOpenAI``, LlamaIndex's
    and Haystack's OpenAI components and every OpenAI-compatible client use): one assistant
    message with ``answer`` (see the module), and ``usage.prompt_tokens`` = ``input_tokens``
    (by default counted from the messages); streamed as server-sent events when the request
    asks for ``stream``."""
    figure = _figure("input_tokens", input_tokens)

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        model = _model_of("openai", body, request.params)
        prompt = messages_text(body.get("messages"))
        text = reply_text(answer, prompt)
        ident = "chatcmpl-" + _answer_id(body)[:18]
        if body.get("stream") is True:
            return Reply(200, raw=_stream(ident, model, text), headers=_EVENT_STREAM)
        payload: dict[str, Any] = {
            "id": ident,
            "object": "chat.completion",
            "created": _CREATED,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
        if _reports(model, report_usage):
            read = _tokens(prompt) if figure is None else figure
            written = _tokens(text)
            payload["usage"] = {
                "prompt_tokens": _usage_value(model, read),
                "completion_tokens": written,
                "total_tokens": read + written,
            }
        return Reply(200, payload)

    return Route("openai", "/v1/chat/completions", respond)


_EVENT_STREAM = {"content-type": "text/event-stream; charset=utf-8"}


def _stream(ident: str, model: str, text: str) -> bytes:
    """A chat completion as OpenAI streams it: a role and text chunk, a finishing chunk,
    ``[DONE]``."""

    def chunk(delta: dict[str, str], finish: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
            "choices": [choice],
        }

    events: Iterable[object] = (
        chunk({"role": "assistant", "content": text}, None),
        chunk({}, "stop"),
    )
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode("utf-8")


def _responses_prompt(body: dict[str, Any]) -> str:
    given = body.get("input")
    parts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    if isinstance(given, str):
        parts.append(given)
    elif isinstance(given, list):
        for item in given:
            if isinstance(item, dict):
                parts.append(content_text(item.get("content", item.get("output"))))
    return "\n".join(parts)


def openai_responses(
    *, answer: Answer = None, input_tokens: int | None = None, report_usage: bool = True
) -> Route:
    """OpenAI ``POST /v1/responses``: one ``message`` output item whose ``output_text`` is
    ``answer`` (see the module), and ``usage.input_tokens`` = ``input_tokens`` (by default
    counted from the instructions and input)."""
    figure = _figure("input_tokens", input_tokens)

    def respond(body: dict[str, Any], model: str) -> _Answer:
        prompt = _responses_prompt(body)
        text = reply_text(answer, prompt)
        ident = _answer_id(body).replace("-", "")
        payload: dict[str, Any] = {
            "id": "resp_" + ident,
            "object": "response",
            "created_at": _CREATED,
            "status": "completed",
            "model": model,
            "output": [
                {
                    "type": "message",
                    "id": "msg_" + ident,
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        if _reports(model, report_usage):
            read = _tokens(prompt) if figure is None else figure
            written = _tokens(text)
            payload["usage"] = {
                "input_tokens": _usage_value(model, read),
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": written,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": read + written,
            }
        return 200, payload, {}

    return _built_in("openai", "/v1/responses", respond)


ROUTES: tuple[Callable[[], Route], ...] = (openai_chat_completions, openai_responses)
"""The OpenAI chat routes a fresh ``StandIn`` answers."""
