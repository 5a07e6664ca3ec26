"""``spanledger export``: a fleet's event logs as Parquet, partitioned by day, for warehouses.

Two tables under the target directory, each a Hive-style ``day=YYYY-MM-DD`` partition tree:
``events/`` (one row per call: its figures, outcome and cost line, flattened) and
``attribution/`` (each request's attribution records: the share, the retrieval spend, the
context's spend as input tokens with its cited and unused parts, the evidence that cited
frames). Only what the log holds is written, and the log never holds inputs, queries or
documents. Lines that are not events are skipped and counted, as by ``spanledger report``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from spanledger.errors import ConfigurationError
from spanledger.fleet.scan import (
    connect,
    in_range,
    parameters,
    record_class,
    skipped,
    source,
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
_EVENTS = """kind, call_id, request_id, logical_call_id, attempt, retried, provider, model,
    ts AS started_at, latency_ms, server_address, server_port, response_model, response_id,
    billing, input_count, input_type, dimensions, query_length, document_count, top_k, result_count,
    usage.input_tokens AS input_tokens, usage.search_units AS search_units,
    usage.billable_characters AS billable_characters, usage_source,
    estimated_usage.input_tokens AS estimated_input_tokens,
    estimated_usage.search_units AS estimated_search_units,
    error_category, error_type, status_code, retry_after,
    cost.status AS cost_status, cost.amount AS cost_amount, cost.currency AS cost_currency,
    cost.code AS cost_code, cost.price_entry AS price_entry"""
_ATTRIBUTION = """request_id, ts AS at, frames_served, frames_rendered, frames_cited,
    rendered_tokens, cited_tokens, uncited_rendered_tokens, cited_token_share, reconcilable,
    calls, billed_input_tokens, billed_search_units, billed_characters, calls_without_usage,
    spend, currency,
    spend_complete, spend_per_cited_token, model_calls, quoted_tokens, cited_by, context_spend,
    cited_context_spend, unused_context_spend, context_currency, unknown_context_spend,
    capture_cut"""


@dataclass(frozen=True)
class Exported:
    """What an export wrote, and what it skipped."""

    events: int
    attribution_records: int
    days: int
    problems: dict[str, int]


def export_parquet(
    files: Sequence[Path],
    target: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    memory_limit: str = "256MB",
) -> Exported:
    """Write ``files``' events and attribution records under ``target`` (which must be empty
    or new) as Parquet partitioned by day; amounts stay exact decimal strings."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigurationError(f"--parquet {str(target)!r}: export into a new or empty directory")
    target.mkdir(parents=True, exist_ok=True)
    keep = in_range(since, until)
    connection = connect(memory_limit)
    try:
        named = parameters(files, since, until)
        classified = _classified(keep)
        found = connection.execute(
            f"{classified} SELECT class, count(*), list(DISTINCT day) "
            "FROM classified GROUP BY class",
            named,
        ).fetchall()
        counts = {str(name): (int(count), set(days or ())) for name, count, days in found}
        for table, columns, kept in (
            ("events", _EVENTS, "call"),
            ("attribution", _ATTRIBUTION, "attribution"),
        ):
            if counts.get(kept, (0, set()))[0]:
                folder = str(target / table).replace("'", "''")
                connection.execute(
                    f"""COPY ({classified} SELECT {columns}, day FROM classified
                        WHERE class = '{kept}')
                    TO '{folder}' (FORMAT PARQUET, PARTITION_BY (day))""",
                    named,
                )
    finally:
        connection.close()
    events, event_days = counts.get("call", (0, set()))
    records, record_days = counts.get("attribution", (0, set()))
    classes = {name: count for name, (count, _) in counts.items()}
    return Exported(events, records, len(event_days | record_days), skipped(classes))


def _classified(keep: str) -> str:
    """A ``WITH`` naming the log's rows ``classified``, each with its class and day."""
    return f"""WITH rows AS (
            SELECT *,
                CASE WHEN kind = 'attribution' THEN try_cast("at" AS TIMESTAMPTZ)
                    ELSE try_cast(started_at AS TIMESTAMPTZ) END AS ts
            FROM {source(_EVENT_COLUMNS)}
        ), classified AS (
            SELECT *, {record_class(keep)} AS class, strftime(ts, '%Y-%m-%d') AS day FROM rows
        )"""
