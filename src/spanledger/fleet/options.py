"""The report's command-line options, read strictly: a bad value is named with its problem."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast, get_args

from spanledger.errors import ConfigurationError
from spanledger.fleet.scan import Grouping

__all__ = ["groupings", "moment"]

_GROUPINGS: tuple[str, ...] = get_args(Grouping)


def groupings(text: str) -> tuple[Grouping, ...]:
    """``provider,model`` -> ``("provider", "model")``; each name once, from the known ones."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in _GROUPINGS]
    if not names or unknown:
        raise ConfigurationError(
            f"--by {text!r}: groups by {', '.join(_GROUPINGS)} or a comma list of them"
        )
    if len(set(names)) != len(names):
        raise ConfigurationError(f"--by {text!r}: names a grouping twice")
    return tuple(cast(Grouping, name) for name in names)


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
