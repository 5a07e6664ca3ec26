"""A loopback stand-in for the Langfuse OTLP/HTTP ingestion endpoint.

The Langfuse SDK (v3 and later) is an OpenTelemetry tracer: every observation is an OTel span
that a ``BatchSpanProcessor`` posts to ``<base_url>/api/public/otel/v1/traces`` as a protobuf
``ExportTraceServiceRequest`` (gzip-compressed by default), authenticated with HTTP Basic
``public_key:secret_key``. This receiver accepts that request on 127.0.0.1, decodes it into plain
dicts (``ReceivedSpan``) and answers like the real endpoint: 200 with an empty
``ExportTraceServiceResponse``. Any other request (the SDK's REST client may ask for projects,
health, ...) gets 200 ``{}`` and is recorded too.

For robustness tests, ``fail_traces`` makes every traces POST answer with an error status
(500 unless ``failure_status`` says otherwise); such a request is recorded but its spans are not
stored. ``traces_delay`` makes every traces POST wait that many seconds before answering.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, TypedDict

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = [
    "TRACES_PATH",
    "OtlpReceiver",
    "ReceivedEvent",
    "ReceivedRequest",
    "ReceivedSpan",
    "decode_any_value",
]

TRACES_PATH = "/api/public/otel/v1/traces"
MAX_BODY_BYTES = 64 * 1024 * 1024


class ReceivedEvent(TypedDict):
    """A span event, decoded."""

    name: str
    time_unix_nano: int
    attributes: dict[str, Any]


class ReceivedSpan(TypedDict):
    """One span of an accepted traces POST, decoded into plain Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: int
    start_time_unix_nano: int
    end_time_unix_nano: int
    status_code: int
    """0 unset, 1 ok, 2 error (``opentelemetry.proto.trace.v1.Status.StatusCode``)."""
    status_message: str
    attributes: dict[str, Any]
    events: list[ReceivedEvent]
    resource_attributes: dict[str, Any]
    scope_name: str
    scope_version: str
    scope_attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedRequest:
    """One HTTP request as the receiver saw it (body already decompressed)."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes
    status: int
    """The status the receiver answered with."""
    span_count: int = 0
    """Spans decoded from a traces POST (also counted when the POST was answered with an error)."""
    error: str | None = None
    """Why the body could not be decoded, if it could not."""

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    def basic_credentials(self) -> str | None:
        """The decoded ``user:password`` of a Basic ``Authorization`` header, if any."""
        value = self.authorization
        if value is None:
            return None
        scheme, _, token = value.partition(" ")
        if scheme.lower() != "basic":
            return None
        return base64.b64decode(token.strip(), validate=True).decode("utf-8")


# --- protobuf decoding -------------------------------------------------------------------------


def decode_any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a Python value (``None`` when unset)."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return value.bool_value
    if which == "int_value":
        return value.int_value
    if which == "double_value":
        return value.double_value
    if which == "bytes_value":
        return bytes(value.bytes_value)
    if which == "array_value":
        return [decode_any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return _decode_key_values(value.kvlist_value.values)
    return None


def _decode_key_values(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: decode_any_value(pair.value) for pair in pairs}


def _decode_protobuf(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource_attributes = _decode_key_values(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_attributes = _decode_key_values(scope.attributes)
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        kind=int(span.kind),
                        start_time_unix_nano=span.start_time_unix_nano,
                        end_time_unix_nano=span.end_time_unix_nano,
                        status_code=int(span.status.code),
                        status_message=span.status.message,
                        attributes=_decode_key_values(span.attributes),
                        events=[
                            ReceivedEvent(
                                name=event.name,
                                time_unix_nano=event.time_unix_nano,
                                attributes=_decode_key_values(event.attributes),
                            )
                            for event in span.events
                        ],
                        resource_attributes=dict(resource_attributes),
                        scope_name=scope.name,
                        scope_version=scope.version,
                        scope_attributes=dict(scope_attributes),
                    )
                )
    return spans


# --- OTLP/JSON decoding (ids are hex strings there, int64s may be strings) --------------------

_STATUS_CODES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_SPAN_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}


def _json_int(value: Any, names: Mapping[str, int] | None = None) -> int:
    if value is None:
        return 0
    if names is not None and isinstance(value, str) and value in names:
        return names[value]
    return int(value)


def _json_any_value(value: Mapping[str, Any] | None) -> Any:
    if not value:
        return None
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    if "arrayValue" in value:
        return [_json_any_value(item) for item in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return _json_key_values(value["kvlistValue"].get("values", []))
    return None


def _json_key_values(pairs: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {str(pair["key"]): _json_any_value(pair.get("value")) for pair in pairs or []}


def _decode_json(body: bytes) -> list[ReceivedSpan]:
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError("an OTLP/JSON request is an object")
    spans: list[ReceivedSpan] = []
    for resource_spans in document.get("resourceSpans", []):
        resource = resource_spans.get("resource") or {}
        resource_attributes = _json_key_values(resource.get("attributes"))
        for scope_spans in resource_spans.get("scopeSpans", []):
            scope = scope_spans.get("scope") or {}
            scope_attributes = _json_key_values(scope.get("attributes"))
            for span in scope_spans.get("spans", []):
                status = span.get("status") or {}
                spans.append(
                    ReceivedSpan(
                        name=str(span.get("name", "")),
                        trace_id=str(span.get("traceId", "")).lower(),
                        span_id=str(span.get("spanId", "")).lower(),
                        parent_span_id=str(span.get("parentSpanId") or "").lower() or None,
                        kind=_json_int(span.get("kind"), _SPAN_KINDS),
                        start_time_unix_nano=_json_int(span.get("startTimeUnixNano")),
                        end_time_unix_nano=_json_int(span.get("endTimeUnixNano")),
                        status_code=_json_int(status.get("code"), _STATUS_CODES),
                        status_message=str(status.get("message", "")),
                        attributes=_json_key_values(span.get("attributes")),
                        events=[
                            ReceivedEvent(
                                name=str(event.get("name", "")),
                                time_unix_nano=_json_int(event.get("timeUnixNano")),
                                attributes=_json_key_values(event.get("attributes")),
                            )
                            for event in span.get("events", [])
                        ],
                        resource_attributes=dict(resource_attributes),
                        scope_name=str(scope.get("name", "")),
                        scope_version=str(scope.get("version", "")),
                        scope_attributes=dict(scope_attributes),
                    )
                )
    return spans


def _decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported content-encoding {encoding!r}")


# --- HTTP server -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 10  # an idle keep-alive connection is dropped after this many seconds

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: no request lines on stderr."""

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline(1024).split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        path = self.path.split("?", 1)[0]
        try:
            raw = self._read_body()
        except (ValueError, OSError) as exc:
            self.server.record(
                ReceivedRequest(self.command, self.path, headers, b"", 400, error=repr(exc))
            )
            self._reply(400, b"{}", "application/json")
            self.close_connection = True
            return
        if self.command == "POST" and path == TRACES_PATH:
            self._traces(headers, raw)
            return
        self.server.record(ReceivedRequest(self.command, self.path, headers, raw, 200))
        self._reply(200, b"{}", "application/json")

    def _traces(self, headers: dict[str, str], raw: bytes) -> None:
        content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        is_json = content_type.endswith("json")
        try:
            body = _decompress(raw, headers.get("content-encoding", ""))
            spans = _decode_json(body) if is_json else _decode_protobuf(body)
        except Exception as exc:
            self.server.record(
                ReceivedRequest(self.command, self.path, headers, raw, 400, error=repr(exc))
            )
            self._reply(400, b"{}", "application/json")
            return
        status = self.server.traces_status
        if self.server.traces_delay > 0:
            time.sleep(self.server.traces_delay)
        self.server.record(
            ReceivedRequest(self.command, self.path, headers, body, status, len(spans)),
            spans if status < 300 else (),
        )
        if status >= 300:
            self._reply(status, b'{"message":"receiver told to fail"}', "application/json")
        elif is_json:
            self._reply(200, b"{}", "application/json")
        else:
            self._reply(200, ExportTraceServiceResponse().SerializeToString(), content_type)

    def _reply(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type or "application/x-protobuf")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = _handle
    do_GET = _handle
    do_PUT = _handle
    do_PATCH = _handle
    do_DELETE = _handle

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], traces_status: int) -> None:
        super().__init__(address, _Handler)
        self.traces_status = traces_status
        self.traces_delay = 0.0
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.requests: list[ReceivedRequest] = []
        self.spans: list[ReceivedSpan] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client dropping its connection is not worth a traceback."""

    def record(self, request: ReceivedRequest, spans: Iterable[ReceivedSpan] = ()) -> None:
        with self.changed:
            self.requests.append(request)
            self.spans.extend(spans)
            self.changed.notify_all()


class OtlpReceiver:
    """The Langfuse OTLP/HTTP traces endpoint on 127.0.0.1, in a background thread.

    Use as a context manager; ``url`` is what to give ``Langfuse(base_url=...)``.
    """

    def __init__(
        self, *, fail_traces: bool = False, failure_status: int = 500, traces_delay: float = 0.0
    ) -> None:
        self.failure_status = failure_status
        self._server = _Server(("127.0.0.1", 0), failure_status if fail_traces else 200)
        self.traces_delay = traces_delay
        self._thread: threading.Thread | None = None

    # -- configuration --

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def traces_url(self) -> str:
        return self.url + TRACES_PATH

    @property
    def fail_traces(self) -> bool:
        return self._server.traces_status >= 300

    @fail_traces.setter
    def fail_traces(self, failing: bool) -> None:
        self._server.traces_status = self.failure_status if failing else 200

    @property
    def traces_delay(self) -> float:
        return self._server.traces_delay

    @traces_delay.setter
    def traces_delay(self, seconds: float) -> None:
        self._server.traces_delay = max(0.0, seconds)

    # -- what was received --

    @property
    def requests(self) -> list[ReceivedRequest]:
        with self._server.lock:
            return list(self._server.requests)

    @property
    def trace_posts(self) -> list[ReceivedRequest]:
        """Every POST to the traces path, accepted or not."""
        return [r for r in self.requests if r.method == "POST" and r.path == TRACES_PATH]

    @property
    def other_requests(self) -> list[ReceivedRequest]:
        """Everything that was not a POST to the traces path."""
        return [r for r in self.requests if not (r.method == "POST" and r.path == TRACES_PATH)]

    @property
    def spans(self) -> list[ReceivedSpan]:
        """Spans of accepted traces POSTs, in arrival order."""
        with self._server.lock:
            return list(self._server.spans)

    def clear(self) -> None:
        with self._server.lock:
            self._server.requests.clear()
            self._server.spans.clear()

    def wait_for(self, predicate: Callable[[OtlpReceiver], bool], timeout: float = 5.0) -> bool:
        """Wait at most ``timeout`` seconds for ``predicate(self)``; return whether it held."""
        deadline = time.monotonic() + timeout
        while True:
            if predicate(self):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._server.changed:
                self._server.changed.wait(min(remaining, 0.1))

    def wait_for_spans(self, count: int, timeout: float = 5.0) -> list[ReceivedSpan]:
        """Wait until at least ``count`` spans were accepted; return all accepted spans."""
        self.wait_for(lambda receiver: len(receiver.spans) >= count, timeout)
        return self.spans

    # -- lifecycle --

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="otlp-receiver",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
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
