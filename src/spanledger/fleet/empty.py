"""``spanledger report`` over logs that hold nothing, answered without reading them.

A fresh deployment's logs are empty files or an empty directory. The full report would import
DuckDB, pydantic and the ledger only to print a report of no calls; this module prints that
same report, byte for byte (tests/reliability/test_cli_imports.py compares the two), from the
standard library alone. Anything it is not sure of (a log with a byte in it, a price table, a
directory with anything inside, a path skipped as unreadable) is left to the full report.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from typing import Any, TextIO

from spanledger.fleet.layout import FIGURE_LEGEND, REPORT_SCHEMA_VERSION, REQUEST_CONTEXT_COLUMNS
from spanledger.fleet.sources import log_files

__all__ = ["empty_csv", "empty_json", "empty_text", "report_empty"]

_STATUSES = ("priced", "estimated", "unpriced", "unmetered", "not_billed")
_FIGURES = ("input_tokens", "search_units", "billable_characters")


def report_empty(
    sources: Sequence[str],
    by: Sequence[str],
    *,
    as_json: bool,
    as_csv: bool,
    skip_unreadable: bool,
    out: TextIO,
    err: TextIO,
) -> int | None:
    """Print the report of no calls and return 1 (no readable event) when every one of
    ``sources`` is an empty file or an empty directory; ``None``, having printed nothing, when
    any is not (the full report answers). The sources are resolved by ``log_files``, so what
    it refuses (an empty directory, ``-``) is refused here with the same error."""
    if not sources or not all(_holds_nothing(source) for source in sources):
        return None
    found = log_files(sources, skip_unreadable=skip_unreadable)
    try:
        if found.unreadable or any(path.stat().st_size for path in found.files):
            return None
    except OSError:
        return None
    if as_json:
        out.write(json.dumps(empty_json(by), indent=2) + "\n")
    elif as_csv:
        out.write(empty_csv(by))
    else:
        out.write(empty_text(by) + "\n")
    count = len(found.files)
    err.write(f"no readable event in {count} file{'s' if count != 1 else ''}\n")
    return 1


def _holds_nothing(source: str) -> bool:
    """Whether ``source`` names an empty regular file or an empty directory, as it is now."""
    try:
        status = os.stat(source)
        if stat.S_ISREG(status.st_mode):
            return status.st_size == 0
        if stat.S_ISDIR(status.st_mode):
            with os.scandir(source) as entries:
                return next(entries, None) is None
    except (OSError, ValueError):
        pass
    return False


def empty_text(by: Sequence[str]) -> str:
    """The table ``spanledger report`` prints for no calls, grouped ``by``."""
    header = " ".join(by) + f" {'status':<11} {'calls':>8} {'amount':>18}"
    header += f" {'tokens':>12} {'units':>8} {'chars':>12}"
    lines = [
        "0 calls",
        "  ".join(f"{status}: 0" for status in _STATUSES),
        "known spend: none",
        "",
        header.strip(),
        "",
        FIGURE_LEGEND + ")",
        "",
        "attribution: no request reports in the log",
    ]
    return "\n".join(lines)


def empty_json(by: Sequence[str]) -> dict[str, Any]:
    """What ``spanledger report --json`` prints for no calls, grouped ``by``."""
    attribution: dict[str, Any] = {
        "requests": 0,
        "requests_with_share": 0,
        "mean_cited_token_share": None,
        "median_cited_token_share": None,
        "distribution": {},
        "spend_per_cited_token": None,
        "currency": None,
        "requests_with_unknown_spend": 0,
        "rendered_context_earned_nothing": [],
        "unreconcilable_requests": [],
        "known_context_spend": {},
        "requests_with_context_spend": 0,
        "requests_with_unknown_context_spend": 0,
    }
    if "request" in by:
        attribution["by_request"] = []
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "events": 0,
        "by": list(by),
        "status_counts": dict.fromkeys(_STATUSES, 0),
        "spend": {},
        "rows": [],
        "unpriced_models": [],
        "attribution": attribution,
        "lines_read": 0,
        "skipped_lines": {},
        "duplicate_calls_dropped": 0,
        "unreadable_paths": [],
    }


def empty_csv(by: Sequence[str]) -> str:
    """The header ``spanledger report --csv`` prints, alone, for no calls, grouped ``by``."""
    columns = [
        *by,
        "status",
        "currency",
        "calls",
        "amount",
        *(name for figure in _FIGURES for name in (figure, f"{figure}_calls")),
        *(REQUEST_CONTEXT_COLUMNS if "request" in by else ()),
    ]
    return ",".join(columns) + "\n"
