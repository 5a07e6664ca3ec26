"""The figure rule: read a provider-reported count or id, or report it as absent.

A figure that is missing or malformed (a bool, a negative, ``6.0``, ``"12"``, a container, or a
count no real bill can hold: above ``MAX_COUNT``) is *not reported*: the reader returns
``None``. It never raises and never repairs the value, so a garbage token count cannot fail a
good response and cannot reach a bill as a made-up number.
"""

from __future__ import annotations

__all__ = ["MAX_COUNT", "count", "response_id"]

MAX_COUNT = 2**63 - 1
"""The largest count a figure may hold: the signed 64-bit range every metric backend and
wire format (OTLP, Prometheus, Langfuse) can carry. No provider bills anywhere near it."""


def count(value: object) -> int | None:
    """Return ``value`` if it is a JSON integer in ``0..MAX_COUNT``, else ``None``."""
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    return None


def response_id(value: object) -> str | None:
    """Return ``value`` if it is a non-empty string, else ``None`` (an empty id is no id)."""
    if type(value) is str and value:
        return value
    return None
