"""The SDK paths' edges, over real loopback sockets: calls made by sinks, error bodies that break
off, and redirects the SDK's HTTP client follows."""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import cohere
import httpx2
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import (
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    Event,
    Recorder,
    RerankFailedEvent,
)
from spanledger.exporters.otel import OtelExporter
from tests.instrument.conftest import API_KEY, Tape

Reply = tuple[int, dict[str, str], bytes]
Script = Callable[[str, str, dict[str, Any], Counter[str]], Reply]
FAST_RETRY = {"retry-after-ms": "1", "retry-after": "0"}


def embedding(tokens: int) -> bytes:
    body = {
        "object": "list",
        "model": "text-embedding-3-small",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return json.dumps(body).encode()


class Scripted:
    """A loopback HTTP server answering each request as ``script`` says; ``seen`` lists
    (method, path, model) in arrival order."""

    def __init__(self, script: Script) -> None:
        self.seen: list[tuple[str, str, object]] = []
        counts: Counter[str] = Counter()
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def answer(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else {}
                with lock:
                    outer.seen.append((self.command, self.path, body.get("model")))
                    counts[self.path] += 1
                    status, headers, data = script(self.command, self.path, body, counts)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = answer
            do_POST = answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextmanager
def serving(script: Script) -> Iterator[Scripted]:
    server = Scripted(script)
    try:
        yield server
    finally:
        server.close()


def client(origin: str, **options: Any) -> openai.OpenAI:
    options.setdefault("max_retries", 0)
    return openai.OpenAI(api_key=API_KEY, base_url=f"{origin}/v1", **options)


def kinds(tape: Tape) -> list[tuple[str, str]]:
    """(start or event kind, model) in the order the sink heard them."""
    return [
        (kind if kind == "start" else type(item).__name__, item.model) for kind, item in tape.log
    ]


class CallingSink(Tape):
    """Makes an instrumented call of its own when it hears the outer call's first failure."""

    def __init__(self, sdk: openai.OpenAI) -> None:
        super().__init__()
        self.sdk = sdk
        self.inner_tokens: int | None = None

    def emit(self, event: Event) -> None:
        super().emit(event)
        if isinstance(event, EmbeddingFailedEvent) and self.inner_tokens is None:
            self.inner_tokens = -1
            result = self.sdk.embeddings.create(model="inner", input=["y"])
            self.inner_tokens = result.usage.prompt_tokens


def test_a_call_a_sink_makes_is_recorded_as_its_own() -> None:
    def script(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        if body["model"] == "outer" and counts[path] == 1:
            return 429, FAST_RETRY, b'{"error": {"message": "slow down"}}'
        return 200, {}, embedding(7 if body["model"] == "outer" else 3)

    with serving(script) as server:
        sdk = spanledger.instrument(client(server.url, max_retries=1))
        sink = CallingSink(sdk)
        with spanledger.use(Recorder([sink])):
            result = sdk.embeddings.create(model="outer", input=["x"])

        assert result.usage.prompt_tokens == 7
        assert sink.inner_tokens == 3
        assert [model for _, _, model in server.seen] == ["outer", "inner", "outer"]
        assert kinds(sink) == [
            ("start", "outer"),
            ("EmbeddingFailedEvent", "outer"),
            ("start", "inner"),
            ("EmbeddingEvent", "inner"),
            ("EmbeddingEvent", "outer"),
        ]
        usage = {event.model: getattr(event, "usage", None) for event in sink.events}
        assert usage == {
            "outer": EmbeddingUsage(input_tokens=7),
            "inner": EmbeddingUsage(input_tokens=3),
        }


class BreakingOffServer:
    """Answers every request with a 400 whose body stops after 10 of 100 promised bytes."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(8)
        self._socket.settimeout(0.05)
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        for _ in range(2000):  # bounded: at most 100 s of waiting
            if self._stop.is_set():
                return
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, rest = data.split(b"\r\n\r\n", 1)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                    b'content-length: 100\r\n\r\n{"error":'
                )

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._socket.close()


@pytest.fixture
def breaking_off() -> Iterator[BreakingOffServer]:
    server = BreakingOffServer()
    yield server
    server.close()


@pytest.mark.parametrize("retries", [0, 2])
def test_an_error_body_that_breaks_off_fails_in_the_clients_own_read(
    breaking_off: BreakingOffServer, retries: int
) -> None:
    def attempt(sdk: openai.OpenAI) -> tuple[str, type[BaseException] | None, int]:
        before = breaking_off.connections
        try:
            with sdk.embeddings.with_streaming_response.create(model="m", input=["x"]):
                pass
        except Exception as exc:
            return ("raised", type(exc), breaking_off.connections - before)
        return ("ok", None, breaking_off.connections - before)

    bare = attempt(client(breaking_off.url, max_retries=retries))
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        seen = attempt(spanledger.instrument(client(breaking_off.url, max_retries=retries)))

    assert bare == ("raised", httpx2.RemoteProtocolError, 1)
    assert seen == bare
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (ErrorCategory.INVALID_REQUEST, 400)
    assert event.fingerprint is None


async def test_an_async_error_body_that_breaks_off_fails_in_the_clients_own_read(
    breaking_off: BreakingOffServer,
) -> None:
    async def attempt(sdk: openai.AsyncOpenAI) -> type[BaseException] | None:
        try:
            async with sdk.embeddings.with_streaming_response.create(model="m", input=["x"]):
                pass
        except Exception as exc:
            return type(exc)
        return None

    def make() -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(api_key=API_KEY, base_url=f"{breaking_off.url}/v1", max_retries=0)

    bare = await attempt(make())
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        seen = await attempt(spanledger.instrument(make()))

    assert bare is httpx2.RemoteProtocolError
    assert seen is bare
    assert breaking_off.connections == 2
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.status_code == 400


def test_an_error_body_the_client_reads_is_fingerprinted() -> None:
    def script(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        return 400, {}, b'{"error": {"message": "bad input"}}'

    with serving(script) as server:
        tape = Tape()
        with spanledger.use(Recorder([tape])), pytest.raises(openai.BadRequestError):
            spanledger.instrument(client(server.url)).embeddings.create(model="m", input=["x"])

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == len(b'{"error": {"message": "bad input"}}')


def moved(status: int, target: str, *, first_answer: Reply | None = None) -> Script:
    """``/v1/embeddings`` answers ``status`` to ``target``; the target answers ``first_answer``
    the first time (when given) and usage 7 after that."""

    def script(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        if path == "/v1/embeddings":
            return status, {"location": target}, b""
        if first_answer is not None and counts[path] == 1:
            return first_answer
        return 200, {}, embedding(7)

    return script


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_to_another_path_is_the_same_attempt_with_its_figures(status: int) -> None:
    with serving(moved(status, "/moved/embeddings-v2")) as server:
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            result = spanledger.instrument(client(server.url)).embeddings.create(
                model="m", input=["x"], encoding_format="float"
            )

    assert result.usage.prompt_tokens == 7
    assert [path for _, path, _ in server.seen] == ["/v1/embeddings", "/moved/embeddings-v2"]
    assert [kind for kind, _ in tape.log] == ["start", "event"]
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.usage, event.dimensions) == (EmbeddingUsage(input_tokens=7), 2)


def test_a_see_other_redirect_followed_as_a_get_is_the_same_attempt() -> None:
    with serving(moved(303, "/results/embeddings-1")) as server:
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            result = spanledger.instrument(client(server.url)).embeddings.create(
                model="m", input=["x"], encoding_format="float"
            )

    assert result.usage.prompt_tokens == 7
    assert [(method, path) for method, path, _ in server.seen] == [
        ("POST", "/v1/embeddings"),
        ("GET", "/results/embeddings-1"),
    ]
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == EmbeddingUsage(input_tokens=7)


def test_a_retry_after_a_redirected_attempt_is_a_new_attempt() -> None:
    limited: Reply = (429, FAST_RETRY, b'{"error": {"message": "slow down"}}')
    with serving(moved(307, "/moved/embeddings-v2", first_answer=limited)) as server:
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            result = spanledger.instrument(client(server.url, max_retries=1)).embeddings.create(
                model="m", input=["x"], encoding_format="float"
            )

    assert result.usage.prompt_tokens == 7
    assert len(server.seen) == 4
    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert (failed.error_category, failed.status_code) == (ErrorCategory.RATE_LIMIT, 429)
    assert isinstance(succeeded, EmbeddingEvent)
    assert succeeded.usage == EmbeddingUsage(input_tokens=7)
    assert [kind for kind, _ in tape.log] == ["start", "event", "event"]


def test_each_attempt_lost_in_a_redirect_loop_is_recorded() -> None:
    def loop(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        return 307, {"location": "/v1/embeddings"}, b""

    with serving(loop) as server:
        http = httpx2.Client(max_redirects=3, follow_redirects=True)
        sdk = spanledger.instrument(client(server.url, max_retries=1, http_client=http))
        tape = Tape()
        with spanledger.use(Recorder([tape])), pytest.raises(openai.APIConnectionError):
            sdk.embeddings.create(model="m", input=["x"])

    assert len(server.seen) == 8
    assert len(tape.events) == 2
    assert all(isinstance(event, EmbeddingFailedEvent) for event in tape.events)
    assert [kind for kind, _ in tape.log] == ["start", "event", "event"]


@pytest.mark.parametrize(
    "body",
    [
        {"id": "rr-1", "meta": {"billed_units": {"search_units": 1}}},
        {"id": "rr-1", "results": None, "meta": {"billed_units": {"search_units": 1}}},
    ],
)
def test_a_rerank_answer_without_results_fails_and_its_span_ends(body: dict[str, Any]) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tape = Tape()
    recorder = Recorder([OtelExporter(tracer_provider=provider, enable_metrics=False), tape])

    def script(method: str, path: str, sent: dict[str, Any], counts: Counter[str]) -> Reply:
        return 200, {}, json.dumps(body).encode()

    with serving(script) as server:
        sdk = spanledger.instrument(
            cohere.ClientV2(api_key=API_KEY, base_url=server.url, max_retries=0)
        )
        tracer = provider.get_tracer("test")
        with spanledger.use(recorder), tracer.start_as_current_span("turn") as turn:
            result = sdk.rerank(model="rerank-v3.5", query="q", documents=["a", "b"])
            assert trace.get_current_span() is turn

    assert result.results is None
    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "missing_field",
    )
    assert event.fingerprint is not None
    assert sorted(span.name for span in spans.get_finished_spans()) == [
        "rerank rerank-v3.5",
        "turn",
    ]


def test_a_redirect_the_client_does_not_follow_is_that_attempts_failure() -> None:
    def script(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        if counts[path] == 1:
            return 307, {"location": "/elsewhere", "x-should-retry": "true"}, b""
        return 200, {}, embedding(7)

    with serving(script) as server:
        http = httpx2.Client()  # follows no redirect
        sdk = spanledger.instrument(client(server.url, max_retries=1, http_client=http))
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            sdk.embeddings.create(model="m", input=["x"], encoding_format="float")

    assert len(server.seen) == 2
    redirected, answered = tape.events
    assert isinstance(redirected, EmbeddingFailedEvent)
    assert (redirected.status_code, redirected.error_type) == (307, "http_307")
    assert isinstance(answered, EmbeddingEvent)


class StartCallingSink(Tape):
    """Makes an instrumented call of its own when it hears the outer call start, and another
    when it hears the outer call's last event."""

    def __init__(self, sdk: openai.OpenAI) -> None:
        super().__init__()
        self.sdk = sdk
        self.inner: list[int] = []

    def _inner(self) -> None:
        result = self.sdk.embeddings.create(model="inner", input=["y"])
        self.inner.append(result.usage.prompt_tokens)

    def call_started(self, started: CallStarted) -> None:
        super().call_started(started)
        if started.model == "outer":
            self._inner()

    def emit(self, event: Event) -> None:
        super().emit(event)
        if event.model == "outer":
            self._inner()


@pytest.mark.parametrize("outcome", ["returned", "raised"])
def test_calls_a_sink_makes_at_the_start_and_at_the_end_are_recorded_as_their_own(
    outcome: str,
) -> None:
    def script(method: str, path: str, body: dict[str, Any], counts: Counter[str]) -> Reply:
        if body["model"] == "outer" and outcome == "raised":
            return 400, {}, b'{"error": {"message": "no"}}'
        return 200, {}, embedding(7 if body["model"] == "outer" else 3)

    with serving(script) as server:
        sdk = spanledger.instrument(client(server.url))
        sink = StartCallingSink(sdk)
        with spanledger.use(Recorder([sink])):
            if outcome == "raised":
                with pytest.raises(openai.BadRequestError):
                    sdk.embeddings.create(model="outer", input=["x"])
            else:
                sdk.embeddings.create(model="outer", input=["x"])

        assert sink.inner == [3, 3]
        last = "EmbeddingEvent" if outcome == "returned" else "EmbeddingFailedEvent"
        assert kinds(sink) == [
            ("start", "outer"),
            ("start", "inner"),
            ("EmbeddingEvent", "inner"),
            (last, "outer"),
            ("start", "inner"),
            ("EmbeddingEvent", "inner"),
        ]
