"""Chat routes with scripted answers, so a whole retrieval-augmented turn runs offline: the
model's answer cites the sources the prompt labelled (``[1]``, ``Source 2:``, ``Document 3``),
or says what the test scripts.

The default answer reads the prompt the way a model asked to cite would: it names the first two
labels that stand before a passage in the prompt, one sentence each (``The sources say so
[1]. They agree [2].``), and cites nothing when the prompt labels nothing. ``answer=`` scripts
it instead: a fixed text, or a function of the prompt text. Usage is reported as the vendor
does (a token per four UTF-8 bytes of every message), unless ``report_usage`` is False.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spanledger.testing.answers import _Answer, _answer_id, _reports, _tokens, _usage_value
from spanledger.testing.routes import Route, _built_in, _figure

__all__ = ["ROUTES", "openai_chat_completions"]

Answer = str | Callable[[str], str] | None
"""What a chat route answers: a fixed text, a function of the prompt's text, or ``None`` for
the default answer, which cites the first two labels the prompt gives its passages."""

_LABELS = re.compile(
    r"^\s*(?:\[(\w{1,12})\]|(?:source|document|doc)\s*#?(\d{1,6})\s*:?)",
    re.IGNORECASE | re.MULTILINE,
)
_SENTENCES = ("The sources say so", "They agree")


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


def _message_text(message: object) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _prompt_of(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    return "\n".join(_message_text(m) for m in messages) if isinstance(messages, list) else ""


def _reply_text(answer: Answer, prompt: str) -> str:
    if answer is None:
        return default_answer(prompt)
    return answer if isinstance(answer, str) else answer(prompt)


def openai_chat_completions(
    *, answer: Answer = None, input_tokens: int | None = None, report_usage: bool = True
) -> Route:
    """OpenAI ``POST /v1/chat/completions`` (the wire LangChain's ``ChatOpenAI``, LlamaIndex's
    and Haystack's OpenAI components and every OpenAI-compatible client use): one assistant
    message with ``answer`` (see the module), and ``usage.prompt_tokens`` = ``input_tokens``
    (by default counted from the messages)."""
    figure = _figure("input_tokens", input_tokens)

    def respond(body: dict[str, Any], model: str) -> _Answer:
        prompt = _prompt_of(body)
        text = _reply_text(answer, prompt)
        payload: dict[str, Any] = {
            "id": "chatcmpl-" + _answer_id(body)[:18],
            "object": "chat.completion",
            "created": 1764806400,
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
        return 200, payload, {}

    return _built_in("openai", "/v1/chat/completions", respond)


ROUTES: tuple[Callable[[], Route], ...] = (openai_chat_completions,)
"""The chat routes a fresh ``StandIn`` answers."""
