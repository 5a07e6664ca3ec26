"""The JSONL event log format: encoding, reading back, and reporting bad lines."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    EventLog,
    Fingerprint,
    LogProblem,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
    ScoredDocument,
    read_events,
)
from spanledger.attribution import Evidence
from spanledger.cli import main
from spanledger.costs import CostLine, CostStatus
from spanledger.eventlog import SCHEMA_VERSION, encode_event
from spanledger.events import AttributionRecord, Event

SENTINEL = "SENTINEL-7f3a"
STARTED_AT = datetime(2025, 4, 5, 6, 7, 8, 123456, tzinfo=UTC)


def make_embedding_event(**overrides: Any) -> EmbeddingEvent:
    fields: dict[str, Any] = {
        "call_id": "emb-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
        "latency_ms": 10.0,
        "input_count": 2,
        "usage": EmbeddingUsage(input_tokens=9),
        "dimensions": 8,
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def make_embedding_failed_event(**overrides: Any) -> EmbeddingFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "emb-2",
        "provider": "tei",
        "model": "bge",
        "started_at": STARTED_AT,
        "latency_ms": 1.0,
        "input_count": 1,
        "error_category": ErrorCategory.UNAVAILABLE,
        "status_code": 502,
        "fingerprint": Fingerprint.of(b"<html>bad gateway</html>"),
    }
    fields.update(overrides)
    return EmbeddingFailedEvent(**fields)


def make_rerank_event(**overrides: Any) -> RerankEvent:
    fields: dict[str, Any] = {
        "call_id": "rr-1",
        "request_id": "turn-7",
        "provider": "jina",
        "model": "jina-reranker-v2",
        "started_at": STARTED_AT,
        "latency_ms": 33.3,
        "query_length": 12,
        "document_count": 4,
        "top_k": 2,
        "result_count": 2,
        "usage": RerankUsage(input_tokens=120),
        "request_params": {"return_documents": False},
    }
    fields.update(overrides)
    return RerankEvent(**fields)


def make_rerank_failed_event(**overrides: Any) -> RerankFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "rr-2",
        "provider": "cohere",
        "model": "rerank-v3.5",
        "started_at": STARTED_AT,
        "latency_ms": 2.0,
        "query_length": 3,
        "document_count": 1,
        "error_category": ErrorCategory.AUTHENTICATION,
        "status_code": 401,
    }
    fields.update(overrides)
    return RerankFailedEvent(**fields)


def all_kinds() -> list[Event]:
    return [
        make_embedding_event(),
        make_embedding_failed_event(),
        make_rerank_event(),
        make_rerank_failed_event(),
    ]


def write_lines(path: Path, lines: list[str], *, final_newline: bool = True) -> None:
    text = "\n".join(lines) + ("\n" if final_newline else "")
    path.write_bytes(text.encode())


def dumps(events: Iterable[BaseModel]) -> list[dict[str, Any]]:
    return [e.model_dump() for e in events]


def valid_line(**overrides: Any) -> str:
    return encode_event(make_embedding_event(**overrides))


def assert_reasons_clean(problems: list[LogProblem]) -> None:
    for problem in problems:
        assert SENTINEL not in problem.reason
        assert SENTINEL not in repr(problem)


# --- encoding ---------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(4))
def test_encode_event_is_one_json_object_with_schema(index: int) -> None:
    event = all_kinds()[index]
    line = encode_event(event)
    assert "\n" not in line
    data = json.loads(line)
    assert isinstance(data, dict)
    assert data["schema"] == SCHEMA_VERSION == 1
    assert next(iter(data)) == "schema"
    assert data["kind"] == event.kind
    del data["schema"]
    assert data == json.loads(event.model_dump_json())


def test_encode_event_never_writes_payload() -> None:
    events: list[Event] = [
        make_embedding_event(inputs=[SENTINEL], request_extras={"k": SENTINEL}),
        make_rerank_event(
            query=SENTINEL,
            documents=[SENTINEL],
            results=[ScoredDocument(index=0, relevance_score=1.0, document=SENTINEL)],
        ),
        make_rerank_failed_event(query=SENTINEL, request_extras={SENTINEL: 1}),
    ]
    for event in events:
        line = encode_event(event)
        assert SENTINEL not in line
        assert not {"inputs", "query", "documents", "results", "request_extras"} & set(
            json.loads(line)
        )


# --- reading back -----------------------------------------------------------------------


def test_read_events_round_trips_every_kind(tmp_path: Path) -> None:
    events = all_kinds() * 3
    path = tmp_path / "events.jsonl"
    write_lines(path, [encode_event(e) for e in events])
    log = read_events(path)
    assert log.problems == []
    assert log.truncated_tail is False
    assert len(log) == len(events)
    assert [type(e) for e in log] == [type(e) for e in events]
    assert dumps(log) == dumps(events)
    assert log.events == events


def test_read_events_accepts_str_path_and_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    log = read_events(str(path))
    assert (log.events, log.problems, log.truncated_tail) == ([], [], False)


def test_read_events_skips_blank_lines_but_counts_them(tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    write_lines(path, [valid_line(call_id="a"), "", "   ", "{not json", valid_line(call_id="b")])
    log = read_events(path)
    assert [e.call_id for e in log] == ["a", "b"]
    assert [p.line_number for p in log.problems] == [4]


def test_truncated_last_line_is_reported_and_rest_kept(tmp_path: Path) -> None:
    events = [make_embedding_event(call_id=f"c{i}", model=f"model-{SENTINEL}") for i in range(3)]
    path = tmp_path / "crash.jsonl"
    write_lines(path, [encode_event(e) for e in events])
    data = path.read_bytes()
    body = data[:-1]  # drop the final newline
    last_start = body.rfind(b"\n") + 1
    path.write_bytes(body[: last_start + (len(body) - last_start) // 2])

    log = read_events(path)
    assert dumps(log) == dumps(events[:2])
    assert log.truncated_tail is True
    assert len(log.problems) == 1
    assert log.problems[0].line_number == 3
    assert_reasons_clean(log.problems)


def test_corrupt_middle_lines_are_reported_and_rest_kept(tmp_path: Path) -> None:
    bad_field = json.loads(valid_line(call_id="bad"))
    bad_field["latency_ms"] = f"slow {SENTINEL}"
    lines = [
        valid_line(call_id="a"),
        f"{{not json {SENTINEL}",
        valid_line(call_id="b"),
        json.dumps(bad_field),
        valid_line(call_id="c"),
        f'["{SENTINEL}"]',
        valid_line(call_id="d"),
    ]
    path = tmp_path / "corrupt.jsonl"
    write_lines(path, lines)
    log = read_events(path)
    assert [e.call_id for e in log] == ["a", "b", "c", "d"]
    assert [p.line_number for p in log.problems] == [2, 4, 6]
    assert log.truncated_tail is False
    assert "latency_ms" in log.problems[1].reason
    assert_reasons_clean(log.problems)


@pytest.mark.parametrize(
    ("mutate", "expect"),
    [
        (lambda d: d.update(schema=2), "schema"),
        (lambda d: d.update(schema=999), "schema"),
        (lambda d: d.update(schema=SENTINEL), "schema"),
        (lambda d: d.pop("schema"), "schema"),
        (lambda d: d.update(kind="completion"), "kind"),
        (lambda d: d.update(kind=SENTINEL), "kind"),
        (lambda d: d.pop("kind"), "kind"),
    ],
    ids=[
        "schema-2",
        "schema-999",
        "schema-string",
        "no-schema",
        "unknown-kind",
        "sentinel-kind",
        "no-kind",
    ],
)
def test_unknown_schema_or_kind_is_reported(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], object], expect: str
) -> None:
    record = json.loads(valid_line(call_id="odd"))
    mutate(record)
    path = tmp_path / "odd.jsonl"
    write_lines(path, [valid_line(call_id="a"), json.dumps(record), valid_line(call_id="b")])
    log = read_events(path)
    assert [e.call_id for e in log] == ["a", "b"]
    assert len(log.problems) == 1
    assert log.problems[0].line_number == 2
    assert expect in log.problems[0].reason
    assert_reasons_clean(log.problems)


def test_schema_true_is_not_schema_version_1(tmp_path: Path) -> None:
    # JSON `true` is not the integer 1 (the same rule as figures): the line is unsupported.
    record = json.loads(valid_line(call_id="bool-schema"))
    record["schema"] = True
    path = tmp_path / "bool.jsonl"
    write_lines(path, [json.dumps(record)])
    log = read_events(path)
    assert log.events == []
    assert [p.line_number for p in log.problems] == [1]


@pytest.mark.parametrize(
    "line",
    [
        '{"schema": 1, "kind": ["SENTINEL-7f3a"]}',
        '{"schema": 1, "kind": {"SENTINEL-7f3a": 1}}',
        "[" * 100_000,
    ],
    ids=["list-kind", "object-kind", "deeply-nested"],
)
def test_any_corrupt_line_is_reported_never_raised(tmp_path: Path, line: str) -> None:
    path = tmp_path / "hostile.jsonl"
    write_lines(path, [valid_line(call_id="a"), line, valid_line(call_id="b")])
    log = read_events(path)  # must not raise
    assert [e.call_id for e in log] == ["a", "b"]
    assert [p.line_number for p in log.problems] == [2]
    assert_reasons_clean(log.problems)


def test_problem_reason_does_not_echo_unexpected_keys(tmp_path: Path) -> None:
    record = json.loads(valid_line(call_id="extra"))
    record[f"note {SENTINEL}"] = "x"
    record["usage"] = {"input_tokens": 1, SENTINEL: 2}
    path = tmp_path / "extra.jsonl"
    write_lines(path, [json.dumps(record)])
    log = read_events(path)
    assert log.events == []
    assert [p.line_number for p in log.problems] == [1]
    assert_reasons_clean(log.problems)


def test_invalid_utf8_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "binary.jsonl"
    path.write_bytes(
        valid_line(call_id="a").encode()
        + b"\n\xff\xfe\x00garbage\n"
        + valid_line().encode()
        + b"\n"
    )
    log = read_events(path)
    assert [e.call_id for e in log] == ["a", "emb-1"]
    assert [p.line_number for p in log.problems] == [2]


def test_event_log_is_iterable_and_sized() -> None:
    events = all_kinds()
    log = EventLog(events=list(events))
    assert len(log) == 4
    assert list(log) == events
    assert isinstance(log.events[0], BaseModel)


# --- attribution records: the context figures are optional, so older lines still read -----

OLD_RECORD = {
    "schema": 1,
    "kind": "attribution",
    "request_id": "turn-old",
    "at": "2026-06-01T12:00:00Z",
    "frames_served": 3,
    "frames_rendered": 2,
    "frames_cited": 1,
    "rendered_tokens": 40,
    "cited_tokens": 25,
    "uncited_rendered_tokens": 15,
    "cited_token_share": 0.625,
    "reconcilable": True,
    "problems": [],
    "calls": 1,
    "billed_input_tokens": 9,
    "billed_search_units": 0,
    "calls_without_usage": 0,
    "spend": "0.00000108",
    "currency": "USD",
    "spend_complete": True,
    "unknown_spend": None,
    "spend_per_cited_token": "4.32E-8",
}
"""An attribution line as spanledger wrote it before the context figures were recorded."""


def test_an_attribution_line_from_before_the_context_figures_reads_as_not_recorded(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.jsonl"
    write_lines(path, [json.dumps(OLD_RECORD)])
    log = read_events(path)
    assert log.problems == []
    [record] = log.attributions
    assert (record.model_calls, record.quoted_tokens) == (None, None)
    assert (record.cited_by, record.capture_cut) == ({}, {})
    assert record.context_spend is None
    assert record.unknown_context_spend is None  # not recorded: no reason, no amount
    written = json.loads(encode_event(record))
    assert written == {**OLD_RECORD, "spend_per_cited_token": "0.0000000432"}  # plain decimals


def test_an_old_attribution_line_reports_its_context_spend_as_not_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.jsonl"
    write_lines(path, [json.dumps(OLD_RECORD), valid_line(request_id="turn-old")])

    def report(*options: str) -> str:
        capsys.readouterr()
        assert main(["report", str(path), "--by", "request", *options]) == 0
        return capsys.readouterr().out

    attribution = json.loads(report("--json"))["attribution"]
    assert attribution["known_context_spend"] == {}
    assert attribution["requests_with_unknown_context_spend"] == 1
    [each] = attribution["by_request"]
    assert each["cited_token_share"] == OLD_RECORD["cited_token_share"]
    assert each["context_spend"] is None
    assert each["unknown_context_spend"] == "not recorded"
    [row] = csv.DictReader(io.StringIO(report("--csv")))
    assert row["request_context_spend"] == ""
    assert row["request_unknown_context_spend"] == "not recorded"
    text = report()
    assert "  context spend: unknown for 1 request\n" in text
    assert (
        "    turn-old: cited token share 62.5% (25 of 40 rendered tokens); "
        "context spend unknown (not recorded)\n"
    ) in text


_AMOUNTS = st.none() | st.decimals(
    min_value=0, max_value=10**6, places=18, allow_nan=False, allow_infinity=False
)
_COUNTS = st.integers(min_value=0, max_value=2**63 - 1)


@given(
    model_calls=st.none() | _COUNTS,
    quoted_tokens=st.none() | _COUNTS,
    cited_by=st.dictionaries(st.sampled_from([e.value for e in Evidence]), _COUNTS),
    amounts=st.tuples(_AMOUNTS, _AMOUNTS, _AMOUNTS),
    currency=st.none() | st.sampled_from(["USD", "EUR"]),
    unknown=st.none() | st.text(max_size=80),
    cut=st.dictionaries(
        st.sampled_from(["frames", "prompt_chars", "answer_chars", "calls"]), _COUNTS
    ),
)
@settings(max_examples=60, deadline=None)
def test_the_context_figures_round_trip_and_what_is_unset_is_not_written(
    model_calls: int | None,
    quoted_tokens: int | None,
    cited_by: dict[str, int],
    amounts: tuple[Decimal | None, Decimal | None, Decimal | None],
    currency: str | None,
    unknown: str | None,
    cut: dict[str, int],
) -> None:
    fields = {key: value for key, value in OLD_RECORD.items() if key != "schema"}
    record = AttributionRecord.model_validate(
        {
            **fields,
            "model_calls": model_calls,
            "quoted_tokens": quoted_tokens,
            "cited_by": cited_by,
            "context_spend": amounts[0],
            "cited_context_spend": amounts[1],
            "unused_context_spend": amounts[2],
            "context_currency": currency,
            "unknown_context_spend": unknown,
            "capture_cut": cut,
        }
    )
    line = encode_event(record)
    written = json.loads(line)
    for name in ("model_calls", "quoted_tokens", "context_spend", "unknown_context_spend"):
        assert (name in written) == (getattr(record, name) is not None), name
    for name in ("cited_by", "capture_cut"):
        assert (name in written) == bool(getattr(record, name)), name
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        write_lines(path, [line])
        [read] = read_events(path).attributions
    assert read == record


def test_a_negative_context_amount_is_an_invalid_record(tmp_path: Path) -> None:
    path = tmp_path / "negative.jsonl"
    write_lines(path, [json.dumps({**OLD_RECORD, "unused_context_spend": "-0.1"})])
    log = read_events(path)
    assert log.attributions == []
    assert [p.reason for p in log.problems] == ["invalid attribution record"]


def test_amounts_are_written_as_plain_decimals_wherever_they_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small amount is ``0.00000012`` in the log, the report's JSON and CSV, never
    ``1.2E-7``; read back, it is the same ``Decimal``."""
    amount = Decimal("1.2E-7")
    event = EmbeddingEvent(
        call_id="c1", provider="cohere", model="embed-v4.0", started_at=STARTED_AT,
        latency_ms=1.0, input_count=1,
        usage=EmbeddingUsage(input_tokens=1),
        cost=CostLine(CostStatus.PRICED, amount, "USD", dimensions={"input_tokens": amount}),
    )  # fmt: skip
    fields = {key: value for key, value in OLD_RECORD.items() if key != "schema"}
    record = AttributionRecord.model_validate({**fields, "spend": amount})
    path = tmp_path / "events.jsonl"
    write_lines(path, [encode_event(event), encode_event(record)])
    text = path.read_text()
    assert "E-" not in text
    assert '"amount":"0.00000012"' in text
    assert '"spend":"0.00000012"' in text
    log = read_events(path)
    assert log.events[0].cost is not None
    assert log.events[0].cost.amount == amount
    assert log.attributions[0].spend == amount
    for options in (["--json"], ["--csv"], ["--csv", "--by", "request"], []):
        capsys.readouterr()
        assert main(["report", str(path), *options]) == 0
        out = capsys.readouterr().out
        assert "E-" not in out, options
        assert "0.00000012" in out, options
