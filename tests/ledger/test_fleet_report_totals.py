"""``spanledger report`` prices a log's call groups with DuckDB's sums; pricing is linear, so its
totals must equal pricing each event in process, to the last ``Decimal`` digit.

Random event sets cover every outcome (priced, estimated, unmetered, unpriced, not billed),
several validity windows of one model's price, two currencies, per-request rates and rerank
search units, and are compared row by row with ``build_spend_report`` over the same events.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanledger.cli import main
from spanledger.errors import ErrorCategory
from spanledger.eventlog import event_line
from spanledger.events import EmbeddingUsage, Event, RerankUsage
from spanledger.ledger.pricing import Ledger
from spanledger.ledger.report import build_spend_report
from tests.ledger.conftest import (
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
CHANGE = datetime(2026, 3, 1, tzinfo=UTC)
END = datetime(2026, 6, 1, tzinfo=UTC)
PRICES = table(
    # one model repriced on CHANGE: two validity windows, then none after END
    entry("openai", "small", input_per_mtok="0.02", valid_until=CHANGE.isoformat()),
    entry(
        "openai",
        "small",
        input_per_mtok="0.013",
        per_request="0.0000007",
        valid_from=CHANGE.isoformat(),
        valid_until=END.isoformat(),
    ),
    entry("cohere", "rerank-v3.5", per_search_unit="0.002"),
    entry("cohere", "embed-v4.0", input_per_mtok="0.12", currency="EUR"),
    entry("voyageai", "rerank-2.5", per_request="0.00005"),  # no token rate: missing rate
    entry("jina", "jina-embeddings-v3", input_per_mtok="0"),  # free
)
EMBEDDERS = [
    ("openai", "small"),
    ("cohere", "embed-v4.0"),
    ("jina", "jina-embeddings-v3"),
    ("acme", "m"),
]
RERANKERS = [("cohere", "rerank-v3.5"), ("voyageai", "rerank-2.5"), ("acme", "r")]
FAILURES = [
    (ErrorCategory.UNAVAILABLE, "ReadTimeout", None),  # abandoned after sending: may bill
    (ErrorCategory.RATE_LIMIT, "http_429", 429),  # an error status: never billed
    (ErrorCategory.INVALID_RESPONSE, "bad_vector", 200),  # a 2xx that could not be read
    (ErrorCategory.INVALID_REQUEST, "http_400", 400),
]

moments = st.integers(0, int((END + timedelta(days=30) - START).total_seconds())).map(
    lambda seconds: START + timedelta(seconds=seconds)
)
figures = st.one_of(st.none(), st.integers(0, 5_000))


@st.composite
def events(draw: st.DrawFn) -> Event:
    at = draw(moments)
    request = draw(st.sampled_from(["r1", "r2", None]))
    shape = draw(st.sampled_from(["embed", "rerank", "embed_failed", "rerank_failed"]))
    if shape.startswith("embed"):
        provider, model = draw(st.sampled_from(EMBEDDERS))
    else:
        provider, model = draw(st.sampled_from(RERANKERS))
    common: dict[str, Any] = {"provider": provider, "started_at": at, "request_id": request}
    if shape == "embed":
        tokens = draw(figures)
        garbage = () if tokens is not None else draw(st.sampled_from([(), ("input_tokens",)]))
        return embedding_event(model, tokens=tokens, malformed_usage=garbage, **common)
    if shape == "rerank":
        units, tokens = draw(figures), draw(figures)
        usage = (
            None
            if units is None and tokens is None
            else RerankUsage(search_units=units, input_tokens=tokens)
        )
        unsent = [name for name, value in (("input_tokens", tokens), ("search_units", units))]
        sent_badly = draw(st.lists(st.sampled_from(unsent), unique=True)) if usage is None else []
        return rerank_event(model, usage=usage, malformed_usage=sorted(sent_badly), **common)
    category, error_type, status = draw(st.sampled_from(FAILURES))
    estimate = draw(st.one_of(st.none(), st.integers(1, 3_000)))
    failure = {"category": category, "error_type": error_type, "status_code": status, **common}
    if shape == "embed_failed":
        usage_e = (
            EmbeddingUsage(input_tokens=estimate)
            if estimate and error_type == "ReadTimeout"
            else None
        )
        return embedding_failed_event(model, estimated=usage_e, **failure)
    usage_r = RerankUsage(search_units=1) if estimate and error_type == "ReadTimeout" else None
    return rerank_failed_event(model, estimated=usage_r, **failure)


def rows(data: dict[str, Any]) -> dict[tuple[str, ...], tuple[Any, ...]]:
    return {
        (row["provider"], row["model"], row["status"], row["currency"] or ""): (
            row["calls"],
            row["amount"],
            row["input_tokens"],
            row["search_units"],
        )
        for row in data["rows"]
    }


def report_json(log: Path, *options: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["report", str(log), "--json", *options]) in (0, 1)
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(events(), min_size=10, max_size=80))
def test_the_reports_totals_equal_pricing_each_event_in_process(
    batch: list[Event], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "events.jsonl"
    prices = tmp_path / "prices.json"
    log.write_bytes(b"".join(event_line(event) for event in batch))
    prices.write_text(json.dumps(PRICES_FILE))

    fleet = report_json(log, "--prices", str(prices), capsys=capsys)
    expected = build_spend_report(batch, Ledger(PRICES, warn=False)).to_json()

    assert rows(fleet) == rows(expected)
    assert fleet["status_counts"] == expected["status_counts"]
    assert fleet["spend"] == expected["spend"]
    assert fleet["unpriced_models"] == expected["unpriced_models"]
    assert fleet["events"] == len(batch)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(events(), min_size=1, max_size=40))
def test_without_a_table_the_recorded_cost_lines_are_totalled(
    batch: list[Event], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = Ledger(PRICES, warn=False)
    priced = [event.model_copy(update={"cost": ledger.price(event)}) for event in batch]
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"".join(event_line(event) for event in priced))

    fleet = report_json(log, capsys=capsys)
    expected = build_spend_report(priced).to_json()

    assert rows(fleet) == rows(expected)
    assert fleet["spend"] == expected["spend"]


PRICES_FILE = {
    "currency": "USD",
    "prices": [
        {"provider": e.provider, "model": e.model, "currency": e.currency}
        | {
            name: str(value)
            for name, value in (
                ("input_per_mtok", e.input_per_mtok),
                ("per_search_unit", e.per_search_unit),
                ("per_request", e.per_request),
            )
            if value is not None
        }
        | {
            name: value.isoformat()
            for name, value in (("valid_from", e.valid_from), ("valid_until", e.valid_until))
            if value is not None
        }
        for e in PRICES.entries
    ],
}


def test_calls_either_side_of_a_price_change_are_priced_by_their_own_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = embedding_event("small", tokens=1000, started_at=CHANGE - timedelta(seconds=1))
    after = embedding_event("small", tokens=1000, started_at=CHANGE)
    log = tmp_path / "events.jsonl"
    prices = tmp_path / "prices.json"
    log.write_bytes(event_line(before) + event_line(after))
    prices.write_text(json.dumps(PRICES_FILE))

    fleet = report_json(log, "--prices", str(prices), capsys=capsys)

    # 1000 tokens at 0.02 per million, then 1000 at 0.013 plus 0.0000007 per request
    assert fleet["spend"] == {"USD": "0.000033700"}
    assert rows(fleet) == rows(build_spend_report([before, after], Ledger(PRICES)).to_json())
