"""Text from an event log made safe to show: in a terminal, on the HTML page, in a chart.

A log is written by whatever called spanledger, so its provider and model names, request ids,
currencies and reasons may hold anything: terminal escape sequences, line breaks, bidi
overrides that reorder what is read, characters XML forbids, or a single field of 200,000
characters. Everything that shows such text goes through this module: characters that could
act on a terminal or break a page are shown as visible escapes (``\\x1b``, ``\\u2028``), the
way Python writes them, and text longer than its bound is cut, ending in ``CUT_MARK``. The
bounds count characters (code points), not terminal columns. ``--json`` and ``--csv`` keep
every value whole; only what is read by a person is cut.
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "CELL_LIMIT",
    "CUT_MARK",
    "LABEL_LIMIT",
    "PAGE_LIMIT",
    "escaped",
    "page_text",
    "terminal_text",
]

CELL_LIMIT = 80
"""Characters of one cell of the terminal table, escapes and mark included."""
PAGE_LIMIT = 120
"""Characters of one log-derived text on the HTML page (a table cell, a list entry, a tooltip)."""
LABEL_LIMIT = 48
"""Characters of one label drawn inside a chart (an axis label, a legend entry, a currency),
so that the chart library always has room to lay it out."""
CUT_MARK = "…"
"""Ends a text that was cut to its bound."""

_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""The marks, embeddings, overrides and isolates that reorder the text around them."""
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
"""Controls (C0, DEL, C1), lone surrogates, and the line and paragraph separators."""


def terminal_text(value: str, limit: int = CELL_LIMIT) -> str:
    """``value`` as a terminal may print it: every control, separator, bidi control, lone
    surrogate and noncharacter as a visible escape, and at most ``limit`` characters."""
    return _shown(value, limit)


def escaped(value: str) -> str:
    """``value`` with every unsafe character as its visible escape, whole: for text that is
    never cut (a request id in a line of its own, a reason)."""
    if value.isascii() and value.isprintable():
        return value
    return "".join(_escape(character) if _unsafe(character) else character for character in value)


def page_text(value: str, limit: int = PAGE_LIMIT) -> str:
    """``value`` as the HTML page and its SVG charts may carry it (still to be HTML-escaped):
    the same visible escapes as in the terminal, which leaves no character that XML 1.0
    forbids, and at most ``limit`` characters."""
    return _shown(value, limit)


def _shown(value: str, limit: int) -> str:
    """``value`` with each unsafe character written as its escape, cut to ``limit``
    characters (``limit`` at least 1) ending in ``CUT_MARK`` when it is longer. Only the
    first ``limit`` characters are read, so a field of any length costs the same."""
    if limit < 1:
        raise ValueError(f"a text bound is at least 1 character, not {limit}")
    pieces: list[str] = []
    length = 0
    for character in value[: limit + 1]:
        piece = _escape(character) if _unsafe(character) else character
        pieces.append(piece)
        length += len(piece)
        if length > limit:
            break
    else:
        return "".join(pieces)
    kept: list[str] = []
    room = limit - len(CUT_MARK)
    for piece in pieces:
        if len(piece) > room:
            break  # an escape is kept whole or not at all
        kept.append(piece)
        room -= len(piece)
    return "".join(kept) + CUT_MARK


def _unsafe(character: str) -> bool:
    """Whether ``character`` is shown as an escape rather than as itself."""
    if character.isprintable() and character.isascii():
        return False
    point = ord(character)
    return (
        unicodedata.category(character) in _ESCAPED_CATEGORIES
        or character in _BIDI_CONTROLS
        or 0xFDD0 <= point <= 0xFDEF
        or point & 0xFFFE == 0xFFFE
    )


def _escape(character: str) -> str:
    """``\\x1b``, ``\\u2028``, ``\\U0010fffe``: the escape Python would write."""
    point = ord(character)
    if point <= 0xFF:
        return f"\\x{point:02x}"
    if point <= 0xFFFF:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"
