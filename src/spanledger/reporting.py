"""The ``report`` and ``prices check`` commands: read files, print results, return a status.

A file that cannot be used raises (``PriceTableError``, ``OSError``) for the caller to report;
``prices check`` answers "invalid" itself, since that is what it was asked.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

from spanledger.fleet.progress import reading_progress
from spanledger.fleet.remembered import Form, question
from spanledger.fleet.report_cache import CacheEntry, ReportCache
from spanledger.fleet.scan import Grouping
from spanledger.fleet.scan_memo import Answer, remember_answer
from spanledger.fleet.sources import describe_unreadable, log_files
from spanledger.ledger.prices import PriceTable, PriceTableError
from spanledger.ledger.pricing import Ledger

__all__ = ["run_export", "run_prices_check", "run_prices_import", "run_report"]


def run_report(
    sources: Sequence[str | Path] | str | Path,
    prices: Path | None,
    *,
    as_json: bool = False,
    as_csv: bool = False,
    by: Sequence[Grouping] = ("provider", "model"),
    since: datetime | None = None,
    until: datetime | None = None,
    html: Path | None = None,
    skip_unreadable: bool = False,
    cache: bool = True,
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Print the spend and attribution report over the logs ``sources`` name (files,
    directories, glob patterns); with ``html``, write it to that file as a page of charts
    instead. 1 when no readable event was found. Raises ``PriceTableError`` for a price table,
    ``ConfigurationError`` for a source that names nothing (or ``html`` without its extra),
    ``OSError`` for a log that cannot be read, unless ``skip_unreadable``: then what cannot be
    read is skipped and named in one line on ``err``. ``cache``: use and keep the report cache
    (a cache that cannot be written is one line on ``err``), and remember what was printed
    for the next report asking the same over the same unchanged logs."""
    from spanledger.fleet.report import price_scan
    from spanledger.fleet.scan import scan_logs

    if html is not None:
        from spanledger.fleet.html_charts import require_charting

        require_charting()
    form: Form = "json" if as_json else "csv" if as_csv else "text"
    asked = question(by, since, until, form, prices) if cache and html is None else None
    named = [sources] if isinstance(sources, str | Path) else list(sources)
    ledger = Ledger(PriceTable.load(prices), warn=False) if prices is not None else None
    found = log_files(named, skip_unreadable=skip_unreadable)
    files = found.files
    windows = ledger.prices.boundaries() if ledger is not None else ()
    read_from: list[tuple[ReportCache, Sequence[CacheEntry]]] = []
    with reading_progress(files, err):
        scan = scan_logs(
            files,
            by=by,
            since=since,
            until=until,
            windows=windows,
            recorded_costs=ledger is None,
            daily=html is not None,
            cache=cache,
            warn=lambda message: (err if err is not None else out).write(message + "\n"),
            read_from=lambda store, entries: read_from.append((store, entries)),
        )
    report = price_scan(scan, by, ledger)
    report.unreadable = tuple(str(path) for path in found.unreadable)
    if html is not None:
        from spanledger.fleet.html_page import write_page

        size = write_page(report, html, since=since, until=until)
        printed = f"wrote {html} ({size / 1024:,.0f} KB, {report.calls} calls)\n"
    elif as_json:
        printed = json.dumps(report.to_json(), indent=2) + "\n"
    elif as_csv:
        printed = report.to_csv()
    else:
        printed = report.render() + "\n"
    warnings = io.StringIO()
    _unreadable(found.unreadable, warnings)
    _skipped(report.problems, warnings)
    if as_json or as_csv or html is not None:  # the table says it itself
        _counted_once(report.duplicates, warnings)
    status = 0
    if scan.events == 0 and scan.attribution.requests == 0:
        warnings.write(f"no readable event in {len(files)} file{'s' if len(files) != 1 else ''}\n")
        status = 1
    out.write(printed)
    (err if err is not None else out).write(warnings.getvalue())
    if (
        asked is not None
        and read_from
        and not found.unreadable
        and asked == question(by, since, until, form, prices)
    ):
        [(store, entries)] = read_from
        remember_answer(store, entries, asked, Answer(printed, warnings.getvalue(), status))
    return status


def run_export(
    sources: Sequence[str | Path],
    target: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    skip_unreadable: bool = False,
    out: TextIO,
    err: TextIO,
) -> int:
    """Write the logs ``sources`` name as Parquet under ``target``; 1 when nothing was read.
    ``skip_unreadable``: as for ``run_report``."""
    from spanledger.fleet.export import export_parquet

    found = log_files(list(sources), skip_unreadable=skip_unreadable)
    files = found.files
    with reading_progress(files, err):
        done = export_parquet(files, target, since=since, until=until)
    out.write(
        f"exported {done.events} events and {done.attribution_records} attribution records "
        f"over {done.days} day{'s' if done.days != 1 else ''} to {target}\n"
    )
    _unreadable(found.unreadable, err)
    _skipped(done.problems, err)
    _counted_once(done.duplicates, err)
    return 0 if done.events or done.attribution_records else 1


def _unreadable(paths: Sequence[Path], err: TextIO) -> None:
    """Name the files and directories ``--skip-unreadable`` left out, so a total read from
    fewer logs than were named says so."""
    if paths:
        err.write(f"skipped {describe_unreadable(paths)}\n")


def _counted_once(duplicates: int, err: TextIO) -> None:
    if duplicates:
        lines = f"{duplicates} line{'s' if duplicates != 1 else ''}"
        err.write(f"counted once: {lines} repeating a call already counted (same call id)\n")


def _skipped(problems: dict[str, int], err: TextIO) -> None:
    for reason, count in sorted(problems.items()):
        err.write(f"skipped {count} line{'s' if count != 1 else ''}: {reason}\n")


def run_prices_check(table_path: Path, *, stale_days: int, out: TextIO) -> int:
    """Validate a table; list overlapping patterns and stale entries. 1 when invalid."""
    try:
        table = PriceTable.load(table_path)
    except PriceTableError as error:
        out.write(f"invalid: {error}\n")
        return 1
    out.write(f"{table_path}: {_entries(len(table.entries))}, valid\n")
    for first, second in table.overlapping_patterns():
        out.write(
            f"overlap: {first.label} and {second.label} can match the same model "
            "(the exact name or the more specific pattern wins)\n"
        )
    for entry in table.stale(older_than=timedelta(days=stale_days)):
        when = entry.checked.isoformat() if entry.checked else "never"
        out.write(f"stale: {entry.label} (checked {when}; older than {stale_days} days)\n")
    return 0


def run_prices_import(output: Path | None, *, out: TextIO, err: TextIO) -> int:
    """Write a dated table of genai-prices' embedding prices and language models' input rates
    (to ``output``, else ``out``) and say on ``err`` what was written and what was skipped.
    Raises ``ConfigurationError`` when genai-prices is missing or nothing could be
    imported."""
    from spanledger.errors import ConfigurationError
    from spanledger.ledger.imported import read_genai_prices

    imported = read_genai_prices()
    if not imported.entries:
        raise ConfigurationError(f"{imported.source} lists no price spanledger can use")
    text = imported.toml()
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        out.write(text)
    per_provider: dict[str, int] = {}
    for entry in imported.entries:
        per_provider[entry.provider] = per_provider.get(entry.provider, 0) + 1
    counts = ", ".join(f"{name} {count}" for name, count in sorted(per_provider.items()))
    where = f" to {output}" if output is not None else ""
    err.write(f"wrote {_entries(len(imported.entries))} ({counts}) from {imported.source}{where}\n")
    if imported.language_models:
        err.write(
            f"{imported.language_models} of them are language models' input rates, which price "
            "the context a prompt carried\n"
        )
    unknown = imported.unknown_providers
    if unknown:
        total = sum(unknown.values())
        named = ", ".join(f"{name} {count}" for name, count in sorted(unknown.items()))
        err.write(
            f"skipped {total} embedding model{'s' if total != 1 else ''} of providers "
            f"spanledger does not know ({named})\n"
        )
    for kind, skipped in (
        ("embedding model", imported.skipped),
        ("language model", imported.skipped_language_models),
    ):
        for reason, labels in sorted(skipped.items()):
            err.write(
                f"skipped {len(labels)} {kind}{'s' if len(labels) != 1 else ''}, "
                f"{reason}: {', '.join(labels)}\n"
            )
    return 0


def _entries(count: int) -> str:
    """``1 entry``, ``2 entries``."""
    return f"{count} {'entry' if count == 1 else 'entries'}"
