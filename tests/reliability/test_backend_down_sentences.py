"""A backend that is down is told in sentences a person can act on (issue 34, item 2).

Each backend failure is logged once per backend and cause, naming the backend (OTLP traces,
OTLP metrics, Langfuse), its address (``scheme://host:port/path``, no credentials, no query) and
the cause (connection refused, timed out, an HTTP status, a TLS failure); each loss says how many
spans or data points did not arrive and why. ``spanledger demo`` ends with the same account.
Nothing the backend answered, nothing from the URL's credentials or query, the headers or the
payload appears anywhere. Every server here is on 127.0.0.1; timeouts are short.
"""

from __future__ import annotations

import base64
import io
import logging
import re
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, redirect_stdout
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import structlog

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage, Recorder
from spanledger.cli import main
from spanledger.exporters._export_logs import (
    EXPORT_THREAD_PREFIX,
    Backend,
    also_route_threads,
    cause_of_error,
    cause_of_status,
    route_export_logs,
    safe_address,
    work_for,
)
from spanledger.exporters.delivery import not_delivered
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from tests.exporters.conftest import SilentServer, closed_port, unique_public_key
from tests.reliability._exporter_receiver import OtlpSink

SECRET = "SENTINEL-5ecret-do-not-leak"
"""Put in the URL's password and query, a header, the Langfuse secret key, the payload, and
what the failing server answers (its reason phrase and body): it must appear nowhere."""

Logs = list[MutableMapping[str, Any]]


# ----------------------------------------------------------------------------- loopback backends


class _Answer(BaseHTTPRequestHandler):
    server: AnsweringServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = f'{{"error": "{SECRET} in the body"}}'.encode()
        self.send_response(self.server.status, f"{SECRET} reason")
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class AnsweringServer(ThreadingHTTPServer):
    """Answers every POST on 127.0.0.1 with ``status``, a reason phrase and a body that carry
    the secret (a backend's words are never repeated)."""

    daemon_threads = True

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.status = status


@contextmanager
def serving(status: int) -> Iterator[str]:
    """An ``AnsweringServer`` running, as its URL."""
    server = AnsweringServer(status)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()


@contextmanager
def silent() -> Iterator[str]:
    with SilentServer() as server:
        yield server.url


@contextmanager
def tls_to_plain_http() -> Iterator[str]:
    """``https://`` to a server that speaks plain HTTP: the TLS handshake fails."""
    with serving(200) as url:
        yield url.replace("http://", "https://")


def refused() -> AbstractContextManager[str]:
    return nullcontext(f"http://127.0.0.1:{closed_port()}")


def answering(status: int) -> Callable[[], AbstractContextManager[str]]:
    return lambda: serving(status)


OTLP_CASES: dict[str, tuple[Callable[[], AbstractContextManager[str]], str]] = {
    # backend, and the start of the cause every sentence about it names
    "refused": (refused, "connection refused"),
    "silent": (silent, "timed out"),
    "401": (answering(401), "HTTP 401 Unauthorized (check the credentials)"),
    "403": (answering(403), "HTTP 403 Forbidden"),
    "404": (answering(404), "HTTP 404 Not Found (check the endpoint's path)"),
    "503": (answering(503), "HTTP 503 Service Unavailable"),
    "tls": (tls_to_plain_http, "TLS failure"),
}


@pytest.fixture
def short_export_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OTLP exporters give up on an export after half a second (the SDK reads this)."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")


def event(number: int) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"call-{number}",
        provider="cohere",
        model="embed-v4.0",
        started_at=datetime.now(UTC),
        latency_ms=3.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=2),
        inputs=[f"{SECRET} in the payload"],
    )


def send_in_two_rounds(recorder: Recorder) -> None:
    """5 calls, a flush, 7 calls, a flush: two exports that fail for the same cause."""
    for number in range(5):
        recorder.emit(event(number))
    recorder.flush()
    for number in range(5, 12):
        recorder.emit(event(number))
    recorder.flush()


def sentences(logs: Logs, event_name: str, about: str) -> list[str]:
    return [
        entry["message"]
        for entry in logs
        if entry["event"] == event_name and about in entry.get("message", "")
    ]


def assert_told_once_each(messages: list[str]) -> None:
    assert messages, "nothing told"
    assert len(messages) == len(set(messages)), messages


def assert_no_secret(*texts: object) -> None:
    encoded = base64.b64encode(SECRET.encode()).decode()
    for text in texts:
        assert SECRET not in repr(text)
        assert encoded[:16] not in repr(text)


# ----------------------------------------------------------------------------- OTLP


@pytest.mark.parametrize("case", list(OTLP_CASES))
def test_an_otlp_backend_that_fails_is_told_once_per_cause_with_its_address(
    case: str, short_export_timeout: None
) -> None:
    backend, cause = OTLP_CASES[case]
    with backend() as url, structlog.testing.capture_logs() as logs:
        netloc = url.split("://", 1)[1]
        scheme = url.split("://", 1)[0]
        secret_url = f"{scheme}://user:{SECRET}@{netloc}"
        recorder = spanledger.configure(
            environ={
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{secret_url}/v1/traces?key={SECRET}",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"{secret_url}/v1/metrics?key={SECRET}",
                "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={SECRET}",
            },
            capture_payload=True,
            install=False,
            shutdown_timeout=3.0,
        )
        send_in_two_rounds(recorder)
        recorder.shutdown()
        (otel,) = [sink for sink in recorder.sinks if isinstance(sink, OtelExporter)]
        lost = not_delivered(recorder.sinks)

    traces, metrics = f"{url}/v1/traces", f"{url}/v1/metrics"
    for entry in logs:
        print(entry.get("message", entry))
    assert all("message" in entry for entry in exports(logs)), logs  # no unfilled template
    for label, address in (("OTLP traces", traces), ("OTLP metrics", metrics)):
        failing = sentences(logs, "export_sdk_message", f"{label} at {address} failed: ")
        assert_told_once_each(failing)
        assert all(
            m.startswith(f"exporting to {label} at {address} failed: {cause}") for m in failing
        )
        losses = sentences(logs, "export_lost", f"for {label} at {address} w")
        assert_told_once_each(losses)
        assert all(f"not delivered: {cause}" in m for m in losses), losses
    spans = [
        m for m in sentences(logs, "export_lost", "spans for OTLP traces") if "in all" not in m
    ]
    assert spans[0].startswith(f"5 spans for OTLP traces at {traces} were not delivered: {cause}")
    total = sentences(logs, "export_lost", "in all, ")
    assert f"in all, 12 of 12 spans for OTLP traces at {traces} were not delivered: {cause}" in (
        " ".join(total)
    )
    stats = otel.delivery
    assert stats is not None
    assert (stats.produced, stats.exported, stats.failed + stats.dropped) == (12, 0, 12)
    assert (stats.label, stats.address) == ("OTLP traces", traces)
    assert stats.cause is not None
    assert stats.cause.startswith(cause)
    assert lost is not None
    assert lost.startswith(f"12 spans to OTLP traces at {traces} ({cause}")
    assert f"data points to OTLP metrics at {metrics} ({cause}" in lost
    assert_no_secret(logs, lost, stats)


def test_a_silent_backend_past_the_shutdown_deadline_is_told_as_timed_out() -> None:
    """The exporter's own timeout (10 s) outlasts the shutdown: what was in flight is given
    up at the deadline, told as timed out."""
    with silent() as url, structlog.testing.capture_logs() as logs:
        recorder = spanledger.configure(
            environ={"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_METRICS_EXPORTER": "none"},
            install=False,
            shutdown_timeout=1.0,
        )
        for number in range(6):
            recorder.emit(event(number))
        started = time.monotonic()
        recorder.shutdown()
        assert time.monotonic() - started < 3
        lost = not_delivered(recorder.sinks)

    expected = (
        f"6 spans for OTLP traces at {url}/v1/traces were not delivered: "
        "timed out (no answer before the shutdown deadline)"
    )
    assert sentences(logs, "export_lost", "OTLP traces") == [expected]
    assert lost == (
        f"6 spans to OTLP traces at {url}/v1/traces "
        "(timed out (no answer before the shutdown deadline))"
    )


# ----------------------------------------------------------------------------- Langfuse

LANGFUSE_CASES: dict[str, tuple[Callable[[], AbstractContextManager[str]], str]] = {
    "refused": (refused, "connection refused"),
    "401": (answering(401), "HTTP 401 Unauthorized (check the credentials)"),
}


@pytest.mark.parametrize("case", list(LANGFUSE_CASES))
def test_a_langfuse_backend_that_fails_is_told_once_per_cause_with_its_address(
    case: str, short_export_timeout: None
) -> None:
    backend, cause = LANGFUSE_CASES[case]
    with backend() as url, structlog.testing.capture_logs() as logs:
        recorder = spanledger.configure(
            environ={
                "LANGFUSE_PUBLIC_KEY": unique_public_key(),
                "LANGFUSE_SECRET_KEY": f"sk-lf-{SECRET}",
                "LANGFUSE_HOST": url,
            },
            capture_payload=True,
            install=False,
            shutdown_timeout=3.0,
        )
        (langfuse,) = [sink for sink in recorder.sinks if isinstance(sink, LangfuseExporter)]
        # a score goes out on the client's own thread, to the host's API
        langfuse.client.create_score(
            name="share", value=0.5, trace_id="ab" * 16, data_type="NUMERIC"
        )
        send_in_two_rounds(recorder)
        recorder.shutdown()
        lost = not_delivered(recorder.sinks)
        told_about_scores = wait_until(
            lambda: any(f"Langfuse at {url} " in m for m in messages(logs)),
            15,
        )

    observations = f"{url}/api/public/otel/v1/traces"
    for entry in logs:
        print(entry.get("message", entry))
    assert all("message" in entry for entry in exports(logs)), logs
    failing = sentences(logs, "export_sdk_message", f"Langfuse at {observations} failed: ")
    assert failing == [f"exporting to Langfuse at {observations} failed: {cause}"]
    losses = list(sentences(logs, "export_lost", f"Langfuse at {observations}"))
    assert_told_once_each(losses)
    assert losses[0] == f"5 spans for Langfuse at {observations} were not delivered: {cause}"
    assert lost == f"12 spans to Langfuse at {observations} ({cause})"
    # the score the client's own thread could not send: told about the host, by cause
    assert told_about_scores
    about_host = [m for m in messages(logs) if f"Langfuse at {url}" in m and observations not in m]
    assert_told_once_each(about_host)
    assert all(m.endswith(cause) for m in about_host), about_host
    assert_no_secret(logs, lost)


def exports(logs: Logs) -> Logs:
    return [entry for entry in logs if str(entry["event"]).startswith("export_")]


def messages(logs: Logs) -> list[str]:
    return [str(entry.get("message", "")) for entry in list(logs)]


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ----------------------------------------------------------------------------- the SDK's records

SDK_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
RETRY = "Transient error %s encountered while exporting %s batch, retrying in %.2fs."


def refused_error() -> requests.ConnectionError:
    """What requests raises for a refused connection, with the secret in every message."""
    try:
        try:
            raise ConnectionRefusedError(111, f"{SECRET} refused")
        except ConnectionRefusedError as inner:
            raise requests.ConnectionError(f"{SECRET} max retries") from inner
    except requests.ConnectionError as error:
        return error


def test_an_sdk_record_on_an_export_thread_becomes_one_sentence_without_its_text() -> None:
    """Where no session of spanledger's watched the request (a credential provider's), the
    SDK's record is read: the exception's type, never its message or the other arguments."""
    import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401  (its logger)

    route_export_logs()
    backend = Backend("OTLP traces", f"http://user:{SECRET}@127.0.0.1:4318/v1/traces?k={SECRET}")

    def export() -> None:
        work_for(backend)
        for _ in range(3):  # three retries, one sentence
            logging.getLogger(SDK_LOGGER).warning(RETRY, refused_error(), "spans", 1.0)

    with structlog.testing.capture_logs() as logs:
        thread = threading.Thread(target=export, name=f"{EXPORT_THREAD_PREFIX}-test-sentences")
        thread.start()
        thread.join(5)
    assert [entry["message"] for entry in logs] == [
        "exporting to OTLP traces at http://127.0.0.1:4318/v1/traces failed: connection refused"
    ]
    assert logs[0]["source"] == SDK_LOGGER
    assert_no_secret(logs)


class _Refused401(Exception):
    """An API error as the langfuse SDK raises it: the status as an integer field."""

    status_code = 401


def test_a_langfuse_thread_is_told_by_cause_and_never_silenced_by_its_first_failure() -> None:
    import langfuse  # noqa: F401  (its logger)

    route_export_logs()
    host = Backend("Langfuse", f"http://pk:{SECRET}@127.0.0.1:3000")
    name = f"langfuse-score-consumer-{uuid.uuid4().hex}"
    also_route_threads(lambda: host if threading.current_thread().name == name else None)
    unknown = f"Something else happened: %s ({uuid.uuid4().hex})"

    def consume() -> None:
        logger = logging.getLogger("langfuse")
        for _ in range(2):
            logger.error(SCORES_LOST, 2, refused_error())
            logger.error(SCORES_LOST, 3, _Refused401(SECRET))
        logger.error(unknown, SECRET)

    with structlog.testing.capture_logs() as logs:
        thread = threading.Thread(target=consume, name=name)
        thread.start()
        thread.join(5)
    assert [entry.get("message", entry.get("template")) for entry in logs] == [
        "2 scores for Langfuse at http://127.0.0.1:3000 were not delivered: connection refused",
        "3 scores for Langfuse at http://127.0.0.1:3000 were not delivered: "
        "HTTP 401 Unauthorized (check the credentials)",
        unknown,  # a kind it cannot read: its template, once, without the argument
    ]
    assert all(entry["source"] == "langfuse" for entry in logs)
    assert_no_secret(logs)


SCORES_LOST = "API error: Failed to send %s scores to Langfuse. Scores will be dropped. Error: %s"


# ----------------------------------------------------------------------------- the parts


def test_the_address_keeps_scheme_host_port_and_path_only() -> None:
    assert safe_address(f"https://u:{SECRET}@Collector.example:4318/v1/traces?k={SECRET}#x") == (
        "https://collector.example:4318/v1/traces"
    )
    assert safe_address("http://127.0.0.1/v1/metrics") == "http://127.0.0.1:80/v1/metrics"
    assert safe_address("https://cloud.langfuse.com") == "https://cloud.langfuse.com:443"
    assert safe_address("http://[::1]:4318/v1/traces") == "http://[::1]:4318/v1/traces"
    assert safe_address("http://host:99999") == "an unreadable address"


def test_causes_are_read_from_types_and_statuses_only() -> None:
    assert cause_of_error(refused_error()) == "connection refused"
    assert cause_of_error(socket.gaierror(-2, SECRET)) == "name not resolved"
    verify = ssl.SSLCertVerificationError(1, SECRET)
    assert cause_of_error(requests.exceptions.SSLError(verify)) == (
        "TLS failure (certificate not verified)"
    )
    assert cause_of_error(requests.exceptions.ReadTimeout(SECRET)) == (
        "timed out waiting for a response"
    )
    assert cause_of_error(requests.exceptions.ConnectTimeout(SECRET)) == "timed out connecting"
    assert cause_of_error(ConnectionResetError(SECRET)) == "connection reset"
    assert cause_of_error(ValueError(SECRET)) == "the request raised ValueError"
    assert cause_of_status(502) == "HTTP 502 Bad Gateway"
    assert cause_of_status(599) == "HTTP 599"


# ----------------------------------------------------------------------------- the demo

DEMO_VARIABLES = ("OTEL_", "LANGFUSE_", "SPANLEDGER_")


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith(DEMO_VARIABLES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SPANLEDGER_SHUTDOWN_TIMEOUT", "1")
    return monkeypatch


def run_demo(tmp_path: Path) -> tuple[int, str]:
    tmp_path.mkdir(exist_ok=True)
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["demo", "--events", str(tmp_path / "events.jsonl")])
    return status, out.getvalue()


def test_the_demo_ends_saying_what_a_refusing_backend_did_not_get(
    tmp_path: Path, clean_environment: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    clean_environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    clean_environment.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"x-api-key={SECRET}")
    status, text = run_demo(tmp_path)
    last = text.splitlines()[-1]
    print(last)
    assert status == 0
    assert re.fullmatch(
        rf"not delivered: \d+ spans to OTLP traces at {re.escape(url)}/v1/traces "
        rf"\(connection refused\); \d+ data points to OTLP metrics at {re.escape(url)}/v1/metrics "
        r"\(connection refused\)",
        last,
    ), last
    assert "attribution over 1 request" in text  # the report is still there, above it
    assert SECRET not in text


def test_the_demo_adds_nothing_when_all_was_delivered_or_nothing_was_configured(
    tmp_path: Path, clean_environment: pytest.MonkeyPatch
) -> None:
    status, text = run_demo(tmp_path / "none")
    assert status == 0
    assert "not delivered" not in text
    with OtlpSink() as sink:
        clean_environment.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.url)
        status, text = run_demo(tmp_path / "delivered")
        assert sink.spans
    assert status == 0
    assert "not delivered" not in text
