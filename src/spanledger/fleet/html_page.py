"""``spanledger report --html``: the priced report as one HTML file that opens offline.

Everything is inline (styles, SVG charts) and a Content-Security-Policy forbids the page any
script or fetch. Every text that comes from a log (provider, model and request names,
currencies, reasons) has its control characters shown as escapes, is cut to ``PAGE_LIMIT``
characters (``spanledger.display``) and is HTML-escaped; the page shows the figures the
text report prints and nothing more: no payload, no path. The totals table is cut at
``MAX_TABLE_ROWS`` rows so the file stays small whatever the log's size.

``write_page`` writes the file whole or not at all, and only as a new file or over a regular
one: never through a symbolic link, never over a directory, pipe, device or socket.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import suppress
from datetime import datetime
from html import escape
from pathlib import Path

from spanledger.attribution.summary import counted, figure_rows
from spanledger.display import page_text
from spanledger.errors import ConfigurationError
from spanledger.fleet.html_charts import chart_svg
from spanledger.fleet.html_series import Chart, report_charts
from spanledger.fleet.report import NO_KEY, FleetReport, amount_text
from spanledger.ledger.report import money
from spanledger.ledger.totals import FIGURES

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
    """Write the page to ``target`` (whole or not at all) and return its size in bytes.

    The page is written to a temporary file beside ``target`` and renamed over it. A new
    file gets the mode the umask gives, as ``open`` would; a regular file keeps its mode (and,
    where allowed, its owner). Raises ``ConfigurationError`` when ``target`` is anything but a
    regular file (a symbolic link, directory, pipe, device or socket), and ``OSError`` naming
    ``target`` (never the temporary file) when it cannot be written."""
    before = _replaceable(target)
    data = render_page(report, since=since, until=until).encode("utf-8")
    try:
        staged = _staged(target.parent, data, before)
    except OSError as error:
        raise _naming(error, target) from error
    try:
        _replaceable(target)  # once more, as near the rename as can be
        os.replace(staged, target)
    except BaseException as error:
        staged.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _naming(error, target) from error
        raise
    return len(data)


def _replaceable(target: Path) -> os.stat_result | None:
    """``target``'s status when it is a regular file this process may write, ``None`` when
    there is none; else raise ``ConfigurationError`` (not a regular file) or ``OSError``."""
    try:
        found = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _naming(error, target) from error
    if not stat.S_ISREG(found.st_mode):
        raise ConfigurationError(
            f"{target} is {_kind(found.st_mode)}: --html writes a new file or replaces a "
            "regular one, nothing else"
        )
    if not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(target))
    return found


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((said for test, said in kinds if test(mode)), "not a regular file")


def _staged(folder: Path, data: bytes, before: os.stat_result | None) -> Path:
    """A new file in ``folder`` holding ``data``, synced, with ``before``'s mode (and owner,
    where allowed) when given, else the mode ``open`` gives a new file under the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    for _ in range(100):
        staged = folder / f".spanledger-{secrets.token_hex(8)}.html"
        try:
            descriptor = os.open(staged, flags, 0o666)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if before is not None:
            _keep_owner(staged, before)
            os.chmod(staged, stat.S_IMODE(before.st_mode))
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return staged


def _keep_owner(staged: Path, before: os.stat_result) -> None:
    """Give ``staged`` the owner and group of the file it replaces, when this process may."""
    if not hasattr(os, "chown"):
        return
    now = os.stat(staged)
    if (now.st_uid, now.st_gid) != (before.st_uid, before.st_gid):
        with suppress(OSError):  # not this user's to give, or not this file system's
            os.chown(staged, before.st_uid, before.st_gid)


def _naming(error: OSError, target: Path) -> OSError:
    """``error`` told of ``target``: the file asked for, not a temporary one beside it."""
    return OSError(error.errno, error.strerror or type(error).__name__, str(target))


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
        f"<div><b>{_text(value)}</b><span>{_text(label)}</span></div>" for value, label in tiles
    )
    return f'<div class="summary" data-summary>{cells}</div>'


def _text(value: str) -> str:
    """A text from the log (or holding some), as the page shows it: escaped and cut."""
    return escape(page_text(value), quote=True)


def _figure(chart: Chart) -> str:
    key = _text(chart.key)
    if chart.empty is not None:
        return (
            f'<figure data-chart="{key}"><figcaption>{_text(chart.title)}</figcaption>'
            f'<p class="empty" data-empty>{escape(chart.empty)}</p></figure>'
        )
    note = f"<figcaption>{escape(chart.note)}</figcaption>" if chart.note else ""
    return f'<figure data-chart="{key}">{chart_svg(chart)}{note}</figure>'


def _totals(report: FleetReport) -> str:
    rows = sorted(report.rows.items())
    shown = rows[:MAX_TABLE_ROWS]
    head = "".join(f"<th>{_text(name)}</th>" for name in report.by)
    head += "<th>status</th>" + "".join(
        f'<th class="n">{name}</th>' for name in ("calls", "amount", "tokens", "units", "chars")
    )
    body = []
    for (keys, status, currency), row in shown:
        cells = "".join(f"<td>{_text(key or NO_KEY)}</td>" for key in keys)
        figures = (
            str(row.calls),
            amount_text(status, currency, row.amount),
            *(row.figure_text(name) for name in FIGURES),
        )
        cells += f"<td>{_text(status)}</td>"
        cells += "".join(f'<td class="n">{_text(value)}</td>' for value in figures)
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
            f"{page_text(reason)}: {count}" for reason, count in sorted(report.problems.items())
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
        f'<tr><th scope="row">{_text(label)}</th><td>{_text(value)}</td></tr>'
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
        figures = "".join(f'<td class="n">{_text(cell)}</td>' for cell in [share, *cells])
        why = _text(data["unknown_context_spend"] or "")
        body.append(f"<tr><td>{_text(each.request_id)}</td>{figures}<td>{why}</td></tr>")
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
        "<li>"
        + escape(f"{page_text(provider)}/{page_text(model)}: {counted(calls, 'call')} ")
        + escape(f"({page_text(reason)})")
        + "</li>"
        for (provider, model, reason), calls in listed[:_MAX_LISTED]
    ]
    more = len(listed) - _MAX_LISTED
    if more > 0:
        items.append(f"<li>and {more} more</li>")
    return (
        "<h3>Not priced (add or fix these in the price table)</h3>"
        f"<ul data-not-priced>{''.join(items)}</ul>"
    )
