"""What spanledger's export threads say about a backend, as sentences a person can act on.

The OpenTelemetry and langfuse SDKs log every retry and failed export through the standard
``logging`` module, as unfilled templates on the application's stderr. Records logged on
spanledger's own export threads are taken away from the application's handlers. Where the
record is about a backend spanledger knows (a ``Backend``: what it is, and its address without
credentials or query), it becomes one sentence, once per backend and cause::

    exporting to OTLP traces at http://127.0.0.1:4318/v1/traces failed: connection refused

The cause is read only from known fields: the HTTP status of the response, the type of the
exception (connection refused, timed out, TLS failure, name not resolved), a count the SDK
passed as an integer. Never from the message text, the arguments' text or a response body:
they may hold payload or secrets. A record spanledger cannot read that way is logged once per
kind (logger and template), without its arguments. Records from any other thread pass
untouched: the application's own pipelines keep their logging.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from spanledger import _forksafe
from spanledger._logs import get_logger

if TYPE_CHECKING:
    import requests

__all__ = [
    "EXPORT_THREAD_PREFIX",
    "Backend",
    "also_route_threads",
    "cause_of_error",
    "cause_of_status",
    "lost_sentence",
    "plural",
    "route_export_logs",
    "safe_address",
    "work_for",
]

_log = get_logger("spanledger.exporters")

EXPORT_THREAD_PREFIX = "spanledger-export"
"""Names of the threads that export for spanledger-owned pipelines."""

_ROUTED_LOGGERS = ("opentelemetry", "langfuse", "urllib3", "requests", "httpx", "httpcore")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def safe_address(url: str) -> str:
    """``scheme://host:port/path`` of ``url``: never its credentials, query or fragment."""
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return "an unreadable address"
    scheme = parts.scheme.lower()
    if not scheme or not host:
        return "an unreadable address"
    port = port or _DEFAULT_PORTS.get(scheme)
    shown = f"[{host}]" if ":" in host else host
    address = f"{scheme}://{shown}:{port}" if port else f"{scheme}://{shown}"
    return "".join(c for c in address + parts.path if c.isprintable() and not c.isspace())


def plural(count: int, unit: str) -> str:
    """``1 span``, ``12 spans``, ``1 data point`` (``unit`` is the plural)."""
    return f"{count} {unit[:-1] if count == 1 and unit.endswith('s') else unit}"


def lost_sentence(count: int, unit: str, named: str, cause: str | None) -> str:
    """``12 spans for OTLP traces at http://…/v1/traces were not delivered: connection
    refused``."""
    verb = "was" if count == 1 else "were"
    return f"{plural(count, unit)} for {named} {verb} not delivered" + (
        f": {cause}" if cause else ""
    )


_STATUS_HINTS = {
    401: "check the credentials",
    403: "check the credentials and what they may do",
    404: "check the endpoint's path",
}


def cause_of_status(status: int) -> str:
    """``HTTP 401 Unauthorized (check the credentials)``: the status and its standard phrase
    (never the phrase the server sent)."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    cause = f"HTTP {status} {phrase}".rstrip()
    hint = _STATUS_HINTS.get(status)
    return f"{cause} ({hint})" if hint else cause


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it wraps (cause, context, a urllib3 ``reason``, arguments
    that are exceptions), nearest first."""
    found: list[BaseException] = []
    todo = [error]
    while todo and len(found) < 16:
        current = todo.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        reason = getattr(current, "reason", None)
        for wrapped in (current.__cause__, current.__context__, reason, *current.args):
            if isinstance(wrapped, BaseException):
                todo.append(wrapped)
    return found


def _names(chain: list[BaseException]) -> set[str]:
    return {cls.__name__ for error in chain for cls in type(error).__mro__}


def cause_of_error(error: BaseException) -> str:
    """What a failed request ran into, from the types in the exception's chain (and an HTTP
    status an API error carries as an integer); never from its message."""
    try:
        return _cause_of_error(error)
    except Exception:
        return f"the request raised {type(error).__name__}"


def _cause_of_error(error: BaseException) -> str:
    chain = _chain(error)
    names = _names(chain)

    def has(*kinds: type[BaseException]) -> bool:
        return any(isinstance(e, kinds) for e in chain)

    for e in chain:
        status = getattr(e, "status_code", None)
        if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
            return cause_of_status(status)
    if has(ConnectionRefusedError):
        return "connection refused"
    if has(socket.gaierror) or "NameResolutionError" in names:
        return "name not resolved"
    if has(ssl.SSLCertVerificationError):
        return "TLS failure (certificate not verified)"
    if has(ssl.SSLError) or names & {"SSLError", "SSLZeroReturnError"}:
        return "TLS failure"
    if names & {"ConnectTimeout", "ConnectTimeoutError"}:
        return "timed out connecting"
    if names & {"ReadTimeout", "ReadTimeoutError"}:
        return "timed out waiting for a response"
    if has(TimeoutError) or names & {"Timeout", "TimeoutError", "TimeoutException"}:
        return "timed out"
    if has(ConnectionResetError):
        return "connection reset"
    if names & {"RemoteDisconnected", "RemoteProtocolError"}:
        return "connection closed without a response"
    if "ProxyError" in names:
        return "proxy failure"
    if has(ConnectionError) or names & {"ConnectionError", "ConnectError", "NetworkError"}:
        return "connection failed"
    return f"the request raised {type(error).__name__}"


class Backend:
    """A backend an owned pipeline exports to, as a person names it: what it is (``OTLP
    traces``) and where (``safe_address``), and what its requests last ran into."""

    def __init__(self, label: str, url: str) -> None:
        self.label = label
        self.address = safe_address(url)
        self.last_cause: str | None = None
        """What the latest request ran into (``None`` after one that succeeded)."""
        self.failed_in_send = False
        """Whether a request of the export under way on the worker thread failed."""
        self.awaiting = False
        """Whether a request is waiting for its answer now."""
        self.retired = False
        """Whether the queue exporting to it is closed: what its last request runs into after
        that is no news (the loss is told already)."""
        self._logged: set[str] = set()
        self._lock = _forksafe.lock(self, "_lock")

    @property
    def named(self) -> str:
        """``OTLP traces at http://127.0.0.1:4318/v1/traces``."""
        return f"{self.label} at {self.address}"

    def between_sends(self) -> None:
        """An export starts or has ended: what its requests ran into is told already."""
        self.failed_in_send = False

    def observe(self, cause: str | None, **fields: object) -> None:
        """Note what a request ran into (``None``: it was answered with success); the first
        time for each cause, say so."""
        self.last_cause = cause
        if cause is None:
            return
        self.failed_in_send = True
        if not self.retired and self.first_time(f"failing:{cause}"):
            _say(
                "export_sdk_message",
                f"exporting to {self.named} failed: {cause}",
                backend=self.label,
                address=self.address,
                cause=cause,
                **fields,
            )

    def first_time(self, kind: str) -> bool:
        """Whether ``kind`` is told for the first time for this backend (marks it told)."""
        with self._lock:
            if kind in self._logged or len(self._logged) >= 64:
                return False
            self._logged.add(kind)
            return True

    def session(self) -> requests.Session | None:
        """A ``requests`` session for an OTLP exporter of this backend, which notes what each
        request ran into; ``None`` when a credential provider is set, so that the SDK loads its
        own session (causes are then read from its log records)."""
        if any(
            name.startswith("OTEL_PYTHON_EXPORTER_OTLP_HTTP") and name.endswith("PROVIDER")
            for name in os.environ
        ):
            return None
        try:
            session = _session_class()()
        except ImportError:
            return None
        session.backend = self  # type: ignore[attr-defined]
        return session


@functools.cache
def _session_class() -> type[requests.Session]:
    import requests

    class WatchedSession(requests.Session):
        """A session that tells its backend what each request ran into."""

        backend: Backend

        def request(
            self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any
        ) -> requests.Response:
            self.backend.awaiting = True
            try:
                response = super().request(method, url, *args, **kwargs)
            except Exception as error:
                self.backend.observe(cause_of_error(error))
                raise
            finally:
                self.backend.awaiting = False
            status = response.status_code
            self.backend.observe(cause_of_status(status) if status >= 400 else None)
            return response

    return WatchedSession


def _say(event: str, message: str, **fields: object) -> None:
    with contextlib.suppress(Exception):
        _log.warning(event, message=message, **fields)


_working = threading.local()


def work_for(backend: Backend | None) -> None:
    """Mark the current (export) thread as exporting to ``backend``."""
    _working.backend = backend


_COUNTED_TEMPLATES = {"API error: Failed to send %s scores to Langfuse": "scores"}
"""The start of SDK templates whose first integer argument counts what was lost, and what."""


@functools.cache
def _langfuse_statuses() -> dict[str, int]:
    """The langfuse SDK's fixed sentence for each HTTP status it logs (it logs the sentence,
    not the status): read back into the status."""
    try:
        from langfuse._utils.parse_error import errorResponseByCode
    except Exception:
        return {}
    return {text: code for code, text in dict(errorResponseByCode).items()}


class _ExportThreadLogs(logging.Filter):
    """Takes the records that SDK code logs on spanledger's export threads (and on the
    background threads of the Langfuse clients spanledger built) away from the application's
    logging: as a sentence about the backend where one can be read from known fields, else
    once per kind (logger and message template), without the record's arguments or exception.
    Records from any other thread pass untouched."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        thread = record.threadName
        ours = isinstance(thread, str) and thread.startswith(EXPORT_THREAD_PREFIX)
        worker: Backend | None = getattr(_working, "backend", None) if ours else None
        backend = worker if worker is not None else _owned_thread_backend()
        if not ours and backend is None:
            return True
        with contextlib.suppress(Exception):
            self._route(record, backend, sending=worker is not None)
        return False

    def _route(self, record: logging.LogRecord, backend: Backend | None, *, sending: bool) -> None:
        if backend is not None:
            if sending and backend.failed_in_send:
                return  # about an export whose failure is told already
            if _as_sentence(record, backend):
                return
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        kind = (record.name, template)
        if kind not in self._seen and len(self._seen) < 256:
            self._seen.add(kind)
            _log.warning(
                "export_sdk_message",
                source=record.name,
                level=record.levelname.lower(),
                template=template,
            )


def _as_sentence(record: logging.LogRecord, backend: Backend) -> bool:
    """Tell ``record`` as a sentence about ``backend`` if its cause can be read from known
    fields (a status, an exception's type, a count); whether it could."""
    template = record.msg if isinstance(record.msg, str) else ""
    args = record.args if isinstance(record.args, tuple) else ()
    errors = [arg for arg in (record.msg, *args) if isinstance(arg, BaseException)]
    if record.exc_info and isinstance(record.exc_info[1], BaseException):
        errors.append(record.exc_info[1])
    status = _langfuse_statuses().get(template) if record.name.startswith("langfuse") else None
    if status is not None:
        cause = cause_of_status(status)
    elif errors:
        cause = cause_of_error(errors[0])
    else:
        return False
    source = {"source": record.name}
    counted = next(
        (what for start, what in _COUNTED_TEMPLATES.items() if template.startswith(start)), None
    )
    count = next((a for a in args if isinstance(a, int) and not isinstance(a, bool)), None)
    if counted is None or count is None:
        backend.observe(cause, **source)
        return True
    backend.last_cause = cause
    if backend.first_time(f"lost {counted}:{cause}"):
        _say(
            "export_lost",
            lost_sentence(count, counted, backend.named, cause),
            backend=backend.label,
            address=backend.address,
            cause=cause,
            count=count,
            unit=counted,
            **source,
        )
    return True


_EXPORT_THREAD_LOGS = _ExportThreadLogs()


_owned_thread_checks: list[Callable[[], Backend | None]] = []


def also_route_threads(check: Callable[[], Backend | None]) -> None:
    """Route the records of threads ``check`` recognises too (an SDK's own background threads
    that export for an owned pipeline; it answers the backend they export to); asked when a
    record comes, since an SDK can make new threads at any time (in a forked child, say)."""
    _owned_thread_checks.append(check)


def _owned_thread_backend() -> Backend | None:
    for check in list(_owned_thread_checks):
        backend = check()
        if backend is not None:
            return backend
    return None


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
