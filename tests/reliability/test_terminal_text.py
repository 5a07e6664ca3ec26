"""``spanledger.display``: log text shown in a terminal or on the page carries no control
character, separator or bidi control as itself, and never passes its bound."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Protocol

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanledger.display import (
    CELL_LIMIT,
    CUT_MARK,
    LABEL_LIMIT,
    PAGE_LIMIT,
    page_text,
    terminal_text,
)

C0 = [chr(point) for point in range(0x20)]
C1 = [chr(point) for point in range(0x80, 0xA0)]
SEPARATORS = ["\u2028", "\u2029"]
BIDI = [
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]
NONCHARACTERS = ["\ufffe", "\uffff", "\ufdd0", "\U0010fffe"]
UNSAFE = [*C0, "\x7f", *C1, *SEPARATORS, *BIDI, "\ud800", "\udfff", *NONCHARACTERS]
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class Show(Protocol):
    def __call__(self, value: str, limit: int = ...) -> str: ...


SHOWN: list[Show] = [terminal_text, page_text]


def test_the_bounds_are_the_documented_ones() -> None:
    assert (CELL_LIMIT, PAGE_LIMIT, LABEL_LIMIT, CUT_MARK) == (80, 120, 48, "…")


@pytest.mark.parametrize("show", SHOWN)
@pytest.mark.parametrize("character", UNSAFE, ids=lambda c: f"U+{ord(c):04X}")
def test_each_unsafe_character_is_a_visible_escape(show: Show, character: str) -> None:
    point = ord(character)
    if point <= 0xFF:
        escape = f"\\x{point:02x}"
    elif point <= 0xFFFF:
        escape = f"\\u{point:04x}"
    else:
        escape = f"\\U{point:08x}"
    assert show(f"a{character}b") == f"a{escape}b"


def test_escapes_are_written_as_python_writes_them() -> None:
    assert terminal_text("\x1b[31mred\x07") == "\\x1b[31mred\\x07"
    assert terminal_text("\x9b2J") == "\\x9b2J"
    assert terminal_text("line\u2028two\u2029") == "line\\u2028two\\u2029"
    assert terminal_text("\u202eevil\u202c") == "\\u202eevil\\u202c"
    assert terminal_text("a\tb\nc\rd\x00\x7f") == "a\\x09b\\x0ac\\x0dd\\x00\\x7f"
    assert terminal_text("\U0010fffe") == "\\U0010fffe"


@pytest.mark.parametrize("show", SHOWN)
def test_ordinary_text_is_itself(show: Show) -> None:
    for text in [
        "openai",
        "text-embedding-3-small",
        "2026-11-01",
        "Ünïcödé 模型 🙂 ﷺ",
        "<script>alert(1)</script>",  # HTML escaping is the page's, not this module's
        "back\\slash",
        "",
    ]:
        assert show(text) == text


@pytest.mark.parametrize(("show", "limit"), [(terminal_text, CELL_LIMIT), (page_text, PAGE_LIMIT)])
def test_a_long_field_is_cut_to_its_bound_with_the_mark(show: Show, limit: int) -> None:
    field = "m" * 200_000
    shown = show(field)
    assert len(shown) == limit
    assert shown == "m" * (limit - 1) + CUT_MARK
    assert show("m" * limit) == "m" * limit  # at the bound: whole, no mark
    assert show("m" * (limit + 1)).endswith(CUT_MARK)


def test_the_bound_counts_the_escapes_and_never_splits_one() -> None:
    shown = terminal_text("\x1b" * 100)
    assert len(shown) <= CELL_LIMIT
    assert shown.endswith(CUT_MARK)
    assert shown[:-1] == "\\x1b" * ((CELL_LIMIT - 1) // 4)
    assert terminal_text("ab\x1b", limit=5) == "ab" + CUT_MARK  # the escape whole or not at all
    assert terminal_text("ab\x1b", limit=6) == "ab\\x1b"


def test_an_explicit_bound_is_kept() -> None:
    assert terminal_text("abcdef", limit=4) == "abc" + CUT_MARK
    assert page_text("abcdef", limit=1) == CUT_MARK
    assert page_text("a", limit=1) == "a"
    with pytest.raises(ValueError, match="at least 1"):
        terminal_text("a", limit=0)


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=400), st.integers(1, 300))
def test_no_text_passes_its_bound_or_keeps_an_unsafe_character(text: str, limit: int) -> None:
    for show in SHOWN:
        shown = show(text, limit)
        assert len(shown) <= limit
        assert not XML_FORBIDDEN.search(shown)
        for character in shown:
            category = unicodedata.category(character)
            assert category not in {"Cc", "Cs", "Zl", "Zp"}, repr(character)
            assert character not in BIDI
        if len(text) > limit:
            assert shown.endswith(CUT_MARK)
            assert len(shown) >= limit - 9  # cut at the bound, less an escape that did not fit
        if text.isprintable() and text.isascii():
            assert shown == (text if len(text) <= limit else text[: limit - 1] + CUT_MARK)


def test_the_terminal_report_escapes_and_bounds_every_log_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose provider holds an escape sequence, whose model is 200,000 characters and
    whose currency rings the bell prints no control character and no line longer than the
    table's bounded columns; ``--json`` keeps the whole value."""
    from spanledger.cli import main

    long_model = "m" * 200_000
    line = {
        "schema": 1,
        "call_id": "c1",
        "provider": "acme\x1b[2J\u202e",
        "model": long_model,
        "started_at": "2026-11-03T10:00:00Z",
        "latency_ms": 1.0,
        "input_count": 1,
        "kind": "embedding",
        "usage": {"input_tokens": 5},
        "cost": {"status": "priced", "amount": "0.1", "currency": "US\x07D"},
    }
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(line) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(log)]) == 0
    out = capsys.readouterr().out
    assert not any(_unsafe(character) for character in out.replace("\n", ""))
    assert "acme\\x1b[2J\\u202e" in out
    assert "US\\x07D" in out
    assert max(len(each) for each in out.splitlines()) < 400
    assert main(["report", str(log), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["model"] == long_model


def _unsafe(character: str) -> bool:
    return unicodedata.category(character) in {"Cc", "Zl", "Zp"} or character in BIDI
