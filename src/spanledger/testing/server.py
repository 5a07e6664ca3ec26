"""The stand-in server: ``StandIn`` serves on 127.0.0.1 from a background thread, mounts
routes, records every request, and reads the failures a model name (or a ``base_url``
behaviour) asks for before any route answers."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from spanledger.testing.answers import _model_of
from spanledger.testing.catalogue import BUILT_IN_ROUTES
from spanledger.testing.routes import (
    VENDORS,
    RecordedRequest,
    Reply,
    Route,
    _error,
    _later,
    _match,
)
from spanledger.wire.endpoints import Vendor

__all__ = ["StandIn"]


def _failure_by_name(vendor: str, path: str, name: str, model: str) -> Reply | None:
    """The failure a model name (or a ``base_url`` behaviour) asks for instead of an answer."""
    if name == "reset":
        return Reply(drop=True)
    if name == "not-ready" and vendor == Vendor.BEDROCK:
        return _error(vendor, path, 429, model, code="ModelNotReadyException")
    fail = re.fullmatch(r"fail-(\d{3})", name)
    if fail and 400 <= (status := int(fail.group(1))) <= 599:
        return _error(vendor, path, status, model, {"retry-after": "2"} if status == 429 else {})
    return None


def _delay_by_name(name: str) -> float:
    """Seconds a ``slow-<ms>`` name asks the answer to wait."""
    slow = re.fullmatch(r"slow-(\d+)", name)
    return int(slow.group(1)) / 1000 if slow else 0.0


@dataclass
class _Mounted:
    route: Route
    remaining: int | None


_RouteKey = tuple[str, str, tuple[str, ...]]
"""Where a route is mounted: vendor, path template, the body keys it selects by."""
_NOT_JSON = object()


def _key(route: Route) -> _RouteKey:
    return (route.vendor, route.path, route.selects)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the stand-in never writes request lines to stderr."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        target, _, query = self.path.partition("?")
        parts = target.strip("/").split("/", 1)
        prefix, path = (parts[0], "/" + parts[1]) if len(parts) == 2 else ("", target)
        vendor, _, behaviour = prefix.partition("~")
        request = RecordedRequest(vendor, path, dict(self.headers.items()), body, query)
        reply = self.server.answer(request, behaviour)  # records the request too
        closing = self.server.closing
        if reply.drop or closing.is_set() or (reply.delay and closing.wait(reply.delay)):
            self._drop()
            return
        data = json.dumps(reply.body).encode("utf-8") if reply.raw is None else reply.raw
        self.send_response(reply.status)
        if not any(name.lower() == "content-type" for name in reply.headers):
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        """Reset the connection (RST, not FIN), as a crashed upstream would."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


class _Server(ThreadingHTTPServer):
    """One thread per connection, each tracked so that ``StandIn.stop`` can end them all."""

    daemon_threads = True
    block_on_close = False  # ``end_connections`` joins, with a deadline
    allow_reuse_address = True
    request_queue_size = 128  # concurrent async tests open many connections at once

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._routes: dict[_RouteKey, list[_Mounted]] = {}  # the last mounted answers first
        self._connections: dict[socket.socket, threading.Thread] = {}
        self.reset()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A dropped connection is part of the act; nothing to print (nor to leak)."""

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="spanledger-standin-connection",
            daemon=True,
        )
        with self._lock:
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.pop(request, None)

    def end_connections(self, deadline: float) -> None:
        """Close every open connection (a kept-alive one gets no more answers) and wait, until
        ``deadline`` at most, for the threads serving them to finish."""
        with self._lock:
            open_now = list(self._connections.items())
        for connection, _ in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for _, thread in open_now:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._routes = {
                _key(route): [_Mounted(route, None)]
                for route in (build() for build in BUILT_IN_ROUTES)
            }

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def mount(self, route: Route, times: int | None) -> None:
        with self._lock:
            key = _key(route)
            stack = self._routes.pop(key, [])  # re-inserted last: it answers first now
            if times is None:
                stack = [_Mounted(route, None)]
            else:
                stack.append(_Mounted(route, times))
            self._routes[key] = stack

    def _find(
        self, vendor: str, path: str, body: object
    ) -> tuple[_RouteKey | None, dict[str, str]]:
        """The mounted endpoint answering ``path`` for this body, the last mounted first, and
        what its placeholders matched; a path some endpoint has but none of them selects this
        body gives no key, with that path's params. Called with the lock held."""
        near: dict[str, str] | None = None
        for key in reversed(self._routes):
            route_vendor, template, selects = key
            if route_vendor != vendor or not self._routes[key]:
                continue
            params = _match(template, path)
            if params is None:
                continue
            if not selects or (isinstance(body, dict) and any(k in body for k in selects)):
                return key, params
            near = params if near is None else near
        return None, near if near is not None else {}

    def _path_known(self, vendor: str, path: str) -> bool:
        with self._lock:
            return any(
                v == vendor and stack and _match(template, path) is not None
                for (v, template, _), stack in self._routes.items()
            )

    def _take(self, vendor: str, path: str, body: object) -> Route | None:
        """The route answering this call, using up one of a limited route's answers."""
        with self._lock:
            key, _ = self._find(vendor, path, body)
            if key is None:
                return None
            stack = self._routes[key]
            top = stack[-1]
            if top.remaining is not None:
                top.remaining -= 1
                if top.remaining == 0:
                    stack.pop()
            return top.route

    def answer(self, request: RecordedRequest, behaviour: str) -> Reply:
        """Record ``request`` (with the params its path gives) and answer it."""
        vendor, path = request.vendor, request.path
        try:
            body: Any = request.json()
        except ValueError:
            body = _NOT_JSON
        with self._lock:
            _, params = self._find(vendor, path, body)
        request = replace(request, params=params)
        self.record(request)
        if body is _NOT_JSON:
            return _error(vendor, path, 400)
        if not isinstance(body, dict):
            return _error(vendor, path, 422)
        model = _model_of(vendor, body, params)
        name = behaviour or model
        failure = _failure_by_name(vendor, path, name, model)
        if failure is not None:
            return failure
        delay = _delay_by_name(name)
        route = self._take(vendor, path, body)
        if route is None:  # a body no endpoint on a known path reads is the vendor's 400
            return _later(
                _error(vendor, path, 400 if self._path_known(vendor, path) else 404), delay
            )
        try:
            reply = route.respond(request)
        except Exception as error:  # a test's own route broke: say so, without its message
            failed = _error(vendor, path, 500)
            body = failed.body if isinstance(failed.body, dict) else {"error": failed.body}
            broken = {**body, "standin_route_error": type(error).__name__}
            return replace(failed, body=broken)
        return _later(reply, delay)


class StandIn:
    """The stand-in server: binds 127.0.0.1 on a free port and serves from a background
    thread. Use it as a context manager; on exit it stops within a bounded time, dropping any
    answer still in flight. A stopped server cannot start again: make a new one."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port))
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        """The server's origin, ``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, vendor: str, behaviour: str | None = None) -> str:
        """The origin to give a provider for ``vendor`` (one of ``VENDORS``).

        ``behaviour`` scripts every call to this origin as a model name would (``fail-429``,
        ``slow-500``, ...); TEI needs it, since its wire carries no model.
        """
        if vendor not in VENDORS:
            raise ValueError(f"unknown vendor {vendor!r}; expected one of {VENDORS}")
        return f"{self.url}/{vendor}~{behaviour}" if behaviour else f"{self.url}/{vendor}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in arrival order (safe across threads)."""
        return self._server.requests()

    def route(self, route: Route, *, times: int | None = None) -> Self:
        """Mount ``route`` at its endpoint. With ``times``, it answers that many calls and then
        whatever answered before comes back (a 429 once, then success); without, it replaces
        the endpoint's answer for good."""
        if times is not None and (isinstance(times, bool) or times < 1):
            raise ValueError(f"times must be a whole number >= 1, not {times!r}")
        self._server.mount(route, times)
        return self

    def reset(self) -> None:
        """Forget mounted routes and recorded requests, as a fresh server would (for a server
        shared by several tests)."""
        self._server.reset()

    def start(self) -> Self:
        """Start serving in a daemon thread (``with StandIn() as server`` does this)."""
        if self._stopped:
            raise RuntimeError("this StandIn was stopped; make a new one")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="spanledger-standin",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and free the port, waiting at most about ``timeout`` seconds: answers
        still waiting out a delay are dropped and open connections are closed."""
        deadline = time.monotonic() + timeout
        self._stopped = True
        self._server.closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
            self._thread = None
        self._server.end_connections(deadline)
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
