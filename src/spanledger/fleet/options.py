"""The report's command-line options, read strictly: a bad value is named with its problem."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from spanledger.errors import ConfigurationError

if TYPE_CHECKING:  # the scan brings DuckDB: the command reads its options before it reads logs
    from spanledger.fleet.scan import Grouping

__all__ = ["GROUPINGS", "MAX_STALE_DAYS", "groupings", "moment", "stale_days", "window"]

GROUPINGS: tuple[str, ...] = ("provider", "model", "day", "request")
"""The names ``--by`` accepts: ``fleet.scan.Grouping``'s, in its order."""

MAX_STALE_DAYS = 36_500
"""The largest ``--stale-days`` accepted: a hundred years."""


def groupings(text: str) -> tuple[Grouping, ...]:
    """``provider,model`` -> ``("provider", "model")``; each name once, from the known ones."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in GROUPINGS]
    if not names or unknown:
        raise ConfigurationError(
            f"--by {text!r}: groups by {', '.join(GROUPINGS)} or a comma list of them"
        )
    if len(set(names)) != len(names):
        raise ConfigurationError(f"--by {text!r}: names a grouping twice")
    return tuple(cast("Grouping", name) for name in names)


def moment(text: str | None, option: str) -> datetime | None:
    """An ISO date or date-time; without a zone it is UTC."""
    if text is None:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(
            f"{option} {text!r}: not an ISO date or time (2026-11-30, 2026-11-30T12:00Z)"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def window(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``--since`` and ``--until`` read by ``moment``; refused when ``since`` is not before
    ``until`` (a window that holds no time would report nothing as if nothing happened)."""
    start, end = moment(since, "--since"), moment(until, "--until")
    if start is not None and end is not None and start >= end:
        raise ConfigurationError(
            f"--since {since!r} is not before --until {until!r}: the window holds no time"
        )
    return start, end


def stale_days(text: str) -> int:
    """``--stale-days``: a whole number of days from 0 to ``MAX_STALE_DAYS``."""
    try:
        days = int(text.strip())
    except ValueError:
        days = -1
    if not 0 <= days <= MAX_STALE_DAYS:
        raise ConfigurationError(
            f"--stale-days {text!r}: a whole number of days from 0 to {MAX_STALE_DAYS:,}"
        )
    return days
