"""Charts drawn as inline SVG by pygal (the ``html`` extra), with no script: the page opens
offline and runs nothing.

pygal writes its figures as SVG text, escaped by its XML serializer. Each bar carries a
``<title>`` with its category, series and exact figure, so a pointer over it shows what the
bar is worth; pygal's own script (its configuration, and the tooltips it would fetch) is
removed from every chart.

Every text handed to pygal is bounded here, whatever the log holds: labels, legend entries,
axis titles and the figures printed on bars to ``LABEL_LIMIT`` characters, the chart's title
and each part of a bar's title to ``PAGE_LIMIT``, axis ticks to ``_TICK_LIMIT``, each with its
unsafe characters escaped (``spanledger.display``). The bound is what keeps a chart
finite: pygal 3.1 wraps a title in a loop that never ends when the room left beside the
labels is under one character, and a label wider than the chart (a 250-character model name)
left none. With these bounds at least several characters' room is always left.
"""

from __future__ import annotations

import importlib.util
import math
from decimal import Decimal
from typing import Any

from spanledger.display import LABEL_LIMIT, page_text
from spanledger.errors import ConfigurationError
from spanledger.fleet.html_series import Chart

__all__ = ["MISSING_EXTRA", "chart_svg", "require_charting"]

MISSING_EXTRA = (
    "--html needs the charting library of the html extra: pip install 'spanledger[html]'"
)

_COLOURS = (
    "#2f6db5",
    "#e07b39",
    "#3a9e6f",
    "#c2484d",
    "#8a63b8",
    "#b8952f",
    "#4aa3b5",
    "#7a7a7a",
    "#a0522d",
)
_SVG = "{http://www.w3.org/2000/svg}"
_PRINTED_UP_TO = 31
"""A chart with more categories than this prints no value on its bars (the titles still do)."""
_LABELLED_UP_TO = 31
"""A chart by day with more days than this labels only some of them."""
_TICK_LIMIT = 12
"""Characters of an axis tick: longer numbers are written with an exponent."""
_DRAWN_FROM, _DRAWN_UP_TO = Decimal("1e-100"), Decimal("1e100")
"""The range of bars drawn: a figure above it (which only a damaged log holds) is drawn as
long as its top, one below it as nothing, since pygal's scales overflow a float, or divide by
zero, far beyond it. The bar's title keeps the figure."""


def require_charting() -> None:
    """Raise ``ConfigurationError`` naming the extra when pygal is not installed."""
    if importlib.util.find_spec("pygal") is None:
        raise ConfigurationError(MISSING_EXTRA)


def chart_svg(chart: Chart) -> str:
    """``chart`` as an SVG element, ready to inline in HTML."""
    try:
        import pygal
        from pygal.style import Style
    except ImportError:
        raise ConfigurationError(MISSING_EXTRA) from None
    style = Style(
        background="#ffffff",
        plot_background="#ffffff",
        foreground="#222222",
        foreground_strong="#111111",
        foreground_subtle="#d0d0d0",
        font_family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
        label_font_size=12,
        major_label_font_size=12,
        value_font_size=11,
        title_font_size=16,
        legend_font_size=12,
        value_label_font_size=11,
        colors=_COLOURS,
    )
    kind: Any
    if chart.horizontal:
        kind = pygal.HorizontalStackedBar if chart.stacked else pygal.HorizontalBar
    else:
        kind = pygal.StackedBar if chart.stacked else pygal.Bar
    rows = len(chart.categories)
    height = max(240, 150 + 30 * rows) if chart.horizontal else 460
    if chart.stacked or chart.legend:
        height += 40 + 30 * ((len(chart.series) + 4) // 5)
    graph = kind(
        style=style,
        js=[],
        disable_xml_declaration=True,
        width=1000,
        height=height,
        title=page_text(chart.title),
        x_title=_label(chart.unit if chart.horizontal else chart.axis),
        y_title=_label(chart.axis if chart.horizontal else chart.unit),
        show_legend=chart.stacked or chart.legend,
        legend_at_bottom=True,
        legend_at_bottom_columns=min(len(chart.series), 5) or 1,
        truncate_legend=40,
        truncate_label=LABEL_LIMIT,
        print_values=not chart.stacked and rows <= _PRINTED_UP_TO,
        print_values_position="top",
        x_label_rotation=0 if chart.horizontal or rows <= 12 else 45,
        x_labels_major_every=_label_every(chart),
        show_minor_x_labels=chart.horizontal or rows <= _LABELLED_UP_TO,
        value_formatter=_axis_number,
        y_labels=_ticks(chart),
        margin_bottom=36 if chart.stacked or chart.legend else 10,
        spacing=12,
        no_data_text=page_text(chart.empty or "nothing to draw"),
    )
    order = slice(None, None, -1 if chart.horizontal else 1)  # pygal draws bars upwards
    graph.x_labels = [_label(category) for category in chart.categories[order]]
    for series in chart.series:
        graph.add(
            _label(series.name),
            [
                None
                if value is None
                else {
                    "value": float(_drawn(value)),
                    "formatter": _fixed(_label(text)),
                    "label": _bar_title(category, series.name, text),
                }
                for category, value, text in zip(
                    chart.categories[order],
                    series.values[order],
                    series.texts[order],
                    strict=True,
                )
            ],
        )
    graph.add_xml_filter(_offline)
    if chart.horizontal:
        graph.add_xml_filter(_figures_after_bars)
    rendered = graph.render(is_unicode=True)
    return str(rendered)


def _label(text: str) -> str:
    """A text drawn inside the chart: escaped and cut to ``LABEL_LIMIT``."""
    return page_text(text, LABEL_LIMIT)


def _bar_title(category: str, series: str, figure: str) -> str:
    """A bar's title, ``category · series: figure``, each part escaped and cut."""
    return f"{page_text(category)} · {page_text(series)}: {page_text(figure)}"


def _drawn(value: Decimal | int) -> Decimal:
    """The length ``value``'s bar is drawn at: itself within the drawn range, else its
    nearest end (nothing, for a figure too small to draw)."""
    exact = Decimal(value)
    if exact < _DRAWN_FROM:
        return Decimal(0)
    return min(exact, _DRAWN_UP_TO)


def _label_every(chart: Chart) -> int | None:
    """Label every n-th bar of a chart with many (the first of each stretch), so the labels
    stay readable; every bar is labelled up to ``_LABELLED_UP_TO``."""
    rows = len(chart.categories)
    if chart.horizontal or rows <= _LABELLED_UP_TO:
        return None
    return -(-rows // _LABELLED_UP_TO)


def _axis_number(value: float) -> str:
    """An axis tick, in plain digits (the bars' own figures are exact, not these), or with
    an exponent when plain digits would pass ``_TICK_LIMIT`` characters."""
    if not math.isfinite(value):
        return str(value)
    whole = value == int(value)
    plain = f"{int(value):,}" if whole else f"{Decimal(repr(value)).normalize():f}"
    return plain if len(plain) <= _TICK_LIMIT else f"{value:.3g}"


def _ticks(chart: Chart) -> list[float] | None:
    """Round ticks from 0 past the tallest bar: whole numbers for counts (never 0.2 calls),
    few enough for money that its plain digits do not run into each other."""
    if not chart.series:
        return None
    top = max(
        sum((_drawn(series.values[i] or 0) for series in chart.series), Decimal(0))
        for i in range(len(chart.categories))
    )
    whole = chart.unit in {"calls", "requests"}
    step = _nice_step(top / 6 if top > 0 else Decimal(1), whole)
    count = int(top / step) + (1 if top % step else 0)
    if chart.horizontal and step * count < top * Decimal("1.2"):
        count += 1  # room after the longest bar for its figure
    return [float(step * n) for n in range(count + 1)]


def _nice_step(rough: Decimal, whole: bool) -> Decimal:
    """The least of ..., 0.1, 0.2, 0.5, 1, 2, 5, 10, ... at or above ``rough`` (at least 1
    when ``whole``)."""
    step = Decimal(1) if whole else Decimal(1).scaleb(rough.adjusted())
    while True:
        for factor in (1, 2, 5):
            if step * factor >= rough:
                return step * factor
        step *= 10


def _fixed(text: str) -> Any:
    def formatter(_: object) -> str:
        return text

    return formatter


def _figures_after_bars(root: Any) -> Any:
    """Print a horizontal bar's figure just after its end, not centred on it (where a short
    bar's figure would run into the labels)."""
    for text in root.iter():
        if text.get("class") == "value" and text.get("x") is not None:
            text.set("text-anchor", "start")
            text.set("x", str(float(text.get("x")) + 4))
    return root


def _offline(root: Any) -> Any:
    """Drop every script and comment pygal wrote, and give each bar a ``<title>`` from its
    label, so the chart runs nothing and still names its figures."""
    for parent in list(root.iter()):
        for child in list(parent):
            tag = child.tag
            if not isinstance(tag, str) or tag.removeprefix(_SVG) == "script":
                parent.remove(child)
                continue
            if tag.removeprefix(_SVG) == "desc" and child.get("class") == "label":
                child.tag = tag.replace("desc", "title")
                child.attrib.pop("class", None)
    return root
