"""A loopback OTLP/HTTP receiver for spans and metrics, decoding protobuf as a backend would.

Any POST whose path ends in ``/v1/traces`` is decoded as an ``ExportTraceServiceRequest``, one
ending in ``/v1/metrics`` as an ``ExportMetricsServiceRequest``; both are answered 200 with the
empty response message. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["OtlpSink", "Point", "Received"]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return getattr(value, which) if which is not None else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass(frozen=True)
class Received:
    """A decoded span: its name, id and attributes."""

    name: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Point:
    """A decoded metric data point: a sum's value, or a histogram's count and sum."""

    metric: str
    attributes: dict[str, Any]
    value: float | int | None = None
    count: int | None = None


def _points(request: ExportMetricsServiceRequest) -> list[Point]:
    points: list[Point] = []
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind == "sum":
                    for point in metric.sum.data_points:
                        number = point.WhichOneof("value")
                        points.append(
                            Point(
                                metric.name,
                                _attributes(point.attributes),
                                value=getattr(point, number) if number else None,
                            )
                        )
                elif kind == "histogram":
                    for point in metric.histogram.data_points:
                        points.append(
                            Point(
                                metric.name,
                                _attributes(point.attributes),
                                value=point.sum,
                                count=point.count,
                            )
                        )
    return points


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("content-encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        path = self.path.split("?", 1)[0]
        if path.endswith("/v1/metrics"):
            metrics = ExportMetricsServiceRequest()
            metrics.ParseFromString(body)
            self.server.add_points(_points(metrics))
            reply = ExportMetricsServiceResponse().SerializeToString()
        else:
            traces = ExportTraceServiceRequest()
            traces.ParseFromString(body)
            self.server.add_spans(
                [
                    Received(span.name, span.span_id.hex(), _attributes(span.attributes))
                    for resource_spans in traces.resource_spans
                    for scope_spans in resource_spans.scope_spans
                    for span in scope_spans.spans
                ]
            )
            reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.spans: list[Received] = []
        self.points: list[list[Point]] = []

    def add_spans(self, spans: list[Received]) -> None:
        with self.lock:
            self.spans.extend(spans)

    def add_points(self, points: list[Point]) -> None:
        with self.lock:
            self.points.append(points)


class OtlpSink:
    """The receiver, as a context manager; ``url`` is the OTLP base URL."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="otlp-sink",
            daemon=True,
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def spans(self) -> list[Received]:
        with self._server.lock:
            return list(self._server.spans)

    @property
    def metric_exports(self) -> list[list[Point]]:
        """The data points of each metrics POST, in arrival order."""
        with self._server.lock:
            return [list(points) for points in self._server.points]

    def wait_until(self, condition: Callable[[OtlpSink], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not condition(self):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()
