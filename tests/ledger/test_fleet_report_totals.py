"""``spanledger report`` prices a log's call groups with DuckDB's sums; pricing is linear, so its
totals must equal pricing each event in process, to the last ``Decimal`` digit.

Random event sets cover every outcome (priced, estimated, unmetered, unpriced, not billed),
several validity windows of one model's price, two currencies, per-request rates and rerank
search units, reranks billed per query by rule (which report no usage), local models (never
unpriced), Azure deployments (priced by the model the response reported) and Vertex AI
embeddings reporting billable characters beside their tokens, each figure or both absent or
malformed (priced per 1,000 characters, per million tokens, or both), and are compared row by
row with ``build_spend_report`` over the same events.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
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
    # billed per query by rule, the API reporting no usage; one with a per-request rate too
    entry("aws.bedrock", "amazon.rerank-v1:0", per_search_unit="0.001"),
    entry("gcp.vertex_ai", "semantic-*", per_search_unit="0.001", per_request="0.00001"),
    # by model name: an event's model is the deployment
    entry("azure.ai.openai", "text-embedding-3-small", input_per_mtok="0.02"),
    # a user's own rate for some local models; the others have none (never unpriced)
    entry("ollama", "priced-*", input_per_mtok="0.5"),
    # billed per 1,000 characters, per million tokens, or both (with a per-request rate)
    entry("gcp.vertex_ai", "text-embedding-005", input_per_kchar="0.000025"),
    entry("gcp.vertex_ai", "gemini-embedding-001", input_per_mtok="0.15"),
    entry(
        "gcp.vertex_ai",
        "both-measures",
        input_per_mtok="0.1",
        input_per_kchar="0.00002",
        per_request="0.00001",
    ),
)
EMBEDDERS = [
    ("openai", "small"),
    ("cohere", "embed-v4.0"),
    ("jina", "jina-embeddings-v3"),
    ("acme", "m"),
    ("azure.ai.openai", "my-embedder"),
    ("azure.ai.openai", "text-embedding-3-small"),
    ("ollama", "priced-embed"),
    ("ollama", "nomic-embed-text"),
    ("gcp.vertex_ai", "text-embedding-005"),
    ("gcp.vertex_ai", "gemini-embedding-001"),
    ("gcp.vertex_ai", "both-measures"),
]
RERANKERS = [
    ("cohere", "rerank-v3.5"),
    ("voyageai", "rerank-2.5"),
    ("acme", "r"),
    ("aws.bedrock", "amazon.rerank-v1:0"),
    ("aws.bedrock", "cohere.rerank-v3-5:0"),
    ("gcp.vertex_ai", "semantic-ranker-default-004"),
    ("ollama", "priced-rerank"),
    ("ollama", "bge-reranker"),
]
BILLING: dict[str, list[str | None]] = {  # what each endpoint bills by (None: an older log)
    "openai": [None, "tokens"],
    "cohere": [None, "tokens", "search_units"],
    "jina": [None, "tokens"],
    "voyageai": [None, "tokens"],
    "acme": [None],
    "azure.ai.openai": ["tokens"],
    "aws.bedrock": ["queries"],
    "gcp.vertex_ai": ["queries"],
    "ollama": ["local"],
}
RESPONSE_MODELS: dict[str, list[str | None]] = {  # what a response says it ran
    "azure.ai.openai": ["text-embedding-3-small", "text-embedding-3-small", None, "unknown"],
}
OTHER_RESPONSE_MODELS: list[str | None] = [None, "small", "unknown"]
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
    billing = draw(st.sampled_from(BILLING[provider]))
    common: dict[str, Any] = {
        "provider": provider,
        "started_at": at,
        "request_id": request,
        "billing": billing,
    }
    reported = RESPONSE_MODELS.get(provider, OTHER_RESPONSE_MODELS)
    answered = {**common, "response_model": draw(st.sampled_from(reported))}
    if shape == "embed":
        tokens = draw(figures)
        characters = draw(figures) if provider == "gcp.vertex_ai" else None
        unsent = [name for name in ("input_tokens",) if tokens is None]
        if provider == "gcp.vertex_ai" and characters is None:
            unsent.append("billable_characters")
        sent_badly = draw(st.lists(st.sampled_from(unsent), unique=True)) if unsent else []
        usage_c = (
            None
            if tokens is None and characters is None
            else EmbeddingUsage(input_tokens=tokens, billable_characters=characters)
        )
        garbage = tuple(name for name in unsent if name in sent_badly)
        return embedding_event(
            model, tokens=None, usage=usage_c, malformed_usage=garbage, **answered
        )
    if shape == "rerank":
        units, tokens = draw(figures), draw(figures)
        if billing == "queries" and draw(st.integers(0, 3)):  # mostly what such APIs report
            units = tokens = None
        usage = (
            None
            if units is None and tokens is None
            else RerankUsage(search_units=units, input_tokens=tokens)
        )
        unsent = [name for name, value in (("input_tokens", tokens), ("search_units", units))]
        sent_badly = draw(st.lists(st.sampled_from(unsent), unique=True)) if usage is None else []
        documents = draw(st.one_of(st.sampled_from([1, 100, 101, 250]), st.integers(0, 1000)))
        return rerank_event(
            model,
            usage=usage,
            malformed_usage=sorted(sent_badly),
            document_count=documents,
            **answered,
        )
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
            row["billable_characters"],
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
                ("input_per_kchar", e.input_per_kchar),
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


@pytest.mark.parametrize(
    ("model", "tokens", "characters", "status"),
    [
        ("gemini-embedding-001", None, 12, "unmetered"),  # billed by tokens it did not report
        ("gemini-embedding-001", 0, 12, "priced"),  # 0 reported tokens are free
        ("text-embedding-005", 4, None, "unmetered"),  # billed by characters it did not report
        ("text-embedding-005", None, 0, "priced"),
    ],
)
def test_a_figure_not_reported_is_not_summed_as_zero(
    model: str,
    tokens: int | None,
    characters: int | None,
    status: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The report's sums cannot tell a 0 from a figure never reported: the scan says which."""
    usage = EmbeddingUsage(input_tokens=tokens, billable_characters=characters)
    calls = [
        embedding_event(model, provider="gcp.vertex_ai", tokens=None, usage=usage) for _ in range(2)
    ]
    log = tmp_path / "events.jsonl"
    prices = tmp_path / "prices.json"
    log.write_bytes(b"".join(map(event_line, calls)))
    prices.write_text(json.dumps(PRICES_FILE))

    fleet = report_json(log, "--prices", str(prices), capsys=capsys)

    assert [row["status"] for row in fleet["rows"]] == [status]
    assert rows(fleet) == rows(build_spend_report(calls, Ledger(PRICES)).to_json())


def test_rule_billed_local_and_deployment_calls_report_as_the_ledger_prices_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bedrock: dict[str, Any] = {"provider": "aws.bedrock", "billing": "queries", "usage": None}
    vertex: dict[str, Any] = {"provider": "gcp.vertex_ai", "billing": "queries", "usage": None}
    batch: list[Event] = [
        # by rule: 1 + 1 + 2 + 3 + 3 units, then 3 calls of 2 units plus a per-request rate
        *(
            rerank_event("amazon.rerank-v1:0", document_count=documents, **bedrock)
            for documents in (1, 100, 101, 250, 250)
        ),
        *(  # three calls, each its own call id (one id counts once)
            rerank_event("semantic-ranker-default-004", document_count=150, **vertex)
            for _ in range(3)
        ),
        # local: priced by the user's own rate, else not billed, never unpriced
        embedding_event("priced-embed", provider="ollama", tokens=2000, billing="local"),
        embedding_event("priced-embed", provider="ollama", tokens=None, billing="local"),
        embedding_event("nomic-embed-text", provider="ollama", tokens=7, billing="local"),
        rerank_failed_event(
            "bge-reranker", provider="ollama", billing="local", error_type="ReadTimeout"
        ),
        # an Azure deployment, priced by the model its response reported
        embedding_event(
            "my-embedder",
            provider="azure.ai.openai",
            tokens=1_000_000,
            billing="tokens",
            response_model="text-embedding-3-small",
        ),
    ]
    log = tmp_path / "events.jsonl"
    prices = tmp_path / "prices.json"
    log.write_bytes(b"".join(event_line(event) for event in batch))
    prices.write_text(json.dumps(PRICES_FILE))

    fleet = report_json(log, "--prices", str(prices), capsys=capsys)
    expected = build_spend_report(batch, Ledger(PRICES, warn=False)).to_json()

    assert rows(fleet) == rows(expected)
    assert fleet["status_counts"] == expected["status_counts"]
    assert fleet["unpriced_models"] == expected["unpriced_models"] == []
    assert fleet["status_counts"]["estimated"] == 8
    assert fleet["status_counts"]["not_billed"] == 3
    # 0.001 * 10 units + 0.001 * 6 units + 3 * 0.00001 + 0.5 * 2000 / 1e6 + 0.02
    assert Decimal(fleet["spend"]["USD"]) == Decimal("0.03703")
    assert fleet["spend"] == expected["spend"]
    azure = rows(fleet)[("azure.ai.openai", "my-embedder", "priced", "USD")]
    assert (azure[0], Decimal(azure[1])) == (1, Decimal("0.02"))
    bedrock_row = rows(fleet)[("aws.bedrock", "amazon.rerank-v1:0", "estimated", "USD")]
    assert bedrock_row[3] is None  # the rule's units are an estimate: no billed figure, unknown
