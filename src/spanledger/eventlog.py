"""The JSONL event log format: one JSON object per line, each stamped with a schema version.

Writing goes through ``event_line``; reading through ``read_events``, which keeps every good
line and reports each bad one by line number (never by content: lines may hold payload).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
)

__all__ = [
    "SCHEMA_VERSION",
    "TRUNCATED",
    "EventLog",
    "LogProblem",
    "decode_line",
    "decode_object",
    "decode_written",
    "encode_event",
    "event_line",
    "iter_events",
    "iter_records",
    "read_events",
]

SCHEMA_VERSION = 1
_EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
_EVENT_FIELDS: dict[str, frozenset[str]] = {
    cls.model_fields["kind"].default: frozenset(cls.model_fields)
    for cls in (EmbeddingEvent, EmbeddingFailedEvent, RerankEvent, RerankFailedEvent)
}
_EVENT_KINDS = frozenset(_EVENT_FIELDS)
_RECORD_FIELDS = frozenset(AttributionRecord.model_fields)
_RECORD_ADAPTER: TypeAdapter[Event | AttributionRecord] = TypeAdapter(
    Annotated[
        EmbeddingEvent | EmbeddingFailedEvent | RerankEvent | RerankFailedEvent | AttributionRecord,
        Field(discriminator="kind"),
    ]
)
_WRITTEN_PREFIX = b'{"schema":%d,' % SCHEMA_VERSION
"""How every line the library writes begins."""


def encode_event(event: Event | AttributionRecord) -> str:
    """One log line (without the newline) for an event or an attribution record; payload
    fields are never written."""
    return event_line(event)[:-1].decode("utf-8")


def event_line(event: Event | AttributionRecord) -> bytes:
    """``encode_event`` as UTF-8 bytes, newline included: what the log sink writes.

    Never fails on content: a value JSON cannot hold as is is written in a form it can. A
    string that is not valid Unicode (a lone surrogate from a provider's ``id``, say) is
    escaped, a value of a type JSON has no form for is written as its type name (never its
    ``repr``, which can hold anything).
    """
    try:
        body = event.__pydantic_serializer__.to_json(event, fallback=_type_name)
    except PydanticSerializationError:
        data = event.model_dump(mode="json", fallback=_type_name)
        body = json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    return b'{"schema":%d,%s\n' % (SCHEMA_VERSION, body[1:])


def _type_name(value: object) -> str:
    return f"<{type(value).__name__}>"


@dataclass(frozen=True)
class LogProblem:
    """A line that could not be read, and why (never the line's content)."""

    line_number: int
    reason: str


@dataclass
class EventLog:
    """The events read from a log, in file order, and the lines that were skipped."""

    events: list[Event] = field(default_factory=list)
    attributions: list[AttributionRecord] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)
    truncated_tail: bool = False

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)


def read_events(path: str | PathLike[str]) -> EventLog:
    """Read an event log whole. A corrupt line is reported and skipped; the rest is kept.

    A last line without its newline is the mark of a writer that stopped mid-line (a crash):
    it is reported as truncated, and ``truncated_tail`` is set. For a log too large to hold,
    ``iter_events`` streams it; ``spanledger report`` reads many logs with bounded memory.
    """
    log = EventLog()
    for record in iter_records(path, log.problems.append):
        if isinstance(record, AttributionRecord):
            log.attributions.append(record)
        else:
            log.events.append(record)
    log.truncated_tail = any(problem.reason == TRUNCATED for problem in log.problems[-1:])
    return log


def iter_events(
    path: str | PathLike[str], on_problem: Callable[[LogProblem], None] | None = None
) -> Iterator[Event]:
    """The events of a log one at a time, in file order, holding one line in memory; each
    line that is not an event is handed to ``on_problem`` (attribution records are skipped:
    ``iter_records`` yields them too)."""
    for record in iter_records(path, on_problem):
        if not isinstance(record, AttributionRecord):
            yield record


def iter_records(
    path: str | PathLike[str], on_problem: Callable[[LogProblem], None] | None = None
) -> Iterator[Event | AttributionRecord]:
    """Events and attribution records, one at a time, as ``iter_events``."""
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            decoded = decode_line(line)
            if not isinstance(decoded, str):
                yield decoded
                continue
            if on_problem is not None:
                complete = line.endswith(b"\n")
                on_problem(LogProblem(number, decoded if complete else TRUNCATED))


TRUNCATED = "truncated last line (the writer stopped mid-line)"
"""Why a last line without its newline that is no record is skipped: a writer stopped (or is
still writing) mid-line."""


def decode_line(line: bytes) -> Event | AttributionRecord | str:
    """The line's event or record, or why it is neither: the one rule every reader of a log
    applies (``read_events``, the report, the export)."""
    try:
        data: Any = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "not valid JSON"
    if type(data) is not dict:
        return "not a JSON object"
    return decode_object(data)


def decode_written(line: bytes) -> Event | AttributionRecord | None:
    """The line's record when the line is in the form the writer gives it (schema first,
    every value of its JSON type, nothing undeclared), read in one strict pass; ``None``
    for any other line, which ``decode_line`` then judges. What this keeps, ``decode_line``
    keeps alike."""
    if not line.startswith(_WRITTEN_PREFIX):
        return None
    try:
        return _RECORD_ADAPTER.validate_json(b"{" + line[len(_WRITTEN_PREFIX) :], strict=True)
    except (ValidationError, ValueError, RecursionError):
        return None


def decode_object(data: dict[str, Any]) -> Event | AttributionRecord | str:
    """A decoded line's event or record, or why it is neither (``data`` is consumed).

    Keys that no field of the line's kind declares are ignored: a newer spanledger may add a
    field without a new schema version, and its calls still count. Every declared field is
    held to the models' rules."""
    schema = data.pop("schema", None)
    if type(schema) is not int:
        return "no schema version"
    if schema != SCHEMA_VERSION:
        return f"unsupported schema version {schema}"
    kind = data.get("kind")
    if kind == "attribution":
        try:
            return AttributionRecord.model_validate(_declared(data, _RECORD_FIELDS))
        except ValidationError:
            return "invalid attribution record"
    if type(kind) is not str or kind not in _EVENT_KINDS:
        return "unknown record kind"
    try:
        return _EVENT_ADAPTER.validate_python(_declared(data, _EVENT_FIELDS[kind]))
    except ValidationError as exc:
        return f"invalid {kind} event (fields: {', '.join(_field_names(kind, exc))})"
    except RecursionError:
        return f"invalid {kind} event (nested too deeply)"


def _declared(data: dict[str, Any], fields: frozenset[str]) -> dict[str, Any]:
    """``data`` without the keys its model does not declare."""
    if data.keys() <= fields:
        return data
    return {key: value for key, value in data.items() if key in fields}


def _field_names(kind: str, exc: ValidationError) -> list[str]:
    """The event fields that failed, by their declared names only: an unexpected key is
    reported as such, never spelled out (keys come from the line and may hold payload)."""
    known = _EVENT_FIELDS[kind]
    names = set()
    for error in exc.errors():
        location = [part for part in error["loc"] if part != kind]
        head = location[0] if location else None
        names.add(head if isinstance(head, str) and head in known else "unexpected field")
    return sorted(names)
