"""The route machinery: what a request and an answer are (``RecordedRequest``, ``Reply``), what
one endpoint answers (``Route``, with its failing variants), and how a path template matches.

Vendor modules build their routes here from an answer builder (``_built_in``); the server
finds the route for a request by its template (``_match``).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

from spanledger.testing._errors import _error_body
from spanledger.testing.answers import _Answer, _model_of
from spanledger.wire.chat import CHAT_ONLY_PROVIDERS
from spanledger.wire.endpoints import IN_PROCESS_VENDORS, Vendor

__all__ = ["VENDORS", "RecordedRequest", "Reply", "Route"]

VENDORS = (
    *(vendor.value for vendor in Vendor if vendor not in IN_PROCESS_VENDORS),
    *CHAT_ONLY_PROVIDERS,
)
"""The vendor names ``StandIn.base_url`` and ``Route`` accept: ``spanledger.Vendor`` values,
less the in-process libraries, which have no wire (a ``Vendor`` member is accepted too), and
the providers the stand-in answers only chat for (``anthropic``)."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received it: the vendor prefix, the path under it (as sent,
    without the query string), headers, raw body, the query string, and ``params``: what the
    placeholders of the answering route's path matched (``{"model": ...}``), decoded. ``repr``
    shows only vendor, path and params, so a failing assertion never prints a key or the
    caller's text."""

    vendor: str
    path: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    query: str = field(default="", repr=False)
    params: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """One answer the stand-in sends: a status with a JSON ``body``, or with ``raw`` bytes sent
    as they are (to test a client against a broken body); ``delay`` seconds late; or, with
    ``drop``, no answer at all (the connection is reset). ``headers`` may set ``content-type``
    (``application/json`` otherwise)."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay: float = 0.0
    drop: bool = False

    def __post_init__(self) -> None:
        if not 200 <= self.status <= 599:
            raise ValueError(f"status must be within 200..599, not {self.status}")
        if not (math.isfinite(self.delay) and self.delay >= 0):
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {self.delay}")


@dataclass(frozen=True)
class Route:
    """What one endpoint answers: ``vendor`` and ``path`` (under the vendor's prefix; a
    template may hold ``{name}`` / ``{name+}`` placeholders) say where it is mounted,
    ``respond`` turns each request into a ``Reply``, and ``selects``, when given, names the
    top-level body keys of the requests it answers (one present is enough), so that routes
    can share a path.

    The vendor functions (``openai_embeddings`` ...) build the real endpoints; the methods below
    derive a failing variant of any route, and they compose (``route.failing(503).slow(1)``).
    A ``respond`` that raises gets a 500 whose body names the exception's type, never its
    message (which may quote the request).
    """

    vendor: str
    path: str
    respond: Callable[[RecordedRequest], Reply] = field(repr=False)
    selects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.vendor not in VENDORS:
            raise ValueError(f"unknown vendor {self.vendor!r}; expected one of {VENDORS}")
        if not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', not {self.path!r}")
        _template(self.path)  # a broken template is refused here, not on the first request
        if isinstance(self.selects, str) or not all(isinstance(k, str) for k in self.selects):
            raise ValueError(f"selects must be a tuple of body keys, not {self.selects!r}")

    def _with(self, respond: Callable[[RecordedRequest], Reply]) -> Route:
        return Route(self.vendor, self.path, respond, self.selects)

    def failing(self, status: int, *, retry_after: int | str | None = None) -> Route:
        """This endpoint answering ``status`` with the vendor's own error body and headers
        (Bedrock's ``x-amzn-ErrorType``), and a ``Retry-After`` header when ``retry_after`` is
        given (seconds, or an HTTP date)."""
        if not 400 <= status <= 599:
            raise ValueError(f"a failing status is within 400..599, not {status}")
        extra = {} if retry_after is None else {"retry-after": _retry_after(retry_after)}
        vendor, path = self.vendor, self.path

        def respond(request: RecordedRequest) -> Reply:
            return _error(vendor, path, status, _request_model(request), extra)

        return self._with(respond)

    def malformed(self, body: bytes = b'{"data": [') -> Route:
        """This endpoint answering 200 with ``body`` as it is: by default JSON cut short."""
        reply = Reply(200, raw=bytes(body))
        return self._with(lambda _request: reply)

    def slow(self, seconds: float) -> Route:
        """This endpoint answering as it would, ``seconds`` later (to trip a client's timeout)."""
        extra = Reply(delay=seconds).delay  # validated once, here
        inner = self.respond
        return self._with(lambda request: _later(inner(request), extra))

    def dropped(self) -> Route:
        """This endpoint resetting the connection without answering."""
        reply = Reply(drop=True)
        return self._with(lambda _request: reply)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)(\+?)\}")


@functools.lru_cache(maxsize=256)
def _template(path: str) -> re.Pattern[str] | None:
    """``path`` as a pattern on a whole request path, or ``None`` for a plain path."""
    if "{" not in path and "}" not in path:
        return None
    parts: list[str] = []
    last = 0
    for found in _PLACEHOLDER.finditer(path):
        parts.append(re.escape(path[last : found.start()]))
        parts.append(f"(?P<{found[1]}>{'.+' if found[2] else '[^/]+'})")
        last = found.end()
    parts.append(re.escape(path[last:]))
    literal = _PLACEHOLDER.sub("", path)
    if "{" in literal or "}" in literal:
        raise ValueError(f"path {path!r} has a brace outside a {{name}} placeholder")
    try:
        return re.compile("".join(parts))
    except re.error:
        raise ValueError(f"path {path!r} names a placeholder twice") from None


def _match(template: str, path: str) -> dict[str, str] | None:
    """What ``path`` gives ``template``'s placeholders (decoded), or ``None`` if it is not
    ``template``'s: matched as sent first, then decoded."""
    pattern = _template(template)
    if pattern is None:
        return {} if template in (path, unquote(path)) else None
    found = pattern.fullmatch(path)
    if found:
        return {name: unquote(value) for name, value in found.groupdict().items()}
    decoded = unquote(path)
    found = pattern.fullmatch(decoded) if decoded != path else None
    return dict(found.groupdict()) if found else None


def _later(reply: Reply, seconds: float) -> Reply:
    return replace(reply, delay=reply.delay + seconds) if seconds else reply


def _retry_after(value: int | str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"retry_after must be >= 0 seconds, not {value}")
        return str(value)
    if isinstance(value, str) and value.strip() and value.isprintable():
        return value.strip()
    raise ValueError("retry_after must be whole seconds (int) or an HTTP date (str)")


def _error(
    vendor: str,
    path: str,
    status: int,
    model: str = "",
    extra: Mapping[str, str] | None = None,
    code: str | None = None,
) -> Reply:
    """``vendor``'s error answer to a call of ``model`` on ``path``; ``extra`` headers added."""
    body, headers = _error_body(vendor, path, status, model, code)
    return Reply(status, body, {**headers, **(extra or {})})


def _request_model(request: RecordedRequest) -> str:
    try:
        body = request.json()
    except ValueError:
        body = None
    return _model_of(request.vendor, body, request.params)


def _built_in(
    vendor: str,
    path: str,
    answer: Callable[[dict[str, Any], str], _Answer],
    selects: tuple[str, ...] = (),
) -> Route:
    """A vendor's endpoint: ``answer`` turns each (parsed body, model) into its answer."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        status, payload, headers = answer(body, _model_of(vendor, body, request.params))
        return Reply(status, payload, headers)

    return Route(vendor, path, respond, selects)


def _usage_route(
    vendor: str,
    path: str,
    answer: Callable[[dict[str, Any], str, int | None, bool], _Answer],
    figure: int | None,
    report_usage: bool,
    selects: tuple[str, ...] = (),
) -> Route:
    """A vendor's endpoint that reports usage: ``figure`` (``None``: counted from the
    request), or none when ``report_usage`` is False."""
    return _built_in(vendor, path, lambda b, m: answer(b, m, figure, report_usage), selects)


def _figure(name: str, value: int | None) -> int | None:
    """A route function's usage figure, checked: ``None`` (counted from the request) or >= 0."""
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    return value
