"""Text every wire format can carry.

A Python string can hold a lone surrogate (a model name or request id that came through JSON
as ``"\\ud800"``, say). It has no UTF-8 form, so one such attribute makes the OTLP encoder
refuse the whole batch its span travels in. Exporters render caller-given text through
``encodable``: a lone surrogate becomes its ``\\uXXXX`` escape, everything else is unchanged.
"""

from __future__ import annotations

__all__ = ["encodable"]


def encodable(text: str) -> str:
    """``text``, with any lone surrogate written as its escape (ASCII text costs one scan)."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
