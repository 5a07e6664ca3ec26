"""SDK log records from spanledger's export threads, kept out of the application's logging.

The OpenTelemetry and langfuse SDKs log every retry and failed export through the standard
``logging`` module; with a backend down that is a stream of lines on the application's stderr.
Records logged on spanledger's own export threads are taken away from the application's
handlers and each kind is logged once through structlog (``spanledger.exporters``), without
its arguments or exception (they may hold payload). Records from any other thread pass
untouched: the application's own pipelines keep their logging.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from spanledger._logs import get_logger

__all__ = ["EXPORT_THREAD_PREFIX", "also_route_threads", "route_export_logs"]

_log = get_logger("spanledger.exporters")

EXPORT_THREAD_PREFIX = "spanledger-export"
"""Names of the threads that export for spanledger-owned pipelines."""

_ROUTED_LOGGERS = ("opentelemetry", "langfuse", "urllib3", "requests", "httpx", "httpcore")


class _ExportThreadLogs(logging.Filter):
    """Takes the records that SDK code logs on spanledger's export threads (and on the
    background threads of the Langfuse clients spanledger built) away from the application's
    logging, and logs each kind (logger and message template) once through structlog, without
    the record's arguments or exception. Records from any other thread pass untouched: the
    application's own pipelines keep their logging."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        thread = record.threadName
        ours = isinstance(thread, str) and thread.startswith(EXPORT_THREAD_PREFIX)
        if not ours and not _on_an_owned_thread():
            return True
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        kind = (record.name, template)
        if kind not in self._seen and len(self._seen) < 256:
            self._seen.add(kind)
            with contextlib.suppress(Exception):
                _log.warning(
                    "export_sdk_message",
                    source=record.name,
                    level=record.levelname.lower(),
                    template=template,
                )
        return False


_EXPORT_THREAD_LOGS = _ExportThreadLogs()


_owned_thread_checks: list[Callable[[], bool]] = []


def also_route_threads(check: Callable[[], bool]) -> None:
    """Route the records of threads ``check`` recognises too (an SDK's own background threads
    that export for an owned pipeline); asked when a record comes, since an SDK can make new
    threads at any time (in a forked child, say)."""
    _owned_thread_checks.append(check)


def _on_an_owned_thread() -> bool:
    return any(check() for check in list(_owned_thread_checks))


def route_export_logs() -> None:
    """Put the filter on every logger of the SDKs an owned pipeline runs (idempotent; the
    loggers exist once their modules are imported, which building a pipeline does)."""
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if name.split(".", 1)[0] in _ROUTED_LOGGERS
    ]
    for name in names:
        logger = logging.getLogger(name)
        if _EXPORT_THREAD_LOGS not in logger.filters:
            logger.addFilter(_EXPORT_THREAD_LOGS)
