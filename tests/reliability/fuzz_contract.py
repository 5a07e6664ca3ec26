"""The wire contract the fuzz asserts, and the tally of calls and violations it keeps.

For one call: a valid result or ``ProviderError`` (nothing else escapes); exactly one event,
a success iff the call returned, a failure's category equal to the raised one; the event
readable from the JSONL log (same ``call_id``, no problems); no sentinel (body, input, API key)
in the error's ``str``, ``repr`` or whole-chain traceback, in the event's JSON or in the log.

Each test collects every violation of every example instead of stopping at the first, so a
failing run reports each class of violation with its count and its smallest repro.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingResponse,
    Event,
    JsonlSink,
    ProviderError,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
    RerankResponse,
)
from tests.reliability.fuzz_bodies import API_KEY, BODY_SENTINEL, INPUT_SENTINEL, INT64_MAX

SENTINELS = {"body": BODY_SENTINEL, "input": INPUT_SENTINEL, "api-key": API_KEY}

# --------------------------------------------------------------------------- budget


def examples(default: int) -> int:
    """``SPANLEDGER_FUZZ_EXAMPLES`` when set (the long run), else this test's fixed budget."""
    configured = os.environ.get("SPANLEDGER_FUZZ_EXAMPLES", "").strip()
    if configured:
        value = int(configured)
        if value <= 0:
            raise ValueError("SPANLEDGER_FUZZ_EXAMPLES must be a positive integer")
        return value
    return default


# --------------------------------------------------------------------------- tally


@dataclass
class Finding:
    repro: str
    weight: int


@dataclass
class Tally:
    """Calls made and violations seen by one test, with the smallest repro of each kind."""

    name: str
    calls: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    smallest: dict[str, Finding] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        TALLIES.append(self)

    def add(self, kinds: Iterable[str], repro: Callable[[], str], weight: int) -> None:
        self.calls += 1
        text: str | None = None
        for kind in dict.fromkeys(kinds):
            self.counts[kind] += 1
            best = self.smallest.get(kind)
            if best is None or weight < best.weight:
                text = text if text is not None else repro()
                self.smallest[kind] = Finding(text, weight)

    @property
    def violations(self) -> int:
        return sum(self.counts.values())

    def report(self) -> str:
        lines = [f"{self.name}: {self.calls} calls, {self.violations} violations"]
        for kind, count in self.counts.most_common():
            lines.append(f"  [{count}x] {kind}")
            lines.append(f"      smallest repro: {self.smallest[kind].repro}")
        for note, count in self.notes.most_common():
            lines.append(f"  (note, {count}x) {note}")
        seen = ", ".join(f"{what} {count}" for what, count in self.outcomes.most_common())
        lines.append(f"  outcomes: {seen}")
        return "\n".join(lines)

    def assert_clean(self) -> None:
        assert not self.counts, "wire contract violated\n" + self.report()


TALLIES: list[Tally] = []
"""Every tally of this session, for the terminal summary."""


# --------------------------------------------------------------------------- one call's log


class Capture:
    """A call's recorder: a list sink and a JSONL sink on a fresh file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[Event] = []
        self.recorder = Recorder([self.events.append, JsonlSink(path)])

    def finish(self) -> tuple[spanledger.EventLog | None, bytes, list[str]]:
        """Flush, read the log back, release the sink; findings about reading it."""
        kinds: list[str] = []
        log: spanledger.EventLog | None = None
        try:
            self.recorder.flush()
            log = spanledger.read_events(self.path)
        except Exception as exc:
            kinds.append(f"log: flushing or reading the log raised {type(exc).__name__}")
        data = self.path.read_bytes() if self.path.exists() else b""
        try:
            self.recorder.shutdown()
        except Exception as exc:
            kinds.append(f"log: recorder.shutdown() raised {type(exc).__name__}")
        self.path.unlink(missing_ok=True)
        return log, data, kinds


# --------------------------------------------------------------------------- checks


def leaks(surface: str, text: str) -> list[str]:
    return [f"leak: {name} sentinel in {surface}" for name, s in SENTINELS.items() if s in text]


def error_leaks(exc: BaseException) -> list[str]:
    found = leaks("str(exc)", _safe(str, exc)) + leaks("repr(exc)", _safe(repr, exc))
    chain = _safe(lambda e: "".join(traceback.format_exception(e)), exc)
    found += leaks("traceback.format_exception (whole chain)", chain)
    return found


def _safe(render: Callable[[BaseException], str], exc: BaseException) -> str:
    try:
        return render(exc)
    except Exception as failure:
        return f"<rendering raised {type(failure).__name__}>"


def event_json(event: Event, tally: Tally) -> str:
    """The event's JSON; when ``model_dump_json`` cannot encode it (a lone surrogate), the
    same fields through ``json.dumps`` so the leak check still runs (noted, not a violation)."""
    try:
        return event.model_dump_json()
    except Exception as exc:
        tally.notes[f"event.model_dump_json() raised {type(exc).__name__}"] += 1
        return json.dumps(event.model_dump(), default=str)


def log_findings(
    event: Event | None, log: spanledger.EventLog | None, data: bytes, expected: int
) -> list[str]:
    kinds: list[str] = []
    found = leaks("the JSONL log", data.decode("utf-8", "replace"))
    kinds += found
    if log is None:
        return kinds
    if log.problems:
        reasons = sorted({problem.reason for problem in log.problems})
        kinds.append(f"log: read_events reports problems ({'; '.join(reasons)})")
    if event is not None:
        same = [e for e in log.events if e.call_id == event.call_id]
        if len(same) != 1:
            kinds.append(f"log: {len(same)} events with the call's call_id in the JSONL log")
    if len(log.events) != expected:
        kinds.append(f"log: {len(log.events)} events in the JSONL log for {expected} recorded")
    return kinds


def event_findings(
    operation: str, returned: bool, raised: BaseException | None, events: list[Event]
) -> list[str]:
    """One event; success iff returned; category as raised; kind matches the operation."""
    if len(events) != 1:
        return [f"events: {len(events)} events for one call"]
    [event] = events
    success_type, failure_type = (
        (EmbeddingEvent, EmbeddingFailedEvent)
        if operation == "embeddings"
        else (RerankEvent, RerankFailedEvent)
    )
    if returned:
        if not isinstance(event, success_type):
            return [f"events: call returned but the event is {type(event).__name__}"]
        return []
    if not isinstance(event, failure_type):
        return [f"events: call raised but the event is {type(event).__name__}"]
    if isinstance(raised, ProviderError) and event.error_category != raised.category:
        return [
            f"events: event category {event.error_category.value} != raised {raised.category.value}"
        ]
    return []


def event_usage_findings(event: Event) -> list[str]:
    """(5) An event never carries a usage figure above 2**63 - 1 (it would reach a metric)."""
    usage = getattr(event, "usage", None)
    figures = [getattr(usage, name, None) for name in ("input_tokens", "search_units")]
    if any(type(figure) is int and figure > INT64_MAX for figure in figures):
        return ["usage: an event carries a usage figure above 2**63-1"]
    return []


def _finite(value: object) -> bool:
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is int:
        try:
            return math.isfinite(float(value))
        except OverflowError:
            return False
    return False


def embedding_result_findings(result: object, input_count: int) -> list[str]:
    if not isinstance(result, EmbeddingResponse):
        return [f"result: embed returned {type(result).__name__}"]
    kinds: list[str] = []
    if len(result.vectors) != input_count:
        kinds.append("result: vector count differs from the input count")
    if any(len(vector) != result.dimensions for vector in result.vectors):
        kinds.append("result: a vector's length differs from dimensions")
    if not all(_finite(value) for vector in result.vectors for value in vector):
        kinds.append("corruption accepted: a returned vector holds a non-finite value")
    tokens = result.usage.input_tokens if result.usage is not None else None
    if tokens is not None and tokens > INT64_MAX:
        kinds.append("usage: a returned input_tokens figure is above 2**63-1")
    return kinds


def rerank_result_findings(result: object, document_count: int, top_k: int | None) -> list[str]:
    if not isinstance(result, RerankResponse):
        return [f"result: rerank returned {type(result).__name__}"]
    kinds: list[str] = []
    indices = [r.index for r in result.results]
    if not all(0 <= i < document_count for i in indices) or len(set(indices)) != len(indices):
        kinds.append("result: an index is out of range or repeated")
    if top_k is not None and len(indices) > top_k:
        kinds.append("result: more results than top_k")
    if not all(_finite(r.relevance_score) for r in result.results):
        kinds.append("corruption accepted: a returned score is non-finite")
    usage = result.usage
    if usage is not None and any(
        figure is not None and figure > INT64_MAX
        for figure in (usage.search_units, usage.input_tokens)
    ):
        kinds.append("usage: a returned rerank figure is above 2**63-1")
    return kinds


@dataclass
class CallRun:
    """What one provider call did."""

    result: Any
    raised: BaseException | None
    events: list[Event]
    log: spanledger.EventLog | None
    log_bytes: bytes
    log_kinds: list[str]


def outcome_label(run: CallRun) -> str:
    """How a provider call ended, for the coverage counts."""
    if run.raised is None:
        return "returned"
    if isinstance(run.raised, ProviderError):
        return f"raised {run.raised.category.value}"
    return f"escaped {type(run.raised).__name__}"


def contract_findings(
    run: CallRun,
    operation: str,
    tally: Tally,
    *,
    input_count: int,
    top_k: int | None = None,
) -> list[str]:
    """Every violation of the provider contract in one call."""
    tally.outcomes[outcome_label(run)] += 1
    kinds: list[str] = []
    raised = run.raised
    returned = raised is None
    if raised is not None:
        if not isinstance(raised, ProviderError):
            kinds.append(f"escaped: {type(raised).__name__} instead of ProviderError")
        kinds += error_leaks(raised)
    elif operation == "embeddings":
        kinds += embedding_result_findings(run.result, input_count)
    else:
        kinds += rerank_result_findings(run.result, input_count, top_k)
    kinds += event_findings(operation, returned, raised, run.events)
    for event in run.events:
        kinds += leaks("the event's model_dump_json()", event_json(event, tally))
        kinds += event_usage_findings(event)
    only = run.events[0] if len(run.events) == 1 else None
    kinds += run.log_kinds
    kinds += log_findings(only, run.log, run.log_bytes, len(run.events))
    return kinds
