"""The columns of ``spanledger export``'s two Parquet tables and their types, declared once.

The export casts every column to the type named here, so an export of an empty log and of a
full one have the same schema; the Fleet reports guide lists the same columns and types, and
tests hold both the written files and the guide to this declaration, so a rename or a type
change cannot reach a warehouse job unnoticed. Types are spelled as DuckDB names them when it
reads the files back (``DESCRIBE``). Amounts are ``VARCHAR``: the exact decimal string the event
log holds, since a quotient such as ``spend_per_cited_token`` can have more decimal places than
any Parquet ``DECIMAL`` keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["ATTRIBUTION", "EVENTS", "PARTITION", "TABLES"]

_COUNT = "BIGINT"
_TEXT = "VARCHAR"
_AMOUNT = "VARCHAR"
_MOMENT = "TIMESTAMP WITH TIME ZONE"
_COUNTS_BY_NAME = "MAP(VARCHAR, BIGINT)"

EVENTS: Mapping[str, str] = MappingProxyType(
    {
        "kind": _TEXT,
        "call_id": _TEXT,
        "request_id": _TEXT,
        "logical_call_id": _TEXT,
        "attempt": _COUNT,
        "retried": "BOOLEAN",
        "provider": _TEXT,
        "model": _TEXT,
        "started_at": _MOMENT,
        "latency_ms": "DOUBLE",
        "server_address": _TEXT,
        "server_port": _COUNT,
        "response_model": _TEXT,
        "response_id": _TEXT,
        "billing": _TEXT,
        "input_count": _COUNT,
        "input_type": _TEXT,
        "dimensions": _COUNT,
        "query_length": _COUNT,
        "document_count": _COUNT,
        "top_k": _COUNT,
        "result_count": _COUNT,
        "input_tokens": _COUNT,
        "search_units": _COUNT,
        "billable_characters": _COUNT,
        "usage_source": _TEXT,
        "estimated_input_tokens": _COUNT,
        "estimated_search_units": _COUNT,
        "error_category": _TEXT,
        "error_type": _TEXT,
        "status_code": _COUNT,
        "retry_after": "DOUBLE",
        "cost_status": _TEXT,
        "cost_amount": _AMOUNT,
        "cost_currency": _TEXT,
        "cost_code": _TEXT,
        "price_entry": _TEXT,
    }
)
"""``events/``: one row per call attempt, its figures, outcome and cost line flattened."""

ATTRIBUTION: Mapping[str, str] = MappingProxyType(
    {
        "request_id": _TEXT,
        "at": _MOMENT,
        "frames_served": _COUNT,
        "frames_rendered": _COUNT,
        "frames_cited": _COUNT,
        "rendered_tokens": _COUNT,
        "cited_tokens": _COUNT,
        "uncited_rendered_tokens": _COUNT,
        "cited_token_share": "DOUBLE",
        "reconcilable": "BOOLEAN",
        "calls": _COUNT,
        "billed_input_tokens": _COUNT,
        "billed_search_units": _COUNT,
        "billed_characters": _COUNT,
        "calls_without_usage": _COUNT,
        "spend": _AMOUNT,
        "currency": _TEXT,
        "spend_complete": "BOOLEAN",
        "spend_per_cited_token": _AMOUNT,
        "model_calls": _COUNT,
        "quoted_tokens": _COUNT,
        "cited_by": _COUNTS_BY_NAME,
        "context_spend": _AMOUNT,
        "cited_context_spend": _AMOUNT,
        "unused_context_spend": _AMOUNT,
        "context_currency": _TEXT,
        "unknown_context_spend": _TEXT,
        "capture_cut": _COUNTS_BY_NAME,
    }
)
"""``attribution/``: one row per attribution record (a request may have several)."""

PARTITION: tuple[str, str] = ("day", "DATE")
"""The partition column: not stored in the files but named by their folder (``day=2026-11-03``,
the UTC day of ``started_at`` or ``at``); DuckDB and Spark read it as a ``DATE``."""

TABLES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {"events": EVENTS, "attribution": ATTRIBUTION}
)
"""Each table's folder under the export's directory, and its columns."""
