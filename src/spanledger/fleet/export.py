"""``spanledger export``: a fleet's event logs as Parquet, partitioned by day, for warehouses.

Two tables under the target directory, each a Hive-style ``day=YYYY-MM-DD`` partition tree:
``events/`` (one row per call: its figures, outcome and cost line, flattened) and
``attribution/`` (each request's attribution records: the share, the retrieval spend, the
context's spend as input tokens with its cited and unused parts, the evidence that cited
frames). Their columns and types are declared in ``spanledger.fleet.export_schema`` and every
value is cast to its declared type. Both tables are always written: a table with no rows on a
day the other has rows for (or, when the export found no rows at all, on one day) gets an
empty file with the full schema in that day's partition, so a scheduled load reads an empty
table rather than failing on a missing path. Only what the log holds is written, and the log
never holds inputs, queries or documents. Lines that are not events are skipped and counted,
as by ``spanledger report``. Memory stays within the report's bound (300 MB at peak) whatever
the logs' size and number of days: each day's file is written by a plain copy (``_write_days``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spanledger.errors import ConfigurationError
from spanledger.fleet.export_schema import PARTITION, TABLES
from spanledger.fleet.lines import ReadLogs, read_logs, reading_copy
from spanledger.fleet.progress import progress_step
from spanledger.fleet.scan import (
    REPEATED,
    connect,
    in_range,
    parameters,
    record_class,
    skipped,
    source,
    within_memory,
)

__all__ = ["Exported", "export_parquet"]

_USAGE = "STRUCT(input_tokens BIGINT, search_units BIGINT, billable_characters BIGINT)"
_EVENT_COLUMNS = {
    "schema": "BIGINT",
    "kind": "VARCHAR",
    "call_id": "VARCHAR",
    "request_id": "VARCHAR",
    "logical_call_id": "VARCHAR",
    "attempt": "BIGINT",
    "retried": "BOOLEAN",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "started_at": "VARCHAR",
    "at": "VARCHAR",
    "latency_ms": "DOUBLE",
    "server_address": "VARCHAR",
    "server_port": "BIGINT",
    "response_model": "VARCHAR",
    "response_id": "VARCHAR",
    "billing": "VARCHAR",
    "input_count": "BIGINT",
    "input_type": "VARCHAR",
    "dimensions": "BIGINT",
    "query_length": "BIGINT",
    "document_count": "BIGINT",
    "top_k": "BIGINT",
    "result_count": "BIGINT",
    "usage": _USAGE,
    "usage_source": "VARCHAR",
    "estimated_usage": _USAGE,
    "error_category": "VARCHAR",
    "error_type": "VARCHAR",
    "status_code": "BIGINT",
    "retry_after": "DOUBLE",
    "cost": "STRUCT(status VARCHAR, amount VARCHAR, currency VARCHAR, code VARCHAR, "
    "price_entry VARCHAR)",
    "frames_served": "BIGINT",
    "frames_rendered": "BIGINT",
    "frames_cited": "BIGINT",
    "rendered_tokens": "BIGINT",
    "cited_tokens": "BIGINT",
    "uncited_rendered_tokens": "BIGINT",
    "cited_token_share": "DOUBLE",
    "reconcilable": "BOOLEAN",
    "calls": "BIGINT",
    "billed_input_tokens": "BIGINT",
    "billed_search_units": "BIGINT",
    "billed_characters": "BIGINT",
    "calls_without_usage": "BIGINT",
    "spend": "VARCHAR",
    "currency": "VARCHAR",
    "spend_complete": "BOOLEAN",
    "spend_per_cited_token": "VARCHAR",
    "model_calls": "BIGINT",
    "quoted_tokens": "BIGINT",
    "cited_by": "MAP(VARCHAR, BIGINT)",
    "context_spend": "VARCHAR",
    "cited_context_spend": "VARCHAR",
    "unused_context_spend": "VARCHAR",
    "context_currency": "VARCHAR",
    "unknown_context_spend": "VARCHAR",
    "capture_cut": "MAP(VARCHAR, BIGINT)",
}
"""How each line of a log is read (the union of what events and attribution records hold)."""

_SOURCES: Mapping[str, Mapping[str, str]] = {
    "events": {
        "started_at": "ts",
        "input_tokens": "usage.input_tokens",
        "search_units": "usage.search_units",
        "billable_characters": "usage.billable_characters",
        "estimated_input_tokens": "estimated_usage.input_tokens",
        "estimated_search_units": "estimated_usage.search_units",
        "cost_status": "cost.status",
        "cost_amount": "cost.amount",
        "cost_currency": "cost.currency",
        "cost_code": "cost.code",
        "price_entry": "cost.price_entry",
    },
    "attribution": {"at": "ts"},
}
"""Where an exported column comes from in a read row, when not the read column of its name."""

_CLASS = {"events": "call", "attribution": "attribution"}
_REPEATED_CALL = "repeated call"
"""The count pass's name for the lines of a call id met more than once (``once`` keeps one)."""
"""The class of row (``scan.record_class``) each table holds."""

_PARQUET = "FORMAT PARQUET, ROW_GROUP_SIZE_BYTES '8MB'"
"""How every file is written: a row group is flushed once it holds 8 MB in memory (before
compression; some 15,000 to 18,000 calls), so what a writing thread buffers stays small
whatever the rows hold; DuckDB's default, 122,880 rows, is some 60 MB of calls per thread."""

_THREADS = 2
"""The most threads the export's queries run on: each reads and writes with buffers of its own
(some 50 MB) outside what DuckDB's memory limit bounds, so the peak would grow with the
machine's cores past the 300 MB the export keeps within."""

_SETTINGS = ("SET enable_progress_bar = true", "SET enable_progress_bar_print = false")
"""Settings of the export's connection, on top of ``scan.connect``'s: DuckDB tracks each
query's progress (``query_progress``, which the progress line shows) and prints none itself."""


@dataclass(frozen=True)
class Exported:
    """What an export wrote, and what it skipped."""

    events: int
    attribution_records: int
    days: int
    problems: dict[str, int]
    duplicates: int = 0
    """Lines that repeated a call already exported (same call id), left out."""


def export_parquet(
    files: Sequence[Path],
    target: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    memory_limit: str = "256MB",
) -> Exported:
    """Write ``files``' events and attribution records under ``target`` (which must be empty
    or new) as Parquet partitioned by day, every column cast to its declared type; amounts
    stay exact decimal strings. Both tables have a partition for every day either has rows
    on (an empty file where a table has none), so no reader meets a missing path."""
    import duckdb

    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigurationError(f"--parquet {str(target)!r}: export into a new or empty directory")
    target.mkdir(parents=True, exist_ok=True)
    keep = in_range(since, until)
    with reading_copy() as workdir, within_memory(memory_limit):
        progress_step("judging lines")
        read = read_logs(files, workdir)
        connection = connect(memory_limit)
        try:
            return _export(connection, read, target, keep, since, until)
        except duckdb.IOException as error:
            raise _io_failure(str(error), target) from None
        except OSError as error:  # a partition folder spanledger makes itself
            if error.filename is None or not str(error.filename).startswith(str(target)):
                raise
            cause = error.strerror or type(error).__name__
            raise ConfigurationError(
                f"--parquet {str(target)!r}: cannot write the export into this directory ({cause})"
            ) from None
        finally:
            progress_step("")
            connection.close()


def _export(
    connection: Any,
    read: ReadLogs,
    target: Path,
    keep: str,
    since: datetime | None,
    until: datetime | None,
) -> Exported:
    """The export of what the reader kept (``read.sources``) under ``target``."""
    for setting in _SETTINGS:
        connection.execute(setting)
    [[threads]] = connection.execute("SELECT current_setting('threads')").fetchall()
    connection.execute(f"SET threads = {min(int(threads), _THREADS)}")
    named = parameters(read.sources, since, until)
    connection.execute(REPEATED, {"files": named["files"]})
    classified = _classified(keep)
    progress_step("counting lines", connection.query_progress)
    [[repeats]] = connection.execute("SELECT count(*) FROM repeated").fetchall()
    if repeats:  # each repeated call id once: one of its lines, the same whatever the order
        connection.execute(
            f"""CREATE OR REPLACE TEMP TABLE once AS {classified}
            SELECT DISTINCT ON (call_id) {_select("events")}, day FROM classified
            WHERE class = 'call' AND repeat
            ORDER BY call_id, started_at, latency_ms, input_tokens, search_units, cost_amount""",
            named,
        )
    else:
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE once AS SELECT {_select('events', empty=True)}, "
            "NULL::VARCHAR AS day WHERE false"
        )
    found = connection.execute(  # a repeated id's lines apart: its one line is in ``once``
        f"""{classified} SELECT CASE WHEN class = 'call' AND repeat THEN '{_REPEATED_CALL}'
            ELSE class END AS counted_as, count(*), list(DISTINCT day) FROM classified
        GROUP BY counted_as
        UNION ALL SELECT 'call', count(*), list(DISTINCT day) FROM once""",
        named,
    ).fetchall()
    counts: dict[str, tuple[int, set[str]]] = {}
    for name, count, days in found:
        before, seen = counts.get(str(name), (0, set()))
        counts[str(name)] = (before + int(count), seen | set(days or ()))
    repeated_lines, _ = counts.pop(_REPEATED_CALL, (0, set()))
    written = {table: counts.get(_CLASS[table], (0, set())) for table in TABLES}
    covered = set().union(*(days for _, days in written.values())) or {_quiet_day(since)}
    for table, (rows, days) in written.items():
        if rows:
            _write_days(connection, table, classified, named, sorted(days), target)
        for day in sorted(covered - days):
            _write_empty(connection, table, target / table / f"{PARTITION[0]}={day}")
    events, event_days = counts.get("call", (0, set()))
    records, record_days = counts.get("attribution", (0, set()))
    classes = {name: count for name, (count, _) in counts.items()}
    problems = dict(read.problems)
    for reason, count in skipped(classes).items():
        problems[reason] = problems.get(reason, 0) + count
    [[kept_once]] = connection.execute("SELECT count(*) FROM once").fetchall()
    duplicates = repeated_lines - int(kept_once)
    return Exported(events, records, len(event_days | record_days), problems, duplicates)


def _write_days(
    connection: Any,
    table: str,
    classified: str,
    named: Mapping[str, object],
    days: Sequence[str],
    target: Path,
) -> None:
    """Write ``table``'s rows of the logs as one Parquet file per day (``days``) in its
    partitions under ``target``, by plain, unpartitioned writes, whose memory stays bounded.

    DuckDB's ``PARTITION_BY`` buffers rows per thread and per open partition in memory its
    limit cannot spill: an export of a few million calls on one day ran out of memory. One day
    is written straight from the logs. Several days are staged first in one Parquet file of
    every row with its day (the logs are read once, not once per day), in a hidden folder of
    ``target`` (removed after; a full disk is reported as the export's), then each day is
    copied out of it: a day's rows usually sit together (a log is written in time order), so
    the row groups' statistics let each read skip most of the file."""
    folder = target / table
    kept = f"FROM classified WHERE class = '{_CLASS[table]}'"
    once = ""
    if table == "events":  # a repeated call id's lines give way to its one line in ``once``
        kept += " AND NOT repeat"
        once = " UNION ALL SELECT * EXCLUDE (day) FROM once"
    if len(days) == 1:  # the day too: a line a live log gained since the count stays out
        progress_step(f"writing {table}", connection.query_progress)
        rows = f"{classified} SELECT {_select(table)} {kept} AND day = $day"
        rows += once.replace("FROM once", "FROM once WHERE day = $day")
        partition = folder / f"{PARTITION[0]}={days[0]}"
        _write_day(connection, rows, {**named, "day": days[0]}, partition)
        return
    with tempfile.TemporaryDirectory(prefix=".staging-", dir=target) as staging:
        staged = _literal(Path(staging) / f"{table}.parquet")
        progress_step(f"staging {table}", connection.query_progress)
        rows = f"{classified} SELECT {_select(table)}, day {kept}"
        rows += once.replace("EXCLUDE (day) ", "")
        connection.execute(f"COPY ({rows}) TO {staged} ({_PARQUET})", named)
        columns = ", ".join(_quoted(name) for name in TABLES[table])
        for number, day in enumerate(days, 1):
            progress_step(f"writing {table}, day {number} of {len(days)}")
            _write_day(
                connection,
                f"SELECT {columns} FROM read_parquet({staged}) WHERE day = $day",
                {"day": day},
                folder / f"{PARTITION[0]}={day}",
            )


def _write_day(connection: Any, rows: str, named: Mapping[str, object], partition: Path) -> None:
    """The query ``rows`` as one Parquet file in the partition folder ``partition``."""
    partition.mkdir(parents=True)
    written = _literal(partition / "data_0.parquet")
    connection.execute(f"COPY ({rows}) TO {written} ({_PARQUET})", named)


def _io_failure(message: str, target: Path) -> ConfigurationError:
    """DuckDB's I/O error as one sentence: the export directory (or the logs) and the cause
    (the system's words after the last colon, e.g. ``Permission denied``), never the rest."""
    said = message.rsplit(": ", 1)[-1].strip().splitlines() if ": " in message else []
    cause = said[0][:120] if said else "an I/O error"
    if str(target) in message:
        return ConfigurationError(
            f"--parquet {str(target)!r}: cannot write the export into this directory ({cause})"
        )
    return ConfigurationError(f"cannot read the event logs to export ({cause})")


def _select(table: str, *, empty: bool = False) -> str:
    """The select list of ``table``: each declared column, in order, cast to its declared type
    from its source in a read row (a typed ``NULL`` with ``empty``)."""
    columns = TABLES[table]
    sources = _SOURCES[table]
    unknown = sorted(set(sources) - set(columns))
    if unknown:
        raise ValueError(f"{table}: sources for undeclared columns {unknown}")
    cast = "CAST({} AS {}) AS {}"
    return ", ".join(
        cast.format("NULL" if empty else sources.get(name, _quoted(name)), kind, _quoted(name))
        for name, kind in columns.items()
    )


def _write_empty(connection: Any, table: str, folder: Path) -> None:
    """One Parquet file of ``table``'s full schema and no rows, in the partition ``folder``."""
    folder.mkdir(parents=True)
    connection.execute(
        f"COPY (SELECT {_select(table, empty=True)} WHERE false) "
        f"TO {_literal(folder / 'data_0.parquet')} (FORMAT PARQUET)"
    )


def _quiet_day(since: datetime | None) -> str:
    """The day an export that found no rows at all writes its empty tables under: the day of
    ``since`` (what a windowed, scheduled export asked for), else today (UTC)."""
    moment = datetime.now(UTC) if since is None else since
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def _quoted(name: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(path: Path) -> str:
    """A path as a SQL string literal (``COPY ... TO`` takes no parameter)."""
    return "'" + str(path).replace("'", "''") + "'"


def _classified(keep: str) -> str:
    """A ``WITH`` naming the log's rows ``classified``, each with its class and day."""
    return f"""WITH rows AS (
            SELECT *,
                CASE WHEN kind = 'attribution' THEN try_cast("at" AS TIMESTAMPTZ)
                    ELSE try_cast(started_at AS TIMESTAMPTZ) END AS ts
            FROM {source(_EVENT_COLUMNS)}
        ), classified AS (
            SELECT rows.*, {record_class(keep)} AS class, strftime(ts, '%Y-%m-%d') AS day,
                repeated.call_id IS NOT NULL AS repeat
            FROM rows LEFT JOIN repeated ON rows.call_id = repeated.call_id
        )"""
