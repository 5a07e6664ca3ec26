"""The ``report`` and ``prices check`` commands: read files, print results, return a status.

A file that cannot be used raises (``PriceTableError``, ``OSError``) for the caller to report;
``prices check`` answers "invalid" itself, since that is what it was asked.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import TextIO

from spanledger.attribution.summary import AttributionSummary
from spanledger.eventlog import read_events
from spanledger.ledger.prices import PriceTable, PriceTableError
from spanledger.ledger.pricing import Ledger
from spanledger.ledger.report import build_spend_report

__all__ = ["run_prices_check", "run_report"]


def run_report(events: Path, prices: Path | None, *, as_json: bool, out: TextIO) -> int:
    """Print the spend report for ``events``. Raises ``PriceTableError`` for a price table and
    ``OSError`` for a log that cannot be read."""
    ledger = Ledger(PriceTable.load(prices), warn=False) if prices is not None else None
    log = read_events(events)
    report = build_spend_report(log.events, ledger)
    attribution = AttributionSummary.of(log.attributions)
    if as_json:
        data = report.to_json()
        data["attribution"] = attribution.to_json()
        data["unreadable_lines"] = [p.line_number for p in log.problems]
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    out.write(report.render() + "\n\n" + attribution.render() + "\n")
    for problem in log.problems:
        out.write(f"skipped line {problem.line_number}: {problem.reason}\n")
    return 0


def run_prices_check(table_path: Path, *, stale_days: int, out: TextIO) -> int:
    """Validate a table; list overlapping patterns and stale entries. 1 when invalid."""
    try:
        table = PriceTable.load(table_path)
    except PriceTableError as error:
        out.write(f"invalid: {error}\n")
        return 1
    out.write(f"{table_path}: {len(table.entries)} entries, valid\n")
    for first, second in table.overlapping_patterns():
        out.write(
            f"overlap: {first.label} and {second.label} can match the same model "
            "(the exact name or the more specific pattern wins)\n"
        )
    for entry in table.stale(older_than=timedelta(days=stale_days)):
        when = entry.checked.isoformat() if entry.checked else "never"
        out.write(f"stale: {entry.label} (checked {when}; older than {stale_days} days)\n")
    return 0
