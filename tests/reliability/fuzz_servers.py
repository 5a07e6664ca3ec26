"""Where fuzzed replies come from: an ``httpx.MockTransport`` handler for the bulk, and a raw
socket server on 127.0.0.1 for the byte-level framing ``MockTransport`` cannot produce."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import httpx

from tests.reliability.fuzz_bodies import BODY_SENTINEL, WireReply

# --------------------------------------------------------------------------- in-process


class FailingStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that yields ``prefix`` and then fails like a dropped connection."""

    def __init__(self, prefix: bytes, error: Exception) -> None:
        self._prefix = prefix
        self._error = error

    def __iter__(self) -> Iterator[bytes]:
        if self._prefix:
            yield self._prefix
        raise self._error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._prefix:
            yield self._prefix
        raise self._error


def build_response(reply: WireReply, request: httpx.Request) -> httpx.Response:
    """A fresh ``httpx.Response`` for ``reply`` (or the transport failure it scripts)."""
    failure = reply.failure
    if failure is not None and failure.after is None:
        raise failure.exception()
    if failure is not None:
        stream = FailingStream(reply.body[: failure.after], failure.exception())
        return httpx.Response(
            reply.status, headers=list(reply.headers), stream=stream, request=request
        )
    # A stream, not ``content=``: a real transport's response is unread until the client
    # reads it (``content=`` would make it read already, and a streamed read would fail).
    return httpx.Response(
        reply.status,
        headers=list(reply.headers),
        stream=httpx.ByteStream(reply.body),
        request=request,
    )


class MockWire:
    """A ``MockTransport`` handler: the n-th request of a call gets the n-th scripted reply
    (the last one repeats). Keeps each request's bytes."""

    def __init__(self) -> None:
        self.replies: list[WireReply] = []
        self.requests: list[bytes] = []

    def script(self, replies: Sequence[WireReply]) -> None:
        self.replies = list(replies)
        self.requests = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.content)
        if not self.replies:
            raise AssertionError("MockWire: a request arrived with no reply scripted")
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        return build_response(reply, request)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)


# --------------------------------------------------------------------------- raw socket


@dataclass(frozen=True)
class RawScript:
    """Bytes a raw server writes after reading one request, then how it ends the connection.
    ``sound`` marks well-formed answers (a valid body must then be a success)."""

    name: str
    data: bytes
    ending: Literal["close", "reset"] = "close"
    sound: bool = False

    def describe(self) -> str:
        shown = self.data[:200]
        more = f"... ({len(self.data)} bytes)" if len(self.data) > 200 else ""
        return f"raw {self.name!r} then {self.ending}: bytes={shown!r}{more}"


def _head(status: bytes, *lines: bytes) -> bytes:
    fields = b"".join(line + b"\r\n" for line in lines)
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\nConnection: close\r\n"
        + fields
        + b"\r\n"
    )


def raw_scripts(body: bytes) -> tuple[RawScript, ...]:
    """Every byte-level case, each carrying ``body`` (which should hold the body sentinel)."""
    sentinel = BODY_SENTINEL.encode()
    size = len(body)
    half = body[: size // 2]
    length = b"Content-Length: %d" % size
    chunked = _head(b"200 OK", b"Transfer-Encoding: chunked")
    return (
        RawScript("content-length", _head(b"200 OK", length) + body, sound=True),
        RawScript("chunked", chunked + b"%x\r\n" % size + body + b"\r\n0\r\n\r\n", sound=True),
        RawScript("close-delimited", _head(b"200 OK") + body, sound=True),
        RawScript(
            "informational-first",
            b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + _head(b"200 OK", length) + body,
            sound=True,
        ),
        RawScript("illegal-chunk-header", chunked + sentinel + b"\r\n" + body + b"\r\n0\r\n\r\n"),
        RawScript(
            "illegal-chunk-header-after-a-chunk",
            chunked + b"%x\r\n" % len(half) + half + b"\r\nzz " + sentinel + b"\r\n",
        ),
        RawScript("truncated-chunked", chunked + b"%x\r\n" % size + half),
        RawScript("huge-chunk-size", chunked + b"ffffffffffffffff\r\n" + body),
        RawScript("reset-mid-body", _head(b"200 OK", length) + half, "reset"),
        RawScript(
            "content-length-larger",
            _head(b"200 OK", b"Content-Length: %d" % (size + 64)) + body,
        ),
        RawScript(
            "content-length-garbage", _head(b"200 OK", b"Content-Length: " + sentinel) + body
        ),
        RawScript(
            "content-length-conflict",
            _head(b"200 OK", length, b"Content-Length: %d" % (size + 1)) + body,
        ),
        RawScript("illegal-status-line", b"HTTP/1.1 2x0 " + sentinel + b"\r\n\r\n" + body),
        RawScript("illegal-header-line", _head(b"200 OK", b"X-" + sentinel, length) + body),
        RawScript("not-http", sentinel + b"\r\n" + body),
        RawScript(
            "error-status-reset-mid-body",
            _head(b"503 Service Unavailable", length, b"Retry-After: 7") + half,
            "reset",
        ),
        RawScript(
            "gzip-declared-not-applied",
            _head(b"200 OK", length, b"Content-Encoding: gzip") + body,
        ),
        RawScript("nothing-then-close", b""),
        RawScript("nothing-then-reset", b"", "reset"),
    )


class RawServer:
    """Answers each connection on 127.0.0.1 with the current ``RawScript``, one connection at
    a time. Every wait is bounded; ``stop`` joins the thread."""

    MAX_REQUEST = 4 * 1024 * 1024

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fuzz-raw-server", daemon=True)
        self.script: RawScript | None = None
        self.answered = 0

    @property
    def origin(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> RawServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()
        if self._thread.is_alive():
            raise RuntimeError("the raw fuzz server thread did not stop")

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(2.0)
        try:
            if not self._read_request(connection):
                return
            script = self.script
            if script is None:
                return
            if script.data:
                connection.sendall(script.data)
            self.answered += 1
            if script.ending == "reset":
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_WR)
                self._drain(connection)
        except OSError:
            return

    def _read_request(self, connection: socket.socket) -> bool:
        """Read one request's head and its Content-Length body, within 2 s and 4 MiB."""
        deadline = time.monotonic() + 2.0
        data = b""
        while b"\r\n\r\n" not in data:
            if time.monotonic() > deadline or len(data) > self.MAX_REQUEST:
                return False
            chunk = connection.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                with contextlib.suppress(ValueError):
                    length = int(value.strip())
        length = min(length, self.MAX_REQUEST)
        while len(rest) < length:
            if time.monotonic() > deadline:
                return False
            chunk = connection.recv(65536)
            if not chunk:
                return False
            rest += chunk
        return True

    @staticmethod
    def _drain(connection: socket.socket) -> None:
        """Wait (briefly) for the client to close, so closing here never resets the answer."""
        connection.settimeout(0.5)
        deadline = time.monotonic() + 0.5
        with contextlib.suppress(OSError):
            while time.monotonic() < deadline and connection.recv(65536):
                pass
