"""``spanledger report`` answered from what the same report printed before, when none of its
logs changed since, with no log, pydantic, price model or DuckDB read.

The question a report answers is everything its output depends on besides the logs: the
groupings, the window, the output form and the price table, by its path and its bytes (a
table edited in place is another question). A report that ran in full remembers what it
printed under that question and its files as its scan read them (``fleet/scan_memo.py``), so
the next one asking the same over the same unchanged files prints it again, byte for byte.
A page (``--html``), ``--no-cache``, or a log skipped as unreadable is always run in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from spanledger.errors import ConfigurationError
from spanledger.fleet.report_cache import ReportCache, cache_root
from spanledger.fleet.scan_memo import instant, recall_answer, unchanged_entries
from spanledger.fleet.sources import log_files

__all__ = ["Form", "answer_remembered", "question"]

Form = Literal["text", "json", "csv"]


def question(
    by: Sequence[str],
    since: datetime | None,
    until: datetime | None,
    form: Form,
    prices: Path | None,
) -> dict[str, Any] | None:
    """What a report asks besides its logs, as JSON values; ``None`` when its price table
    cannot be read (the full report says why)."""
    table: list[str] | None = None
    if prices is not None:
        try:
            table = [str(prices), hashlib.sha256(prices.read_bytes()).hexdigest()]
        except (OSError, ValueError):
            return None
    return {
        "by": list(by),
        "since": instant(since),
        "until": instant(until),
        "form": form,
        "prices": table,
    }


def answer_remembered(
    sources: Sequence[str],
    prices: Path | None,
    by: Sequence[str],
    since: datetime | None,
    until: datetime | None,
    *,
    form: Form,
    skip_unreadable: bool,
    out: TextIO,
    err: TextIO,
) -> int | None:
    """Print what the same report printed over ``sources`` before and return its status,
    when no log changed since and the answer is kept intact; ``None``, having printed
    nothing, otherwise (the full report answers, and says what is wrong with a source)."""
    asked = question(by, since, until, form, prices)
    if asked is None:
        return None
    try:
        found = log_files(sources, skip_unreadable=skip_unreadable)
    except (OSError, ConfigurationError):
        return None  # the full report says what is wrong, after the price table's faults
    if found.unreadable:
        return None
    store = ReportCache(cache_root(), _quiet)
    entries = unchanged_entries(store, found.files)
    answer = recall_answer(store, entries, asked) if entries is not None else None
    if answer is None:
        return None
    out.write(answer.out)
    err.write(answer.err)
    return answer.status


def _quiet(message: str) -> None:
    """A cache that cannot be written is said by the full report, not by this look-up."""
