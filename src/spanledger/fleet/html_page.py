"""``spanledger report --html``: the priced report as one HTML file that opens offline.

Everything is inline (styles, SVG charts) and a Content-Security-Policy forbids the page any
script or fetch. Every text that comes from a log (provider, model and request names, reasons)
is HTML-escaped; the page shows the figures the text report prints and nothing more: no
payload, no path. The totals table is cut at ``MAX_TABLE_ROWS`` rows so the file stays small
whatever the log's size.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from html import escape
from pathlib import Path

from spanledger.attribution.summary import counted, figure_rows
from spanledger.fleet.html_charts import chart_svg
from spanledger.fleet.html_series import Chart, report_charts
from spanledger.fleet.report import NO_KEY, FleetReport, amount_text
from spanledger.ledger.report import money

__all__ = ["MAX_TABLE_ROWS", "render_page", "write_page"]

MAX_TABLE_ROWS = 1000
"""Rows of the totals table on the page; ``--csv`` lists them all."""
_MAX_LISTED = 200

_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'"
_STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222;
  margin: 0 auto; max-width: 1060px; padding: 24px 28px 48px; background: #fafafa; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 10px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.lede { color: #555; margin: 0 0 14px; }
.summary { display: flex; flex-wrap: wrap; gap: 12px; margin: 14px 0; }
.summary div { background: #fff; border: 1px solid #e2e2e2; border-radius: 6px;
  padding: 10px 14px; min-width: 120px; }
.summary b { display: block; font-size: 20px; }
.summary span { color: #666; font-size: 13px; }
figure { margin: 12px 0; background: #fff; border: 1px solid #e2e2e2; border-radius: 6px;
  padding: 8px; }
figure svg { width: 100%; height: auto; display: block; }
figcaption, .note { color: #666; font-size: 13px; margin: 6px 4px 2px; }
.empty { background: #fff; border: 1px dashed #ccc; border-radius: 6px; padding: 18px;
  color: #666; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { border-bottom: 1px solid #eee; padding: 5px 8px; text-align: left;
  white-space: nowrap; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
thead th { background: #f0f0f0; position: sticky; top: 0; }
pre { background: #fff; border: 1px solid #e2e2e2; border-radius: 6px; padding: 12px;
  white-space: pre-wrap; }
ul { margin: 6px 0; }
"""


def write_page(
    report: FleetReport,
    target: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> int:
    """Write the page to ``target`` (whole or not at all) and return its size in bytes."""
    data = render_page(report, since=since, until=until).encode("utf-8")
    folder = target.parent if str(target.parent) else Path(".")
    descriptor, staged = tempfile.mkstemp(prefix=".spanledger-", suffix=".html", dir=folder)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
        os.chmod(staged, 0o644)
        os.replace(staged, target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return len(data)


def render_page(
    report: FleetReport, *, since: datetime | None = None, until: datetime | None = None
) -> str:
    """The whole page as text."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>spanledger report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Retrieval spend report</h1>",
        f'<p class="lede">{escape(_selection(report, since, until))}</p>',
        _summary(report),
    ]
    for title, charts in report_charts(report):
        parts.append(f"<section><h2>{escape(title)}</h2>")
        parts.extend(_figure(chart) for chart in charts)
        parts.append("</section>")
    parts.append(_totals(report))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _selection(report: FleetReport, since: datetime | None, until: datetime | None) -> str:
    said = [f"{counted(report.lines, 'line')} read", "rows grouped by " + ", ".join(report.by)]
    if since is not None:
        said.append(f"calls started at or after {since.isoformat()}")
    if until is not None:
        said.append(f"calls started before {until.isoformat()}")
    said.append("days in UTC")
    return "; ".join(said)


def _summary(report: FleetReport) -> str:
    tiles = [(str(report.calls), "calls")]
    tiles.extend(
        (f"{money(amount)} {currency}", f"known spend ({currency})")
        for currency, amount in sorted(report.spend().items())
    )
    if not report.spend():
        tiles.append(("none", "known spend"))
    tiles.extend((str(count), status) for status, count in report.status_counts().items())
    tiles.extend(_context_tiles(report))
    cells = "".join(
        f"<div><b>{escape(value)}</b><span>{escape(label)}</span></div>" for value, label in tiles
    )
    return f'<div class="summary" data-summary>{cells}</div>'


def _figure(chart: Chart) -> str:
    key = escape(chart.key, quote=True)
    if chart.empty is not None:
        return (
            f'<figure data-chart="{key}"><figcaption>{escape(chart.title)}</figcaption>'
            f'<p class="empty" data-empty>{escape(chart.empty)}</p></figure>'
        )
    note = f"<figcaption>{escape(chart.note)}</figcaption>" if chart.note else ""
    return f'<figure data-chart="{key}">{chart_svg(chart)}{note}</figure>'


def _totals(report: FleetReport) -> str:
    rows = sorted(report.rows.items())
    shown = rows[:MAX_TABLE_ROWS]
    head = "".join(f"<th>{escape(name)}</th>" for name in report.by)
    head += "<th>status</th>" + "".join(
        f'<th class="n">{name}</th>' for name in ("calls", "amount", "tokens", "units")
    )
    body = []
    for (keys, status, currency), row in shown:
        cells = "".join(f"<td>{escape(key or NO_KEY)}</td>" for key in keys)
        figures = (
            str(row.calls),
            amount_text(status, currency, row.amount),
            str(row.input_tokens),
            str(row.search_units),
        )
        cells += f"<td>{escape(status)}</td>"
        cells += "".join(f'<td class="n">{escape(value)}</td>' for value in figures)
        body.append(f"<tr>{cells}</tr>")
    parts = ["<section><h2>Totals</h2>"]
    if rows:
        parts.append(
            f"<table data-totals><thead><tr>{head}</tr></thead><tbody>{''.join(body)}"
            "</tbody></table>"
        )
    else:
        parts.append('<p class="empty">no call in the log (or in the range asked for)</p>')
    if len(rows) > len(shown):
        parts.append(
            f'<p class="note">the first {len(shown)} of {len(rows)} rows are shown; '
            "spanledger report --csv lists them all</p>"
        )
    parts.append(_not_priced(report))
    parts.append(_attribution_table(report))
    parts.append(_context_by_request(report))
    if report.problems:
        skipped = ", ".join(
            f"{reason}: {count}" for reason, count in sorted(report.problems.items())
        )
        parts.append(f'<p class="note">lines skipped: {escape(skipped)}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _context_tiles(report: FleetReport) -> list[tuple[str, str]]:
    """The known context spend and its unused part per currency, and the requests whose
    context spend is unknown (never shown as zero)."""
    figures = report.attribution
    if not figures.requests:
        return []
    tiles = []
    for currency, (context, _, unused) in sorted(figures.context_spend.items()):
        unit = f" ({currency})" if currency else ""
        tiles.append((f"{money(context)} {currency}".strip(), f"known context spend{unit}"))
        tiles.append((f"{money(unused)} {currency}".strip(), f"unused context spend{unit}"))
    tiles.append((str(figures.context_unknown), "requests with unknown context spend"))
    return tiles


def _attribution_table(report: FleetReport) -> str:
    """The attribution figures over the requests as a table of (figure, value) rows."""
    figures = report.attribution
    if not figures.requests:
        return '<h2>Attribution</h2><p class="empty">no request reports in the log</p>'
    rows = [
        ("requests", str(figures.requests)),
        ("with rendered context", str(figures.with_share)),
        *figure_rows(figures),
    ]
    body = "".join(
        f'<tr><th scope="row">{escape(label)}</th><td>{escape(value)}</td></tr>'
        for label, value in rows
    )
    return f"<h2>Attribution</h2><table data-attribution><tbody>{body}</tbody></table>"


def _context_by_request(report: FleetReport) -> str:
    """Each request's cited token share and context spend, when the report is grouped by
    request (the first ``MAX_TABLE_ROWS``)."""
    listed = report.attribution.by_request
    if not listed:
        return ""
    shown = listed[:MAX_TABLE_ROWS]
    head = "".join(
        f'<th class="n">{name}</th>' if name != "unknown" else f"<th>{name}</th>"
        for name in ("cited token share", "context spend", "cited", "unused", "unknown")
    )
    body = []
    for each in shown:
        data = each.to_json()
        unit = f" {each.currency}" if each.currency else ""
        cells = [
            f"{data[name]}{unit}" if data[name] is not None else "unknown"
            for name in ("context_spend", "cited_context_spend", "unused_context_spend")
        ]
        share = f"{each.share:.1%}" if each.share is not None else "n/a"
        figures = "".join(f'<td class="n">{escape(cell)}</td>' for cell in [share, *cells])
        why = escape(data["unknown_context_spend"] or "")
        body.append(f"<tr><td>{escape(each.request_id)}</td>{figures}<td>{why}</td></tr>")
    parts = [
        "<h3>By request</h3>",
        f"<table data-context><thead><tr><th>request</th>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>",
    ]
    if len(listed) > len(shown):
        parts.append(
            f'<p class="note">the first {len(shown)} of {len(listed)} requests are shown; '
            "spanledger report --by request --json lists them all</p>"
        )
    return "\n".join(parts)


def _not_priced(report: FleetReport) -> str:
    if not report.unpriced_models:
        return ""
    listed = sorted(report.unpriced_models.items())
    items = [
        "<li>" + escape(f"{provider}/{model}: {counted(calls, 'call')} ({reason})") + "</li>"
        for (provider, model, reason), calls in listed[:_MAX_LISTED]
    ]
    more = len(listed) - _MAX_LISTED
    if more > 0:
        items.append(f"<li>and {more} more</li>")
    return (
        "<h3>Not priced (add or fix these in the price table)</h3>"
        f"<ul data-not-priced>{''.join(items)}</ul>"
    )
