"""One scan of many event logs: the calls grouped for pricing, each call id once, the lines
skipped counted by reason, and each request's latest attribution record, aggregated.

Every line is first judged by the library's own decoder (``fleet.lines``): DuckDB then reads
only records the library keeps, as the library writes them, and streams them through one
group-by, so memory grows with the number of groups (and of attribution records), never with
the number of calls. Lines are never quoted back: they may hold payload.
"""

from __future__ import annotations

import errno
import glob
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from spanledger.attribution.summary import AttributionFigures, ContextFigures
from spanledger.fleet.lines import Span, read_spans, reading_copy
from spanledger.fleet.report_cache import (
    CacheEntry,
    Planned,
    ReportCache,
    cache_root,
    too_many_parts,
)
from spanledger.fleet.scan_memo import (
    ScanOptions,
    prune_results,
    recall,
    remember,
    unchanged_entries,
)
from spanledger.ledger.pricing import RULE_BILLING

__all__ = [
    "REPEATED",
    "UNREADABLE",
    "AttributionFigures",
    "CallGroup",
    "Scan",
    "connect",
    "in_range",
    "parameters",
    "record_class",
    "scan_logs",
    "skipped",
    "source",
    "spill_directory",
    "within_memory",
]

Grouping = Literal["provider", "model", "day", "request"]
Outcome = Literal["succeeded", "estimated", "failed"]

_COLUMNS = {
    "schema": "BIGINT",
    "kind": "VARCHAR",
    "call_id": "VARCHAR",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "started_at": "VARCHAR",
    "request_id": "VARCHAR",
    "usage": "STRUCT(input_tokens BIGINT, search_units BIGINT, billable_characters BIGINT)",
    "estimated_usage": (
        "STRUCT(input_tokens BIGINT, search_units BIGINT, billable_characters BIGINT)"
    ),
    "error_category": "VARCHAR",
    "error_type": "VARCHAR",
    "status_code": "VARCHAR",
    "cost": "STRUCT(status VARCHAR, currency VARCHAR, code VARCHAR, amount VARCHAR)",
    "at": "VARCHAR",
    "rendered_tokens": "VARCHAR",
    "cited_tokens": "VARCHAR",
    "cited_token_share": "VARCHAR",
    "reconcilable": "VARCHAR",
    "spend": "VARCHAR",
    "currency": "VARCHAR",
    "spend_complete": "VARCHAR",
    "context_spend": "VARCHAR",
    "cited_context_spend": "VARCHAR",
    "unused_context_spend": "VARCHAR",
    "context_currency": "VARCHAR",
    "unknown_context_spend": "VARCHAR",
    "malformed_usage": "VARCHAR[]",
    "billing": "VARCHAR",
    "response_model": "VARCHAR",
    "document_count": "VARCHAR",
    "latency_ms": "VARCHAR",
}
_EVENT_KINDS = ("embedding", "embedding_failed", "rerank", "rerank_failed")
UNREADABLE = "not a readable JSON record"
"""The reason for a line that is not JSON, or JSON with neither schema nor kind."""
_BY_COLUMN = {
    "provider": "provider",
    "model": "model",
    "day": "strftime(ts, '%Y-%m-%d')",
    "request": "coalesce(request_id, '')",
}
_SHARE_BANDS = ((0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1.0))


@dataclass(frozen=True)
class CallGroup:
    """Calls that one price lookup prices alike: same provider, model, price-validity window
    and outcome, and the same figures present (and the same sent malformed), billing and
    response model. ``first_at`` is the earliest call's start (any call of the group prices the
    same). ``cost`` is the recorded cost line's (status, currency, code, amount) when the report
    prices from the log rather than a table. ``documents`` is the document count each call
    sent, for successful reranks that reported no usage and are billed by the documented rule
    (``billing == "queries"``), whose rule rounds up per call; ``None`` for every other call.
    ``billable_characters`` is the calls' summed character figure, ``None`` when they reported
    none; ``tokens_reported`` says whether they reported a token figure (an embedding may
    report only characters), which ``input_tokens`` (0 then) cannot tell."""

    keys: tuple[str, ...]
    provider: str
    model: str
    operation: Literal["embedding", "rerank"]
    outcome: Outcome
    usage_reported: bool
    calls: int
    input_tokens: int
    search_units: int
    first_at: datetime
    failure: tuple[str | None, str | None, int | None] = (None, None, None)
    cost: tuple[str | None, str | None, str | None, str | None] | None = None
    malformed: tuple[str, ...] = ()
    billing: str | None = None
    response_model: str | None = None
    documents: int | None = None
    day: str | None = None
    micros: int = 0
    """The succeeded calls' summed latency in whole microseconds (each rounded down), which a
    ``per_compute_second`` rate prices."""
    billable_characters: int | None = None
    tokens_reported: bool = True
    units_reported: bool = False

    def figures(self) -> dict[str, int | None]:
        """The billed figures the calls' providers reported (a failed or estimated call bills
        none), by name; ``None`` for one they did not report."""
        if self.outcome != "succeeded" or not self.usage_reported:
            return {}
        return {
            "input_tokens": self.input_tokens if self.tokens_reported else None,
            "search_units": self.search_units if self.units_reported else None,
            "billable_characters": self.billable_characters,
        }


@dataclass
class Scan:
    """What one scan found."""

    groups: list[CallGroup]
    lines: int
    events: int
    problems: dict[str, int]
    attribution: AttributionFigures
    duplicates: int = 0
    """Lines that repeated a call already counted (same ``call_id``), each counted once."""


def spill_directory() -> str:
    """Where DuckDB spills what does not fit in its memory limit."""
    return tempfile.gettempdir() + "/spanledger-duckdb"


def connect(memory_limit: str) -> Any:
    """A DuckDB connection of its own (in memory, UTC, spilling to ``spill_directory()`` past
    ``memory_limit``); DuckDB is imported here, never by ``import spanledger``."""
    import duckdb

    connection = duckdb.connect(
        config={
            "memory_limit": memory_limit,
            "preserve_insertion_order": False,  # groups need no order: less held in memory
            "temp_directory": spill_directory(),
        }
    )
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET enable_progress_bar_print = false")  # stdout is the report's
    return connection


def source(columns: Mapping[str, str]) -> str:
    """The files (the ``$files`` parameter) read as rows of ``columns`` (name: DuckDB type):
    one row per line that is not blank, all nulls for a line that is not a JSON object."""
    listed = ", ".join(f"'{name}': '{kind}'" for name, kind in columns.items())
    return (
        f"read_json($files, format='newline_delimited', columns={{{listed}}}, "
        "ignore_errors=true, maximum_object_size=1048576)"
    )


def scan_logs(
    files: Sequence[Path],
    *,
    by: Sequence[Grouping] = ("provider", "model"),
    since: datetime | None = None,
    until: datetime | None = None,
    windows: Sequence[datetime] = (),
    recorded_costs: bool = False,
    memory_limit: str = "128MB",
    daily: bool = False,
    cache: bool = True,
    warn: Callable[[str], object] | None = None,
    read_from: Callable[[ReportCache, Sequence[CacheEntry]], object] | None = None,
) -> Scan:
    """Scan ``files`` once: calls grouped by ``by`` and for pricing (``windows`` are the price
    table's validity boundaries), and each attribution record kept for the per-request
    aggregates. ``recorded_costs``: group by the cost line each event carries instead.
    ``daily``: split every group by its calls' UTC day too (``CallGroup.day``), for a series
    by day whatever ``by`` is. ``memory_limit``: DuckDB's, past which it spills to disk (128
    MB keeps the report's peak, interpreter and models included, under 300 MB). ``cache``:
    read what the report cache holds of each file and
    keep what is read afresh there (``warn`` is told, once, when it cannot be written);
    without it everything is read afresh and nothing is written. ``read_from`` is told the
    cache and each file's entry as the scan read them, when every one is known: what the
    figures were read from, for the report to remember what it printed under."""
    if not by:
        raise ValueError("by names at least one grouping (provider, model, day, request)")
    options = ScanOptions(
        tuple(by), since, until, tuple(windows), recorded_costs=recorded_costs, daily=daily
    )
    store = ReportCache(cache_root(), warn or _to_stderr) if cache else None
    entries = unchanged_entries(store, files) if store is not None else None
    if store is not None and entries is not None:
        remembered = recall(store, entries, options, Scan)
        if remembered is not None:
            _prune(store, files)
            if read_from is not None:
                read_from(store, entries)
            return remembered
    with reading_copy() as workdir, within_memory(memory_limit):
        connection = connect(memory_limit)
        try:
            read = _columnar(connection, files, workdir, store)
            scan = _scan(connection, read.parts, by, since, until, windows, recorded_costs, daily)
        finally:
            connection.close()
    scan.lines = read.lines
    scan.problems = read.problems
    if store is not None:
        if read.entries is not None:
            remember(store, read.entries, options, scan)
            if read_from is not None:
                read_from(store, read.entries)
        _prune(store, files)
    return scan


@contextmanager
def within_memory(memory_limit: str) -> Iterator[None]:
    """DuckDB running out of ``memory_limit`` with nowhere to spill the rest (its spill
    directory full or unwritable) raised as an ``OSError`` naming that directory and the
    limit, as a full disk is, rather than as an unexpected error."""
    import duckdb

    try:
        yield
    except duckdb.OutOfMemoryException:
        raise OSError(
            errno.ENOMEM,
            f"DuckDB ran out of its {memory_limit} of working memory, spilling what did not fit "
            "to disk here: if this disk is full, free space on it or point TMPDIR at one that "
            "has some",
            spill_directory(),
        ) from None


def _prune(store: ReportCache, files: Sequence[Path]) -> None:
    """Drop what the cache holds for files that are gone, and results past its bounds."""
    store.prune(files)
    prune_results(store)


def _to_stderr(message: str) -> None:
    sys.stderr.write(message + "\n")


@dataclass
class _Columnar:
    """The Parquet parts holding every kept record of the files read, the lines read, the
    lines skipped by reason, and each file's cache entry as read (``None`` when any file's
    could not be kept)."""

    parts: list[Path]
    lines: int
    problems: dict[str, int]
    entries: list[CacheEntry] | None


def _columnar(
    connection: Any, files: Sequence[Path], workdir: Path, store: ReportCache | None
) -> _Columnar:
    """The records every line of ``files`` kept, as Parquet parts: from ``store`` where it
    has them, else judged afresh (and written to ``store``)."""
    expected = _described(connection, _typed_nulls())
    if store is not None:
        plans = store.plan(
            files, workdir, lambda part, rows: _fits(connection, part, rows, expected)
        )
    else:
        plans = [Planned(path) for path in files]
    kept: dict[int, CacheEntry | None] = {}
    fresh = [plan for plan in plans if plan.start is not None]
    reads = read_spans([Span(plan.path, plan.start or 0, _size(plan)) for plan in fresh], workdir)
    for number, (plan, read) in enumerate(zip(fresh, reads, strict=True)):
        merged = too_many_parts(plan)
        target = workdir / f"fresh-{number:06d}.parquet"
        rows = _to_parquet(connection, read.sources, plan.parts if merged else [], target)
        if store is not None:
            kept[id(plan)] = store.save(
                plan, target, rows, read.lines, read.problems, merged=merged
            )
        plan.parts = [target] if merged else [*plan.parts, target]
        plan.lines += read.lines
        for reason, count in read.problems.items():
            plan.problems[reason] = plan.problems.get(reason, 0) + count
    if store is not None:
        for plan in plans:
            if plan.start is None:
                kept[id(plan)] = store.save(plan, None, 0, 0, {})
    problems: dict[str, int] = {}
    for plan in plans:
        for reason, count in plan.problems.items():
            problems[reason] = problems.get(reason, 0) + count
    entries = [kept.get(id(plan)) for plan in plans]
    return _Columnar(
        [part for plan in plans for part in plan.parts],
        sum(plan.lines for plan in plans),
        problems,
        [entry for entry in entries if entry is not None] if None not in entries else None,
    )


def _size(plan: Planned) -> int | None:
    return plan.status.st_size if plan.status is not None else None


def _to_parquet(
    connection: Any, sources: Sequence[Path], cached: Sequence[Path], target: Path
) -> int:
    """The records of the JSON ``sources`` (after those of the ``cached`` parts) written to
    ``target`` as Parquet, each column of its declared type; how many."""
    query = f"SELECT *, {_TS} AS ts FROM {source(_COLUMNS)}"
    named: dict[str, object] = {"files": literal_names(sources)}
    if cached:
        query = f"SELECT * FROM read_parquet($cached) UNION ALL BY NAME {query}"
        named["cached"] = literal_names(cached)
    quoted = str(target).replace("'", "''")
    [[rows]] = connection.execute(f"COPY ({query}) TO '{quoted}' ({_PARQUET})", named).fetchall()
    return int(rows)


_PARQUET = "FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1, ROW_GROUP_SIZE 10000"
"""How parts are written: zstd's fastest level makes them small for about snappy's cost, and
small row groups keep the writer within the memory limit."""
_TS = """CASE WHEN kind = 'attribution' THEN try_cast("at" AS TIMESTAMPTZ)
    ELSE try_cast(started_at AS TIMESTAMPTZ) END"""
"""A record's time: the call's start, the attribution record's ``at``."""


def _typed_nulls() -> str:
    """The columns of a part, as a select list of typed nulls."""
    typed = {**_COLUMNS, "ts": "TIMESTAMPTZ"}
    return ", ".join(f'CAST(NULL AS {kind}) AS "{name}"' for name, kind in typed.items())


def _described(
    connection: Any, columns: str, named: Mapping[str, object] | None = None
) -> list[tuple[str, str]]:
    rows = connection.execute(f"DESCRIBE SELECT {columns}", named or {}).fetchall()
    return [(str(row[0]), str(row[1])) for row in rows]


def _fits(connection: Any, part: Path, rows: int, expected: list[tuple[str, str]]) -> bool:
    """Whether ``part`` is Parquet of exactly the scan's columns holding ``rows`` rows."""
    import duckdb

    named = {"part": literal_names([part])}
    try:
        found = _described(connection, "* FROM read_parquet($part)", named)
        [[count]] = connection.execute(
            "SELECT sum(num_rows) FROM parquet_file_metadata($part)", named
        ).fetchall()
    except duckdb.Error:
        return False
    return found == expected and count == rows


def _window_of(windows: int) -> str:
    """The SQL for a call's price-validity window: how many of the boundaries (parameters
    ``$window_0``...) it starts at or after."""
    if not windows:
        return "0"
    return "(" + " + ".join(f"(ts >= $window_{i})::INTEGER" for i in range(windows)) + ")"


def in_range(since: datetime | None, until: datetime | None) -> str:
    """The SQL keeping what started in [``$since``, ``$until``)."""
    kept = ["ts IS NOT NULL"]
    if since is not None:
        kept.append("ts >= $since")
    if until is not None:
        kept.append("ts < $until")
    return " AND ".join(kept)


def literal_names(files: Sequence[Path]) -> list[str]:
    """The files as DuckDB must be given them to read each by its name: DuckDB expands any
    name as a pattern, so glob characters in a name are escaped."""
    return [glob.escape(str(path)) for path in files]


def parameters(
    files: Sequence[Path], since: datetime | None, until: datetime | None, **more: object
) -> dict[str, object]:
    """The scan's named parameters: the files (each by its name), the window, ``more``."""
    named: dict[str, object] = {"files": literal_names(files), **more}
    if since is not None:
        named["since"] = since
    if until is not None:
        named["until"] = until
    return named


def _scan(
    connection: Any,
    files: Sequence[Path],
    by: Sequence[Grouping],
    since: datetime | None,
    until: datetime | None,
    windows: Sequence[datetime],
    recorded_costs: bool,
    daily: bool = False,
) -> Scan:
    keyed: tuple[Grouping, ...] = (*by, "day") if daily else tuple(by)
    boundaries = sorted(set(windows))
    moments = {f"window_{i}": moment for i, moment in enumerate(boundaries)}
    connection.execute(_REPEATED_IN_PARTS, {"files": literal_names(files)})
    connection.execute(
        _grouping_query(keyed, since, until, len(boundaries), recorded_costs),
        parameters(files, since, until, **moments),
    )
    keys = ", ".join(f"k{i}" for i in range(len(keyed)))
    groups = [
        _group(row, len(by), daily)
        for row in connection.execute(
            f"""{_CALLS}
            SELECT {keys}, provider, model, operation, outcome, reported, category, error,
                status,
                cost_status, cost_currency, cost_code, cost_amount, calls, tokens, units, first_at,
                malformed, billing, response_model, documents, micros, characters, has_token_figure,
                has_unit_figure
            FROM calls"""
        ).fetchall()
    ]
    [[duplicates]] = connection.execute(_DUPLICATES).fetchall()
    classes = {
        str(name): int(count)
        for name, count in connection.execute(
            "SELECT class, sum(lines) FROM grouped GROUP BY class"
        ).fetchall()
    }
    events = classes.get("call", 0) + classes.get("out of range", 0)
    attribution = AttributionFigures(by_request=() if "request" in by else None)
    if classes.get("attribution"):
        connection.execute(_latest_query(since, until), parameters(files, since, until))
        attribution = _attribution(connection, "request" in by)
    return Scan(
        groups,
        sum(classes.values()),
        events,
        skipped(classes),
        attribution,
        int(duplicates or 0),
    )


REPEATED = """CREATE OR REPLACE TEMP TABLE repeated AS
    SELECT call_id FROM (
        SELECT "call_id" ->> '$' AS call_id
        FROM read_json($files, format='newline_delimited', columns={'call_id': 'JSON'},
            ignore_errors=true, maximum_object_size=16777216)
    ) WHERE call_id IS NOT NULL GROUP BY call_id HAVING count(*) > 1"""
"""The call ids met on more than one line: only their calls need de-duplicating."""

_REPEATED_IN_PARTS = """CREATE OR REPLACE TEMP TABLE repeated AS
    SELECT call_id FROM read_parquet($files)
    WHERE call_id IS NOT NULL GROUP BY call_id HAVING count(*) > 1"""
"""``REPEATED`` over the scan's Parquet parts."""

_CALLS = """WITH merged AS (
        SELECT * EXCLUDE (lines, calls, tokens, units, characters, micros, first_at),
            sum(calls) AS calls, sum(tokens) AS tokens, sum(units) AS units,
            sum(characters) AS characters, sum(micros) AS micros, min(first_at) AS first_at
        FROM grouped WHERE class = 'call' GROUP BY ALL
    ), once AS (
        SELECT * REPLACE (
            1 AS calls, tokens // calls AS tokens, units // calls AS units,
            characters // calls AS characters, micros // calls AS micros)
        FROM (SELECT DISTINCT ON (repeat) * FROM merged WHERE repeat IS NOT NULL
            ORDER BY repeat, first_at, provider, model, outcome, cost_amount, variant)
    ), calls AS (
        SELECT * EXCLUDE (repeat, variant) FROM (
            SELECT * FROM merged WHERE repeat IS NULL UNION ALL BY NAME SELECT * FROM once
        )
    )"""
"""The call groups, each call counted once: of the lines sharing a call id, one is kept."""

_DUPLICATES = """SELECT sum(calls) - count(DISTINCT repeat) FROM grouped
    WHERE class = 'call' AND repeat IS NOT NULL"""
"""How many lines repeated a call already counted."""


_NOT_PROBLEMS = frozenset({"call", "attribution", "out of range"})


def skipped(classes: Mapping[str, int]) -> dict[str, int]:
    """The lines skipped, by reason, from the lines read per class."""
    return {name: count for name, count in classes.items() if name not in _NOT_PROBLEMS}


def record_class(keep: str) -> str:
    """The SQL naming what a row is: ``'call'``, ``'attribution'``, ``'out of range'`` (not
    kept by ``keep``), or the reason it is skipped. Rows need ``schema``, ``kind``,
    ``provider``, ``model``, ``request_id`` and ``ts`` (the call's start, the record's time)."""
    kinds = ", ".join(f"'{kind}'" for kind in _EVENT_KINDS)
    return f"""CASE
            WHEN schema IS NULL AND kind IS NULL THEN '{UNREADABLE}'
            WHEN schema IS NULL THEN 'no schema version'
            WHEN schema <> 1 THEN 'unsupported schema version'
            WHEN kind = 'attribution' AND (request_id IS NULL OR ts IS NULL)
                THEN 'invalid attribution record'
            WHEN kind = 'attribution' AND {keep} THEN 'attribution'
            WHEN kind = 'attribution' THEN 'out of range'
            WHEN kind IS NULL OR kind NOT IN ({kinds}) THEN 'unknown record kind'
            WHEN provider IS NULL OR model IS NULL OR ts IS NULL
                THEN 'invalid ' || kind || ' event'
            WHEN {keep} THEN 'call'
            ELSE 'out of range'
        END"""


def _classified(keep: str, kinds: str = "true") -> str:
    """The CTEs ``rows`` (the parts' records of ``kinds``) and
    ``classified`` (each with its ``class``, per ``keep``), computed where they are used."""
    return f"""WITH rows AS NOT MATERIALIZED (
            SELECT * FROM read_parquet($files) WHERE {kinds}
        ), classified AS NOT MATERIALIZED (
            SELECT rows.*, {record_class(keep)} AS class FROM rows
        )"""


def _grouping_query(
    by: Sequence[Grouping],
    since: datetime | None,
    until: datetime | None,
    windows: int,
    recorded_costs: bool,
) -> str:
    """The scan: every record classified, the calls grouped for pricing, and the other
    records counted by class, into the temporary table ``grouped``."""
    keys = ", ".join(f"{_BY_COLUMN[name]} AS k{i}" for i, name in enumerate(by))
    cost_columns = ", ".join(
        f"cost.{name} AS cost_{name}" if recorded_costs else f"NULL AS cost_{name}"
        for name in ("status", "currency", "code", "amount")
    )
    succeeded = "kind IN ('embedding', 'rerank')"
    failed = "kind LIKE '%_failed'"
    return f"""
        CREATE OR REPLACE TEMP TABLE grouped AS
        {_classified(in_range(since, until))}, calls AS (
            SELECT classified.class, {keys},
                repeated.call_id AS repeat,
                provider, model, split_part(kind, '_', 1) AS operation,
                CASE
                    WHEN {succeeded} THEN 'succeeded'
                    WHEN estimated_usage IS NOT NULL THEN 'estimated'
                    ELSE 'failed'
                END AS outcome,
                CASE WHEN {succeeded} THEN usage ELSE estimated_usage END AS figures,
                {_window_of(windows)} AS price_window,
                CASE WHEN {failed} THEN error_category END AS category,
                CASE WHEN {failed} THEN error_type END AS error,
                CASE WHEN {failed} THEN try_cast(status_code AS INTEGER) END AS status,
                CASE WHEN {succeeded} AND len(malformed_usage) > 0
                    THEN list_sort(malformed_usage) END AS malformed,
                billing,
                CASE WHEN {succeeded} THEN response_model END AS response_model,
                CASE WHEN kind = 'rerank' AND usage IS NULL AND billing = '{RULE_BILLING}'
                    THEN try_cast(document_count AS BIGINT) END AS documents,
                CASE WHEN {succeeded}
                    THEN try_cast(floor(try_cast(latency_ms AS DOUBLE) * 1000) AS BIGINT)
                    END AS call_micros,
                {cost_columns}, ts
            FROM classified LEFT JOIN repeated ON classified.call_id = repeated.call_id
            WHERE classified.class = 'call'
        ), measured AS (
            SELECT *,
                figures IS NOT NULL AS reported,
                coalesce(figures.input_tokens, 0) AS tokens,
                coalesce(figures.search_units, 0) AS units,
                figures.billable_characters AS chars,
                figures.input_tokens IS NOT NULL AS has_token_figure,
                figures.search_units IS NOT NULL AS has_unit_figure,
                CASE WHEN repeat IS NOT NULL THEN hash(figures, call_micros) END AS variant
            FROM calls
        )
        SELECT class, {", ".join(f"k{i}" for i in range(len(by)))}, provider, model, operation,
            outcome,
            reported, tokens > 0 AS has_tokens, units > 0 AS has_units, has_token_figure,
            has_unit_figure,
            chars IS NOT NULL AS has_characters, price_window,
            category, error, status, cost_status, cost_currency, cost_code, cost_amount,
            malformed, billing, response_model, documents, repeat, variant, count(*) AS lines,
            sum(tokens) AS tokens, sum(units) AS units, sum(chars) AS characters,
            coalesce(sum(call_micros), 0) AS micros,
            min(ts) AS first_at, count(*) AS calls
        FROM measured
        GROUP BY ALL
        UNION ALL BY NAME
        SELECT class, count(*) AS lines FROM classified WHERE class <> 'call' GROUP BY class
    """


def _latest_query(since: datetime | None, until: datetime | None) -> str:
    """Each request's latest attribution record (by its time) among those the scan kept,
    into the temporary table ``attribution``: memory grows with requests, not records."""
    return f"""
        CREATE OR REPLACE TEMP TABLE attribution AS
        {_classified(in_range(since, until), "kind = 'attribution'")}
        SELECT unnest(arg_max({{
            'request': request_id,
            'at': ts,
            'rendered': try_cast(rendered_tokens AS BIGINT),
            'cited': try_cast(cited_tokens AS BIGINT),
            'share': try_cast(cited_token_share AS DOUBLE),
            'reconcilable': try_cast(reconcilable AS BOOLEAN),
            'spend': spend,
            'currency': currency,
            'complete': try_cast(spend_complete AS BOOLEAN),
            'context': context_spend,
            'cited_context': cited_context_spend,
            'unused_context': unused_context_spend,
            'context_currency': context_currency,
            'context_unknown': unknown_context_spend
        }}, ts))
        FROM classified WHERE class = 'attribution' GROUP BY request_id
    """


def _group(row: tuple[Any, ...], width: int, daily: bool = False) -> CallGroup:
    keys = tuple("" if value is None else str(value) for value in row[:width])
    day = str(row[width]) if daily else None
    if daily:
        width += 1
    (
        provider,
        model,
        operation,
        outcome,
        reported,
        category,
        error,
        status,
        cost_status,
        cost_currency,
        cost_code,
        cost_amount,
        calls,
        tokens,
        units,
        first_at,
        malformed,
        billing,
        response_model,
        documents,
        micros,
        characters,
        has_token_figure,
        has_unit_figure,
    ) = row[width:]
    recorded = cost_status is not None or cost_amount is not None
    return CallGroup(
        keys=keys,
        provider=provider,
        model=model,
        operation=operation,
        outcome=outcome,
        usage_reported=bool(reported),
        calls=int(calls),
        input_tokens=int(tokens),
        search_units=int(units),
        first_at=first_at,
        failure=(category, error, status),
        cost=(cost_status, cost_currency, cost_code, cost_amount) if recorded else None,
        malformed=tuple(str(name) for name in malformed or ()),
        billing=billing,
        response_model=response_model,
        documents=int(documents) if documents is not None else None,
        day=day,
        micros=int(micros),
        billable_characters=int(characters) if characters is not None else None,
        tokens_reported=bool(has_token_figure),
        units_reported=bool(has_unit_figure),
    )


_LATEST = "WITH latest AS (SELECT * FROM attribution)"
"""Each request's latest attribution record (by its ``at``) among those the scan kept."""


def _attribution(connection: Any, by_request: bool = False) -> AttributionFigures:
    """Each request's latest attribution record (by its ``at``) among those the scan kept,
    aggregated; with ``by_request``, each request's context spend too."""
    bands = ", ".join(
        f"count(*) FILTER (WHERE share >= {low} AND (share < {high}"
        + (" OR share = 1.0" if high == 1.0 else "")
        + "))"
        for low, high in _SHARE_BANDS
    )
    known = "complete AND spend IS NOT NULL"
    [row] = connection.execute(
        f"""
        {_LATEST}, measured AS (
            SELECT * REPLACE (try_cast(spend AS DECIMAL(38, 24)) AS spend) FROM latest
        )
        SELECT count(*), count(share),
            avg(CAST(share AS DECIMAL(38, 18)))::DOUBLE, median(share), {bands},
            sum(spend) FILTER (WHERE {known}),
            sum(cited) FILTER (WHERE {known}),
            list(DISTINCT currency) FILTER (WHERE {known} AND currency IS NOT NULL),
            count(*) FILTER (WHERE NOT ({known})),
            count(*) FILTER (WHERE rendered > 0 AND cited = 0),
            list(request ORDER BY request) FILTER (WHERE rendered > 0 AND cited = 0),
            count(*) FILTER (WHERE NOT reconcilable),
            list(request ORDER BY request) FILTER (WHERE NOT reconcilable)
        FROM measured
        """
    ).fetchall()
    context, context_known = _context_totals(connection)
    (requests, with_share, mean, median, *rest) = row
    band_counts, rest = rest[: len(_SHARE_BANDS)], rest[len(_SHARE_BANDS) :]
    spend, cited, currencies, unknown, _, nothing_ids, _, unrec_ids = rest
    return AttributionFigures(
        requests=int(requests),
        with_share=int(with_share),
        mean_share=mean,
        median_share=median,
        bands={
            f"{low:.0%}-{high:.0%}": int(count)
            for (low, high), count in zip(_SHARE_BANDS, band_counts, strict=True)
        },
        spend=Decimal(str(spend)) if spend is not None else Decimal(0),
        cited_tokens=int(cited or 0),
        currencies=tuple(sorted(currencies or ())),
        unknown_spend=int(unknown),
        earned_nothing=tuple(nothing_ids or ()),
        unreconcilable=tuple(unrec_ids or ()),
        context_spend=context,
        context_known=context_known,
        by_request=_context_by_request(connection) if by_request else None,
    )


_CONTEXT_AMOUNTS = ("context", "cited_context", "unused_context")


def _context_totals(
    connection: Any,
) -> tuple[dict[str, tuple[Decimal, Decimal, Decimal]], int]:
    """The known context spend per currency (all, cited, unused), and how many requests it
    is known for: a request counts only when all three amounts read as non-negative
    decimals, so a figure the log lacks or holds malformed is unknown, never zero."""
    casts = ", ".join(f"try_cast({name} AS DECIMAL(38, 24)) AS {name}" for name in _CONTEXT_AMOUNTS)
    known = " AND ".join(f"{name} >= 0" for name in _CONTEXT_AMOUNTS)
    rows = connection.execute(
        f"""
        {_LATEST}, measured AS (
            SELECT * REPLACE ({casts}) FROM latest
        )
        SELECT coalesce(context_currency, ''), sum(context), sum(cited_context),
            sum(unused_context), count(*)
        FROM measured WHERE {known} GROUP BY ALL
        """
    ).fetchall()
    totals: dict[str, tuple[Decimal, Decimal, Decimal]] = {}
    requests = 0
    for currency, context, cited, unused, count in rows:
        requests += int(count)
        if currency or context:
            totals[str(currency)] = (Decimal(context), Decimal(cited), Decimal(unused))
    return totals, requests


def _context_by_request(connection: Any) -> tuple[ContextFigures, ...]:
    """Each request's cited token share and context spend, by request id."""
    rows = connection.execute(
        f"""
        {_LATEST}
        SELECT request, context, cited_context, unused_context, context_currency,
            context_unknown, share, rendered, cited
        FROM latest ORDER BY request
        """
    ).fetchall()
    found = []
    for request, context, cited, unused, currency, unknown, share, rendered, tokens in rows:
        amounts = [_amount(value) for value in (context, cited, unused)]
        whole = None not in amounts
        found.append(
            ContextFigures(
                str(request),
                context=amounts[0] if whole else None,
                cited=amounts[1] if whole else None,
                unused=amounts[2] if whole else None,
                currency=currency,
                unknown=unknown,
                share=share,
                rendered_tokens=rendered,
                cited_tokens=tokens,
            )
        )
    return tuple(found)


def _amount(text: object) -> Decimal | None:
    """A logged amount as an exact decimal, ``None`` unless it is a non-negative number."""
    if not isinstance(text, str):
        return None
    try:
        value = Decimal(text)
    except ArithmeticError:
        return None
    return value if value.is_finite() and value >= 0 else None
