"""The HTML report read back as a person's browser would see its text: the bars' titles per
chart, the totals table, the summary tiles, what each empty chart says, every element."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from spanledger.cli import main


@dataclass
class Page(HTMLParser):
    bars: dict[str, list[str]] = field(default_factory=dict)
    empty: dict[str, str] = field(default_factory=dict)
    rows: list[list[str]] = field(default_factory=list)
    tiles: list[tuple[str, str]] = field(default_factory=list)
    elements: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    captions: list[str] = field(default_factory=list)
    _chart: str | None = None
    _open: list[str] = field(default_factory=list)
    _text: list[str] = field(default_factory=list)
    _in_totals: bool = False

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.elements.append((tag, named))
        if tag == "figure":
            self._chart = named.get("data-chart")
        if tag == "table" and "data-totals" in named:
            self._in_totals = True
        if tag == "tr" and self._in_totals:
            self.rows.append([])
        self._open.append(tag)
        self._text = []

    def handle_endtag(self, tag: str) -> None:
        text = "".join(self._text)
        if tag == "title" and self._chart and " · " in text:
            self.bars.setdefault(self._chart, []).append(text)
        elif tag == "p" and self._chart:
            self.empty[self._chart] = text
        elif tag in {"td", "th"} and self._in_totals and self.rows:
            self.rows[-1].append(text)
        elif tag == "b":
            self.tiles.append((text, ""))
        elif tag == "span" and self.tiles and not self.tiles[-1][1]:
            self.tiles[-1] = (self.tiles[-1][0], text)
        elif tag == "figcaption":
            self.captions.append(text)
        if tag == "figure":
            self._chart = None
        if tag == "table":
            self._in_totals = False
        if self._open:
            self._open.pop()
        self._text = []

    def handle_data(self, data: str) -> None:
        self._text.append(data)

    def bar_figures(self, chart: str) -> dict[str, str]:
        """``category · series`` -> figure, for each bar of ``chart``."""
        figures = {}
        for title in self.bars.get(chart, []):
            named, _, figure = title.rpartition(": ")
            figures[named] = figure
        return figures


def read_page(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def run(*args: str) -> tuple[int, str, str]:
    """``spanledger`` with ``args``: status, standard output, standard error."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()
