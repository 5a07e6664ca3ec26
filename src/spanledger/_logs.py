"""spanledger's loggers. An application that configured structlog gets spanledger's warnings
through its own processors; otherwise they go to the standard library's ``logging`` under the
``spanledger`` logger (and its children), as a library's should: never printed to standard
output by spanledger itself. structlog is never imported here: an application that configured
it has imported it already."""

from __future__ import annotations

import logging
import sys
from typing import Any

__all__ = ["get_logger"]

_LEVELS = {"warning": logging.WARNING, "error": logging.ERROR}


class _Logger:
    """A logger that decides at each call where the record goes, so an application may
    configure structlog after importing spanledger."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def warning(self, event: str, **fields: Any) -> None:
        self._log("warning", event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._log("error", event, fields)

    def _log(self, level: str, event: str, fields: dict[str, Any]) -> None:
        structlog = sys.modules.get("structlog")  # not imported: nobody configured it
        if structlog is not None and structlog.is_configured():
            getattr(structlog.get_logger(self._name), level)(event, **fields)
            return
        stdlib = logging.getLogger(self._name)
        if stdlib.isEnabledFor(_LEVELS[level]):
            exc_info = fields.pop("exc_info", None)
            rendered = " ".join(f"{key}={value!r}" for key, value in fields.items())
            message = f"{event} {rendered}" if rendered else event
            stdlib.log(_LEVELS[level], "%s", message, exc_info=exc_info)


def get_logger(name: str) -> _Logger:
    """The logger for ``name`` (a ``spanledger.*`` name)."""
    return _Logger(name)
