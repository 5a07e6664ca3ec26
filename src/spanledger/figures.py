"""The figure rule: read a provider-reported count or id, or report it as absent.

A figure that is missing or malformed (a bool, a negative, ``6.0``, ``"12"``, a container, or a
count no real bill can hold: above ``MAX_COUNT``) is *not reported*: the reader returns
``None``. It never raises and never repairs the value, so a garbage token count cannot fail a
good response and cannot reach a bill as a made-up number.
"""

from __future__ import annotations

__all__ = ["MAX_COUNT", "count", "dig", "response_id", "response_model", "text"]

MAX_COUNT = 2**63 - 1
"""The largest count a figure may hold: the signed 64-bit range every metric backend and
wire format (OTLP, Prometheus, Langfuse) can carry. No provider bills anywhere near it."""


def count(value: object) -> int | None:
    """Return ``value`` if it is a JSON integer in ``0..MAX_COUNT``, else ``None``."""
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    return None


def text(value: object) -> str | None:
    """Return ``value`` if it is a non-empty string of valid Unicode text, else ``None``.

    A string holding a lone surrogate (JSON can escape one: ``"\\ud800"``) has no UTF-8 form,
    so no span, observation or log line could carry it as sent: like any malformed figure it is
    not reported, and stays verbatim on ``raw``. An empty id is no id.
    """
    if type(value) is not str or not value:
        return None
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


response_id = text
"""An id the provider gave the response: ``text``."""

response_model = text
"""The model name the provider echoed: ``text``."""


def dig(payload: object, *path: str) -> object:
    """``payload[path[0]][path[1]]...``, or ``None`` when any step is missing or not an object:
    where a figure lives, read without ever raising."""
    node = payload
    for key in path:
        if type(node) is not dict:
            return None
        node = node.get(key)
    return node
