"""The bundled sinks: the JSONL event log writer and the console line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spanledger import (
    ConsoleSink,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    JsonlSink,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
    ScoredDocument,
    read_events,
)
from spanledger.eventlog import encode_event
from spanledger.events import Event

SENTINEL = "SENTINEL-7f3a"
STARTED_AT = datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)


def make_embedding_event(**overrides: Any) -> EmbeddingEvent:
    fields: dict[str, Any] = {
        "call_id": "emb-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
        "latency_ms": 12.5,
        "input_count": 3,
        "usage": EmbeddingUsage(input_tokens=42),
        "dimensions": 1536,
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def make_embedding_failed_event(**overrides: Any) -> EmbeddingFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "emb-2",
        "provider": "tei",
        "model": "bge-small",
        "started_at": STARTED_AT,
        "latency_ms": 250.0,
        "input_count": 1,
        "error_category": ErrorCategory.UNAVAILABLE,
        "status_code": 503,
    }
    fields.update(overrides)
    return EmbeddingFailedEvent(**fields)


def make_rerank_event(**overrides: Any) -> RerankEvent:
    fields: dict[str, Any] = {
        "call_id": "rr-1",
        "provider": "cohere",
        "model": "rerank-v3.5",
        "started_at": STARTED_AT,
        "latency_ms": 88.25,
        "query_length": 10,
        "document_count": 5,
        "top_k": 3,
        "result_count": 3,
        "usage": RerankUsage(search_units=1),
    }
    fields.update(overrides)
    return RerankEvent(**fields)


def make_rerank_failed_event(**overrides: Any) -> RerankFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "rr-2",
        "provider": "voyage",
        "model": "rerank-2",
        "started_at": STARTED_AT,
        "latency_ms": 4.0,
        "query_length": 4,
        "document_count": 2,
        "error_category": ErrorCategory.RATE_LIMIT,
        "status_code": 429,
        "retry_after": 30.0,
    }
    fields.update(overrides)
    return RerankFailedEvent(**fields)


def payload_events() -> list[Event]:
    extras = {"authorization": f"Bearer {SENTINEL}"}
    return [
        make_embedding_event(inputs=[f"text {SENTINEL}"], request_extras=extras),
        make_embedding_failed_event(inputs=[SENTINEL], request_extras=extras),
        make_rerank_event(
            query=SENTINEL,
            documents=[SENTINEL, "b"],
            results=[ScoredDocument(index=0, relevance_score=0.5, document=SENTINEL)],
            request_extras=extras,
        ),
        make_rerank_failed_event(query=SENTINEL, documents=[SENTINEL], request_extras=extras),
    ]


# --- JsonlSink --------------------------------------------------------------------------


def test_jsonl_sink_writes_one_schema_stamped_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "events.jsonl"
    events = payload_events()
    sink = JsonlSink(path)
    for event in events:
        sink.emit(event)
    sink.shutdown()

    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.decode().splitlines()
    assert len(lines) == len(events)
    for line, event in zip(lines, events, strict=True):
        data = json.loads(line)
        assert isinstance(data, dict)
        assert data["schema"] == 1
        assert data["kind"] == event.kind
        assert line == encode_event(event)


def test_jsonl_sink_events_read_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = payload_events() * 2
    sink = JsonlSink(path)
    for event in events:
        sink.emit(event)
    sink.shutdown()
    log = read_events(path)
    assert log.problems == []
    assert [type(e) for e in log] == [type(e) for e in events]
    assert [e.model_dump() for e in log] == [e.model_dump() for e in events]


def test_jsonl_sink_appends_to_an_existing_log(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first = JsonlSink(path)
    first.emit(make_embedding_event(call_id="one"))
    first.shutdown()
    second = JsonlSink(path)
    second.emit(make_embedding_event(call_id="two"))
    second.shutdown()
    assert [e.call_id for e in read_events(path)] == ["one", "two"]


def test_jsonl_sink_never_writes_payload(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    for event in payload_events():
        sink.emit(event)
    sink.shutdown()
    raw = path.read_bytes()
    assert raw.count(b"\n") == 4
    assert SENTINEL.encode() not in raw


def test_jsonl_sink_concurrent_emitters(tmp_path: Path) -> None:
    path = tmp_path / "concurrent.jsonl"
    sink = JsonlSink(path)
    threads_n, per_thread = 8, 500
    barrier = threading.Barrier(threads_n)

    def work(t: int) -> None:
        barrier.wait()
        for i in range(per_thread):
            sink.emit(make_embedding_event(call_id=f"t{t}-{i}", request_id="r" * (i % 97)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.shutdown()

    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    lines = lines[:-1]
    assert len(lines) == threads_n * per_thread == 4000
    for line in lines:
        assert json.loads(line)["schema"] == 1
    log = read_events(path)
    assert log.problems == []
    assert len(log) == 4000
    assert {e.call_id for e in log} == {
        f"t{t}-{i}" for t in range(threads_n) for i in range(per_thread)
    }


def test_jsonl_sink_flush_makes_lines_readable(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    try:
        sink.emit(make_embedding_event(call_id="a"))
        sink.flush()
        assert [e.call_id for e in read_events(path)] == ["a"]
    finally:
        sink.shutdown()


def test_jsonl_sink_shutdown_flushes_closes_and_refuses_more(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    sink.emit(make_embedding_event(call_id="a"))
    sink.shutdown()
    assert [e.call_id for e in read_events(path)] == ["a"]
    with pytest.raises(RuntimeError):
        sink.emit(make_embedding_event(call_id="b"))
    sink.shutdown()  # idempotent
    sink.flush()  # harmless after shutdown
    assert [e.call_id for e in read_events(path)] == ["a"]
    assert str(path) in repr(sink)


def test_recorder_isolates_emit_after_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    recorder = Recorder(sinks=[sink])
    recorder.emit(make_embedding_event(call_id="a"))
    recorder.shutdown()
    recorder.emit(make_embedding_event(call_id="b"))  # must not raise
    stats = recorder.stats["0:JsonlSink"]
    assert (stats.delivered, stats.failed) == (1, 1)
    assert stats.failures_by_type == {"RuntimeError": 1}
    assert [e.call_id for e in read_events(path)] == ["a"]


@pytest.mark.parametrize("hold", ["global", "recorder-default", "unreferenced"])
def test_jsonl_sink_is_flushed_at_interpreter_exit(tmp_path: Path, hold: str) -> None:
    path = tmp_path / "exit.jsonl"
    event = make_rerank_event(call_id="at-exit")
    script = textwrap.dedent(
        """
        import sys
        from pydantic import TypeAdapter
        import spanledger
        from spanledger.events import Event

        path, line, hold = sys.argv[1], sys.argv[2], sys.argv[3]
        event = TypeAdapter(Event).validate_json(line)
        if hold == "global":
            sink = spanledger.JsonlSink(path)
            sink.emit(event)
        elif hold == "recorder-default":
            spanledger.set_default_recorder(spanledger.Recorder([spanledger.JsonlSink(path)]))
            spanledger.get_recorder().emit(event)
        else:
            def once():
                spanledger.JsonlSink(path).emit(event)
            once()
        """
    )
    subprocess.run(
        [sys.executable, "-c", script, str(path), event.model_dump_json(), hold],
        check=True,
        timeout=60,
        capture_output=True,
    )
    log = read_events(path)
    assert log.problems == []
    assert [e.model_dump() for e in log] == [event.model_dump()]


# --- ConsoleSink ------------------------------------------------------------------------


def console_lines(*events: Event) -> list[str]:
    stream = io.StringIO()
    sink = ConsoleSink(stream)
    for event in events:
        sink.emit(event)
    sink.flush()
    text = stream.getvalue()
    assert text.endswith("\n")
    assert text.count("\n") == len(events)
    return text.splitlines()


def test_console_embedding_line() -> None:
    [line] = console_lines(make_embedding_event())
    assert "openai" in line
    assert "text-embedding-3-small" in line
    assert "12.5 ms" in line
    assert "42 input tokens" in line
    assert "usage not reported" not in line
    assert "FAILED" not in line


def test_console_rerank_line_with_each_usage_figure() -> None:
    units, tokens, both = console_lines(
        make_rerank_event(usage=RerankUsage(search_units=2)),
        make_rerank_event(usage=RerankUsage(input_tokens=300)),
        make_rerank_event(usage=RerankUsage(search_units=1, input_tokens=7)),
    )
    for line in (units, tokens, both):
        assert "cohere" in line
        assert "rerank-v3.5" in line
        assert "88.2 ms" in line or "88.3 ms" in line
    assert "2 search units" in units
    assert "300 input tokens" in tokens
    assert "1 search units" in both
    assert "7 input tokens" in both


def test_console_usage_not_reported() -> None:
    embedding, rerank = console_lines(
        make_embedding_event(usage=None), make_rerank_event(usage=None)
    )
    assert "usage not reported" in embedding
    assert "usage not reported" in rerank


def test_console_failures_show_category_and_status() -> None:
    embed_failed, rerank_failed, no_status = console_lines(
        make_embedding_failed_event(),
        make_rerank_failed_event(),
        make_rerank_failed_event(status_code=None, error_category="provider_invalid_response"),
    )
    assert "tei" in embed_failed
    assert "bge-small" in embed_failed
    assert "250.0 ms" in embed_failed
    assert "FAILED provider_unavailable" in embed_failed
    assert "503" in embed_failed
    assert "FAILED provider_rate_limit" in rerank_failed
    assert "429" in rerank_failed
    assert "voyage" in rerank_failed
    assert "FAILED provider_invalid_response" in no_status
    assert "HTTP" not in no_status


def test_console_never_prints_payload() -> None:
    lines = console_lines(*payload_events())
    assert len(lines) == 4
    assert all(SENTINEL not in line for line in lines)


def test_console_defaults_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    sink = ConsoleSink()
    sink.emit(make_embedding_event())
    sink.flush()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "openai" in captured.err


def test_console_sink_through_recorder() -> None:
    stream = io.StringIO()
    recorder = Recorder(sinks=[ConsoleSink(stream)])
    recorder.emit(make_embedding_event())
    recorder.emit(make_rerank_failed_event())
    recorder.flush()
    assert len(stream.getvalue().splitlines()) == 2
    assert recorder.stats["0:ConsoleSink"].delivered == 2
