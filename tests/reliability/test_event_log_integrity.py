"""No event is lost by the log sink's own doing: strings JSON rejects are escaped, values JSON
has no form for are named by type, and a log torn by a crash still takes new events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from spanledger import EmbeddingEvent, JsonlSink, ProviderError, Recorder, read_events
from spanledger.eventlog import encode_event, event_line
from spanledger.providers import OpenAIEmbeddings

SENTINEL = "SENTINEL-object-repr-77ab"


class Opaque:
    def __repr__(self) -> str:
        return SENTINEL

    __str__ = __repr__


def event(**overrides: object) -> EmbeddingEvent:
    fields: dict[str, object] = {
        "call_id": "c-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": datetime(2026, 1, 2, tzinfo=UTC),
        "latency_ms": 1.5,
        "input_count": 1,
    }
    fields.update(overrides)
    return EmbeddingEvent.model_validate(fields)


def test_a_provider_id_that_is_a_lone_surrogate_is_not_reported_and_the_event_is_logged(
    tmp_path: Path,
) -> None:
    body = b'{"object":"list","id":"\\ud800","model":"\\udfff","data":[{"index":0,'
    body += b'"embedding":[0.5]}],"usage":{"prompt_tokens":1}}'
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    answer = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    embedder = OpenAIEmbeddings(
        "m", api_key="k", http_client=httpx.Client(transport=answer), recorder=recorder
    )
    response = embedder.embed(["a"])
    recorder.shutdown()

    assert response.response_id is None  # no UTF-8 form: not a figure any surface could carry
    assert response.raw["id"] == "\ud800"
    assert recorder.stats["0:JsonlSink"].failed == 0
    (logged,) = read_events(path).events
    assert isinstance(logged, EmbeddingEvent)
    assert logged.response_id is None
    assert logged.response_model is None
    logged.model_dump_json()  # every other surface can serialize it too


def test_a_caller_model_name_that_is_not_unicode_is_logged_escaped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    answer = httpx.MockTransport(lambda request: httpx.Response(200))
    embedder = OpenAIEmbeddings(
        "m\ud800", api_key="k", http_client=httpx.Client(transport=answer), recorder=recorder
    )
    with pytest.raises(ProviderError):
        embedder.embed(["a"])  # the body cannot be encoded: refused before sending
    recorder.shutdown()

    assert recorder.stats["0:JsonlSink"].failed == 0
    (logged,) = read_events(path).events
    assert logged.model == "m\ud800"


def test_escaped_lines_are_plain_ascii_json_and_read_back_equal() -> None:
    original = event(model="m\udfff\u00e9", response_id="\ud800x")
    line = event_line(original)
    assert line.endswith(b"\n")
    assert line.isascii()
    assert json.loads(line)["model"] == "m\udfff\u00e9"
    assert encode_event(original) == line[:-1].decode()


def test_a_value_json_cannot_hold_is_written_as_its_type_name_only(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    sink.emit(event(request_params={"dimensions": 8, "mode": Opaque(), "tags": {1, 2}}))
    sink.shutdown()

    text = path.read_text()
    assert SENTINEL not in text
    (logged,) = read_events(path).events
    assert logged.request_params == {"dimensions": 8, "mode": "<Opaque>", "tags": [1, 2]}


def test_reopening_a_log_torn_mid_line_starts_the_next_event_on_a_fresh_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    whole = encode_event(event(call_id="before"))
    path.write_text(whole + "\n" + whole[: len(whole) // 2])  # a crash mid-write

    sink = JsonlSink(path)
    sink.emit(event(call_id="after"))
    sink.shutdown()

    log = read_events(path)
    assert [e.call_id for e in log.events] == ["before", "after"]
    assert [problem.line_number for problem in log.problems] == [2]
    assert not log.truncated_tail


def test_reopening_a_whole_log_adds_no_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    for call_id in ("one", "two"):
        sink = JsonlSink(path)
        sink.emit(event(call_id=call_id))
        sink.shutdown()
    assert path.read_text().count("\n") == 2
    assert [e.call_id for e in read_events(path).events] == ["one", "two"]


def test_every_line_is_on_disk_as_soon_as_its_event_is_emitted(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    sink.emit(event(call_id="now"))
    assert [e.call_id for e in read_events(path).events] == ["now"]  # no flush, no shutdown
    sink.shutdown()


def test_a_failed_write_is_counted_by_the_recorder(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "events.jsonl")
    recorder = Recorder([sink])
    sink.shutdown()  # closed under the recorder: every later event fails in the sink
    recorder.emit(event())
    assert recorder.stats["0:JsonlSink"].failed == 1
