"""The ledger's cost lines: priced, unpriced, unmetered, not billed and estimated; the usage
estimates behind abandoned calls; and the warn-once log for gaps in the price table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, localcontext
from typing import Any

import pytest
from structlog.testing import capture_logs

from spanledger import EmbeddingUsage, Recorder, RerankUsage
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.estimates import estimate_embedding_usage, estimate_rerank_usage, token_cost
from spanledger.events import EmbeddingFailedEvent, RerankEvent, RerankFailedEvent
from spanledger.ledger import Ledger, price_usage
from spanledger.providers import CohereReranker, JinaReranker, OpenAIEmbeddings, TEIReranker
from spanledger.testing import StandIn

from .conftest import (
    EXAMPLE_PRICES,
    ListSink,
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

MILLION = Decimal(1_000_000)


def _exact(expression: str) -> Decimal:
    """Evaluate with far more precision than any amount here needs (an independent oracle)."""
    with localcontext() as context:
        context.prec = 200
        return Decimal(eval(expression, {"D": Decimal}))


# --------------------------------------------------------------------------- priced


def test_token_rate_with_many_decimal_places_is_exact() -> None:
    ledger = Ledger(table(entry("openai", "m", input_per_mtok="0.0000001234567")))
    line = ledger.price(embedding_event("m", tokens=7))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.0000000000008641969")
    assert type(line.amount) is Decimal
    assert line.currency == "USD"
    assert line.code is None
    assert line.price_entry == "openai/m"


@pytest.mark.parametrize(
    ("rate", "tokens"),
    [
        ("0.02", 1),
        ("0.13", 999_999),
        ("0.123456789012345678", 123_457),
        ("1234.5678", 3),
        ("0.0000000000000000001", 1_000_001),
    ],
)
def test_token_pricing_matches_independent_decimal_arithmetic(rate: str, tokens: int) -> None:
    ledger = Ledger(table(entry("voyageai", "voyage-3.5", input_per_mtok=rate)))
    line = ledger.price(embedding_event("voyage-3.5", provider="voyageai", tokens=tokens))
    assert line.amount == _exact(f"D('{rate}') * {tokens} / D(1000000)")
    assert line.dimensions == {"input_tokens": line.amount}


def test_amount_is_the_sum_over_every_dimension() -> None:
    prices = table(
        entry(
            "voyageai",
            "rerank-2.5",
            input_per_mtok="0.05",
            per_search_unit="0.0021",
            per_request="0.0001",
        )
    )
    event = rerank_event(
        "rerank-2.5", provider="voyageai", usage=RerankUsage(input_tokens=1234, search_units=2)
    )
    line = Ledger(prices).price(event)
    expected_tokens = _exact("D('0.05') * 1234 / D(1000000)")
    assert line.status is CostStatus.PRICED
    assert line.dimensions == {
        "requests": Decimal("0.0001"),
        "input_tokens": expected_tokens,
        "search_units": Decimal("0.0042"),
    }
    assert line.amount == expected_tokens + Decimal("0.0042") + Decimal("0.0001")


def test_reported_tokens_with_only_a_per_request_rate_are_unpriced() -> None:
    line = Ledger(table(entry("tei", "*", per_request="0.0003"))).price(
        embedding_event("bge", provider="tei", tokens=50, input_count=3)
    )
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.MISSING_RATE
    assert line.amount is None
    assert line.reason is not None
    assert "input_per_mtok" in line.reason


def test_zero_token_count_needs_no_rate() -> None:
    line = Ledger(table(entry("jina", "m", per_request="0.0003"))).price(
        rerank_event("m", provider="jina", usage=RerankUsage(input_tokens=0))
    )
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.0003")


def test_an_explicit_zero_rate_is_free() -> None:
    ledger = Ledger(table(entry("tei", "*", input_per_mtok="0")))
    line = ledger.price(embedding_event("bge", provider="tei", tokens=5000))
    assert line.status is CostStatus.PRICED
    assert line.amount is not None
    assert line.amount == 0
    assert line.reason is None


def test_cohere_rerank_is_priced_by_search_units_not_tokens() -> None:
    prices = table(entry("cohere", "rerank-v3.5", input_per_mtok="1000", per_search_unit="0.002"))
    line = Ledger(prices).price(rerank_event(usage=RerankUsage(search_units=3)))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.006")
    assert set(line.dimensions) == {"search_units"}


def test_real_cohere_rerank_of_250_documents_costs_three_search_units(standin: StandIn) -> None:
    sink = ListSink()
    prices = table(entry("cohere", "rerank-v3.5", per_search_unit="0.002"))
    recorder = Recorder([sink], prices=prices)
    documents = [f"document {n} about tides" for n in range(250)]
    with CohereReranker(
        "rerank-v3.5", base_url=standin.base_url("cohere"), recorder=recorder
    ) as reranker:
        answer = reranker.rerank("tides", documents)
    assert answer.usage == RerankUsage(search_units=3)
    (event,) = sink.events
    assert isinstance(event, RerankEvent)
    assert event.cost is not None
    assert event.cost.status is CostStatus.PRICED
    assert event.cost.amount == Decimal("0.006")


# --------------------------------------------------------------------------- unpriced


def test_no_entry_is_unpriced_never_zero() -> None:
    ledger = Ledger(table(entry("openai", "text-embedding-3-small", input_per_mtok="0.02")))
    line = ledger.price(embedding_event("text-embedding-3-large", tokens=10))
    assert line.status is CostStatus.UNPRICED
    assert line.amount is None
    assert line.code is CostCode.NO_PRICE_ENTRY
    assert line.reason is not None
    assert "openai/text-embedding-3-large" in line.reason
    assert not line.is_known


def test_other_provider_with_same_model_is_unpriced() -> None:
    ledger = Ledger(table(entry("openai", "shared-name", input_per_mtok="1")))
    line = ledger.price(embedding_event("shared-name", provider="voyageai"))
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.NO_PRICE_ENTRY


def test_jina_rerank_tokens_with_only_a_search_unit_rate_is_unpriced_naming_the_rate() -> None:
    ledger = Ledger(table(entry("jina", "jina-reranker-*", per_search_unit="0.002")))
    event = rerank_event("jina-reranker-v2", provider="jina", usage=RerankUsage(input_tokens=4000))
    line = ledger.price(event)
    assert line.status is CostStatus.UNPRICED
    assert line.amount is None
    assert line.code is CostCode.MISSING_RATE
    assert line.reason is not None
    assert "input_per_mtok" in line.reason


def test_missing_rate_is_unpriced_even_with_a_per_request_rate() -> None:
    ledger = Ledger(table(entry("voyageai", "rerank-2", per_request="0.01")))
    event = rerank_event("rerank-2", provider="voyageai", usage=RerankUsage(input_tokens=10))
    line = ledger.price(event)
    assert line.status is CostStatus.UNPRICED
    assert line.amount is None
    assert line.reason is not None
    assert "input_per_mtok" in line.reason


def test_ambiguous_entries_are_unpriced_naming_both() -> None:
    prices = table(
        entry("jina", "abc-*", input_per_mtok="1"),
        entry("jina", "*-xyz", input_per_mtok="2"),
    )
    line = Ledger(prices).price(embedding_event("abc-xyz", provider="jina", tokens=1_000_000))
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.AMBIGUOUS_PRICE
    assert line.amount is None
    assert line.reason is not None
    assert "jina/abc-*" in line.reason
    assert "jina/*-xyz" in line.reason


def test_ambiguous_currencies_are_unpriced() -> None:
    prices = table(
        entry("jina", "abc-*", input_per_mtok="1", currency="EUR"),
        entry("jina", "*-xyz", input_per_mtok="1", currency="USD"),
    )
    line = Ledger(prices).price(embedding_event("abc-xyz", provider="jina"))
    assert line.code is CostCode.AMBIGUOUS_PRICE
    assert line.amount is None


def test_equally_specific_entries_with_equal_rates_price() -> None:
    prices = table(
        entry("jina", "abc-*", input_per_mtok="2"),
        entry("jina", "*-xyz", input_per_mtok="2.00"),
    )
    line = Ledger(prices).price(embedding_event("abc-xyz", provider="jina", tokens=1_000_000))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal(2)


def test_exact_and_specific_glob_precedence_in_cost_lines() -> None:
    prices = table(
        entry("openai", "*", input_per_mtok="100"),
        entry("openai", "text-embedding-*", input_per_mtok="10"),
        entry("openai", "text-embedding-3-small", input_per_mtok="1"),
    )
    ledger = Ledger(prices)
    million = 1_000_000
    assert ledger.price(embedding_event("text-embedding-3-small", tokens=million)).amount == 1
    assert ledger.price(embedding_event("text-embedding-ada-002", tokens=million)).amount == 10
    assert ledger.price(embedding_event("other", tokens=million)).amount == 100


def test_mid_month_price_change_prices_each_event_by_its_start() -> None:
    prices = table(
        entry("openai", "m", input_per_mtok="0.10", valid_until="2025-03-15"),
        entry("openai", "m", input_per_mtok="0.20", valid_from="2025-03-15"),
    )
    ledger = Ledger(prices)
    before = embedding_event(
        "m", tokens=1_000_000, started_at=datetime(2025, 3, 14, 23, 59, tzinfo=UTC)
    )
    after = embedding_event("m", tokens=1_000_000, started_at=datetime(2025, 3, 15, tzinfo=UTC))
    assert ledger.price(before).amount == Decimal("0.10")
    assert ledger.price(after).amount == Decimal("0.20")


# --------------------------------------------------------------------------- unmetered


def test_no_usage_with_a_per_request_rate_charges_only_that() -> None:
    ledger = Ledger(table(entry("openai", "m", input_per_mtok="0.02", per_request="0.0005")))
    line = ledger.price(embedding_event("m", tokens=None))
    assert line.status is CostStatus.UNMETERED
    assert line.amount == Decimal("0.0005")
    assert line.currency == "USD"
    assert line.code is CostCode.USAGE_NOT_REPORTED


def test_no_usage_without_a_per_request_rate_is_unknown_not_zero() -> None:
    ledger = Ledger(table(entry("openai", "m", input_per_mtok="0.02")))
    line = ledger.price(embedding_event("m", tokens=None))
    assert line.status is CostStatus.UNMETERED
    assert line.amount is None
    assert line.code is CostCode.USAGE_NOT_REPORTED
    assert line.reason


@pytest.mark.parametrize("per_request", ["0", "0.0005"])
def test_no_usage_with_only_a_per_request_rate_is_priced(per_request: str) -> None:
    # An entry that charges per request only needs no usage figure: the whole cost is known
    # (self-hosted TEI at an explicit 0 is free, not unmetered).
    ledger = Ledger(table(entry("tei", "*", per_request=per_request)))
    line = ledger.price(rerank_event("bge-reranker", provider="tei", usage=None))
    assert line.amount == Decimal(per_request)
    assert line.status is CostStatus.PRICED
    assert line.code is None


def test_no_usage_with_per_request_and_a_usage_rate_is_unmetered() -> None:
    ledger = Ledger(table(entry("tei", "*", per_request="0.0005", input_per_mtok="0.1")))
    line = ledger.price(rerank_event("bge-reranker", provider="tei", usage=None))
    assert line.amount == Decimal("0.0005")
    assert line.status is CostStatus.UNMETERED
    assert line.code is CostCode.USAGE_NOT_REPORTED


def test_real_call_with_missing_or_malformed_usage_is_unmetered(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=table(entry("openai", "usage-*", input_per_mtok="0.02")))
    for model in ("usage-missing", "usage-malformed"):
        with OpenAIEmbeddings(
            model, base_url=standin.base_url("openai"), recorder=recorder
        ) as embedder:
            embedder.embed(["hello"])
    lines = [event.cost for event in sink.events]
    assert len(lines) == 2
    for line in lines:
        assert line is not None
        assert line.status is CostStatus.UNMETERED
        assert line.amount is None
    missing, malformed = lines
    assert missing is not None
    assert malformed is not None
    assert missing.code is CostCode.USAGE_NOT_REPORTED
    assert malformed.code is CostCode.USAGE_MALFORMED  # garbage, told apart from absence
    assert malformed.reason is not None
    assert "(input_tokens) was not a count" in malformed.reason


# --------------------------------------------------------------------------- failures


def test_failed_call_is_not_billed_with_a_reason() -> None:
    ledger = Ledger(table(entry("openai", "m", input_per_mtok="0.02")))
    line = ledger.price(embedding_failed_event("m", category=ErrorCategory.RATE_LIMIT))
    assert line.status is CostStatus.NOT_BILLED
    assert line.amount == Decimal(0)
    assert line.code is CostCode.FAILED_UNBILLED
    assert line.reason is not None
    assert "failed" in line.reason
    assert ErrorCategory.RATE_LIMIT.value in line.reason


def test_failed_call_without_a_price_entry_is_still_not_billed() -> None:
    line = Ledger(table(entry("x", "y", per_request="1"))).price(rerank_failed_event("nope"))
    assert line.status is CostStatus.NOT_BILLED
    assert line.amount == 0


def test_abandoned_call_is_estimated_from_its_estimate() -> None:
    ledger = Ledger(table(entry("openai", "m", input_per_mtok="0.5")))
    line = ledger.price(embedding_failed_event("m", estimated=EmbeddingUsage(input_tokens=4000)))
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.002")
    assert line.reason is not None
    assert "estimated" in line.reason
    assert line.is_known


def test_abandoned_rerank_is_estimated_in_search_units() -> None:
    ledger = Ledger(table(entry("cohere", "rerank-v3.5", per_search_unit="0.002")))
    line = ledger.price(rerank_failed_event(estimated=RerankUsage(search_units=3)))
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.006")


def test_abandoned_call_with_no_entry_is_unpriced() -> None:
    line = Ledger(table(entry("x", "y", per_request="1"))).price(
        rerank_failed_event("nope", estimated=RerankUsage(search_units=1))
    )
    assert line.status is CostStatus.UNPRICED
    assert line.amount is None


def test_real_rerank_timeout_is_estimated_in_search_units(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=table(entry("cohere", "slow-*", per_search_unit="0.002")))
    documents = [f"doc {n}" for n in range(250)]
    with (
        CohereReranker(
            "slow-1500", base_url=standin.base_url("cohere"), recorder=recorder
        ) as reranker,
        pytest.raises(ProviderError),
    ):
        reranker.rerank("query", documents, timeout=0.2)
    (event,) = sink.events
    assert isinstance(event, RerankFailedEvent)
    assert event.error_type == "ReadTimeout"
    assert event.estimated_usage == RerankUsage(search_units=3)
    assert event.cost is not None
    assert event.cost.status is CostStatus.ESTIMATED
    assert event.cost.amount == Decimal("0.006")
    assert event.latency_ms < 1400


def test_real_token_rerank_timeout_is_estimated_from_utf8_bytes(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=table(entry("jina", "slow-*", input_per_mtok="2")))
    query, documents = "é", ["日本語x", "ab"]  # pairs of 12 and 4 bytes: 16 bytes, 4 tokens
    with (
        JinaReranker("slow-1500", base_url=standin.base_url("jina"), recorder=recorder) as step,
        pytest.raises(ProviderError),
    ):
        step.rerank(query, documents, timeout=0.2)
    (event,) = sink.events
    assert isinstance(event, RerankFailedEvent)
    assert event.estimated_usage == RerankUsage(input_tokens=4)
    assert event.cost is not None
    assert event.cost.status is CostStatus.ESTIMATED
    assert event.cost.amount == _exact("D(2) * 4 / D(1000000)")


def test_real_embedding_timeout_is_estimated_from_utf8_bytes(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=table(entry("openai", "slow-*", input_per_mtok="1")))
    inputs = ["日本語", "éé"]  # 9 + 4 bytes -> 4 tokens
    with (
        OpenAIEmbeddings("slow-1500", base_url=standin.base_url("openai"), recorder=recorder) as e,
        pytest.raises(ProviderError),
    ):
        e.embed(inputs, timeout=0.2)
    (event,) = sink.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.estimated_usage == EmbeddingUsage(input_tokens=4)
    assert event.cost is not None
    assert event.cost.status is CostStatus.ESTIMATED
    assert event.cost.amount == Decimal("0.000004")


def test_real_failure_status_is_not_billed(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=table(entry("cohere", "*", per_search_unit="1")))
    with (
        CohereReranker("fail-500", base_url=standin.base_url("cohere"), recorder=recorder) as r,
        pytest.raises(ProviderError),
    ):
        r.rerank("q", ["d"])
    (event,) = sink.events
    assert isinstance(event, RerankFailedEvent)
    assert event.estimated_usage is None
    assert event.cost is not None
    assert event.cost.status is CostStatus.NOT_BILLED
    assert event.cost.amount == 0


def test_real_tei_rerank_with_example_table_costs_an_explicit_zero(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=EXAMPLE_PRICES)
    with TEIReranker(
        "BAAI/bge-reranker-base", base_url=standin.base_url("tei"), recorder=recorder
    ) as tei:
        tei.rerank("q", ["a", "b"])
    (event,) = sink.events
    assert isinstance(event, RerankEvent)
    assert event.usage is None
    assert event.cost is not None
    assert event.cost.amount == 0
    assert event.cost.currency == "USD"


# --------------------------------------------------------------------------- estimates


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("é", 1),
        ("日本語", 3),
        ("🙂", 1),
        ("🙂a", 2),
        ("ééé", 2),
        ("日本語日本語日本", 6),
    ],
)
def test_token_estimate_is_ceil_of_utf8_bytes_over_four(text: str, tokens: int) -> None:
    assert token_cost(text) == tokens


def test_embedding_estimate_counts_utf8_bytes() -> None:
    assert estimate_embedding_usage("tokens", ["日本語", "éé"]) == EmbeddingUsage(input_tokens=4)
    assert estimate_embedding_usage("tokens", ["🙂🙂🙂"]) == EmbeddingUsage(input_tokens=3)
    assert estimate_embedding_usage(None, ["abc"]) is None


def test_rerank_token_estimate_counts_the_query_with_every_document() -> None:
    # query "é" (2 bytes) with "日本語x" (10) and "ab" (2): 12 + 4 = 16 bytes -> 4 tokens
    assert estimate_rerank_usage("tokens", "é", ["日本語x", "ab"]) == RerankUsage(input_tokens=4)
    # query "abcd" (4 bytes) with three 4-byte documents: 3 * 8 = 24 bytes -> 6 tokens
    usage = estimate_rerank_usage("tokens", "abcd", ["🙂", "éé", "wxyz"])
    assert usage == RerankUsage(input_tokens=6)


@pytest.mark.parametrize(("documents", "units"), [(1, 1), (100, 1), (101, 2), (250, 3), (300, 3)])
def test_cohere_search_units_are_one_per_hundred_documents(documents: int, units: int) -> None:
    usage = estimate_rerank_usage("search_units", "q", ["d"] * documents)
    assert usage == RerankUsage(search_units=units)


def test_no_estimate_for_a_vendor_that_bills_nothing() -> None:
    assert estimate_rerank_usage(None, "q", ["d"]) is None


# --------------------------------------------------------------------------- odd input


@pytest.mark.parametrize(
    "model", ["org/model:v1@sha256:abc", "模型-é-🙂", "model with spaces", "a[b]", "x*y?z"]
)
def test_models_with_odd_characters_are_priced_by_their_exact_entry(model: str) -> None:
    prices = table(
        entry("openai", model, input_per_mtok="1"),
        entry("openai", "*", input_per_mtok="50"),
    )
    line = Ledger(prices).price(embedding_event(model, tokens=1_000_000))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal(1)
    assert line.price_entry == f"openai/{model}"


def test_glob_entry_matches_names_with_slashes_and_unicode() -> None:
    ledger = Ledger(table(entry("tei", "org/*", input_per_mtok="0.25")))
    for model in ("org/model:v1@sha", "org/模型", "org/a[b]"):
        line = ledger.price(embedding_event(model, provider="tei", tokens=1_000_000))
        assert line.status is CostStatus.PRICED, model
        assert line.amount == Decimal("0.25"), model
    assert ledger.price(embedding_event("other/model", provider="tei")).amount is None


def test_price_usage_is_callable_directly() -> None:
    line = price_usage(
        table(entry("p", "m", input_per_mtok="3")),
        "p",
        "m",
        datetime(2025, 1, 1, tzinfo=UTC),
        EmbeddingUsage(input_tokens=2),
        estimated=True,
    )
    assert line == CostLine(
        status=CostStatus.ESTIMATED,
        amount=Decimal("0.000006"),
        currency="USD",
        reason=line.reason,
        dimensions={"input_tokens": Decimal("0.000006")},
        price_entry="p/m",
    )
    assert line.reason is not None


# --------------------------------------------------------------------------- warn once


def _warnings(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [log for log in logs if log.get("event") == "usage_not_priced"]


def test_one_warning_per_provider_model_and_reason() -> None:
    prices = table(
        entry("openai", "metered", input_per_mtok="1"),
        entry("jina", "tokens-missing", per_search_unit="1"),
    )
    ledger = Ledger(prices)
    with capture_logs() as logs:
        for _ in range(3):
            ledger.price(embedding_event("unknown-model"))
            ledger.price(embedding_event("metered", tokens=None))
            ledger.price(
                rerank_event("tokens-missing", provider="jina", usage=RerankUsage(input_tokens=5))
            )
            ledger.price(embedding_event("metered", tokens=5))  # priced: never warned
            ledger.price(embedding_failed_event("unknown-model"))  # not billed: never warned
        Ledger(prices).price(embedding_event("unknown-model"))  # the dedup is process-wide
        ledger.price(embedding_event("unknown-model", provider="voyageai"))
    warned = _warnings(logs)
    assert sorted((str(w["provider"]), str(w["model"]), str(w["status"])) for w in warned) == [
        ("jina", "tokens-missing", "unpriced"),
        ("openai", "metered", "unmetered"),
        ("openai", "unknown-model", "unpriced"),
        ("voyageai", "unknown-model", "unpriced"),
    ]
    assert all(w["log_level"] == "warning" for w in warned)
    assert all(w["reason"] for w in warned)


def test_one_model_warns_again_for_a_different_reason() -> None:
    with capture_logs() as logs:
        Ledger(table(entry("x", "y", per_request="1"))).price(embedding_event("m"))
        Ledger(table(entry("openai", "m", per_search_unit="1"))).price(embedding_event("m"))
        Ledger(table(entry("openai", "m", per_search_unit="1"))).price(embedding_event("m"))
    reasons = [str(w["reason"]) for w in _warnings(logs)]
    assert len(reasons) == 2
    assert "no price entry" in reasons[0]
    assert "input_per_mtok" in reasons[1]


def test_ledger_without_warnings_logs_nothing() -> None:
    with capture_logs() as logs:
        Ledger(table(entry("x", "y", per_request="1")), warn=False).price(embedding_event("m"))
    assert _warnings(logs) == []
