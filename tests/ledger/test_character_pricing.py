"""Pricing by ``input_per_kchar``: a rate per 1,000 billable characters (Vertex AI's text
embedding models), validated like every rate, charged only on a character count the provider
reported. A count it did not report (or sent malformed) is unmetered, never $0; tokens and
characters are two measures of one input, so an entry charges the one it has a rate for and
records the other."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spanledger import EmbeddingEvent, EmbeddingUsage
from spanledger.cli import main
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.ledger import Ledger, PriceTable, PriceTableError, example_prices_path, price_usage

from .conftest import WHEN, embedding_event, embedding_failed_event, entry, table

VERTEX = "gcp.vertex_ai"
KCHAR = entry(VERTEX, "text-embedding-005", input_per_kchar="0.000025")
MTOK = entry(VERTEX, "gemini-embedding-001", input_per_mtok="0.15")


def vertex_event(
    model: str, tokens: int | None, characters: int | None, **more: Any
) -> EmbeddingEvent:
    usage = (
        EmbeddingUsage(input_tokens=tokens, billable_characters=characters)
        if tokens is not None or characters is not None
        else None
    )
    return embedding_event(model, provider=VERTEX, tokens=None, usage=usage, **more)


def price(
    model: str, tokens: int | None, characters: int | None, *rows: dict[str, Any]
) -> CostLine:
    event = vertex_event(model, tokens, characters)
    return Ledger(table(*(rows or (KCHAR, MTOK))), warn=False).price(event)


# --------------------------------------------------------------------------- the table


def test_the_rate_is_read_exactly_and_per_character() -> None:
    [read] = table(KCHAR).entries
    assert read.input_per_kchar == Decimal("0.000025")
    assert read.per_character == Decimal("0.000000025")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (-1, "must not be negative"),
        ("nan", "must be finite"),
        (True, "must be a number"),
        ("lots", "is not a number"),
        (2_000_000, "at most"),
        ("0.0000000000000000000000001", "decimal places"),
    ],
)
def test_a_bad_rate_is_refused_by_name(value: object, says: str) -> None:
    with pytest.raises(PriceTableError, match=says) as refused:
        table(entry(VERTEX, "m", input_per_kchar=value))
    assert "input_per_kchar" in str(refused.value)


def test_an_entry_with_only_this_rate_has_a_rate() -> None:
    assert table(KCHAR).entries[0].per_token is None  # no "no rate given" refusal


def test_two_entries_that_differ_only_in_it_are_ambiguous() -> None:
    prices = table(
        entry(VERTEX, "text-embedding-00*", input_per_kchar="0.000025"),
        entry(VERTEX, "text-embedding-*05", input_per_kchar="0.00002"),
    )
    line = Ledger(prices, warn=False).price(vertex_event("text-embedding-005", 4, 20))
    assert (line.status, line.code) == (CostStatus.UNPRICED, CostCode.AMBIGUOUS_PRICE)


def test_prices_check_knows_the_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        'currency = "USD"\n[[prices]]\nprovider = "gcp.vertex_ai"\n'
        'model = "text-embedding-005"\ninput_per_kchar = "0.000025"\n'
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text().replace('"0.000025"', '"-0.000025"'))
    assert main(["prices", "check", str(good)]) == 0
    assert "1 entry, valid" in capsys.readouterr().out
    assert main(["prices", "check", str(bad)]) == 1
    assert "field 'input_per_kchar': a rate must not be negative" in capsys.readouterr().out


def test_the_example_table_prices_vertex_text_embeddings_by_characters() -> None:
    prices = PriceTable.load(example_prices_path())
    for model in ("text-embedding-005", "text-embedding-004", "text-multilingual-embedding-002"):
        found = prices.lookup(VERTEX, model, WHEN).entry
        assert found is not None, model
        assert found.input_per_kchar == Decimal("0.000025")
        assert found.input_per_mtok is None
    line = Ledger(prices, warn=False).price(vertex_event("text-embedding-005", 4, 2000))
    assert (line.status, line.amount) == (CostStatus.PRICED, Decimal("0.00005"))


# --------------------------------------------------------------------------- pricing


def test_reported_characters_are_charged_and_tokens_recorded() -> None:
    line = price("text-embedding-005", 4, 2000)
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.00005")  # 2,000 characters at $0.000025 per 1,000
    assert line.dimensions == {"billable_characters": Decimal("0.00005")}


def test_reported_zero_characters_are_free() -> None:
    line = price("text-embedding-005", 1, 0)
    assert (line.status, line.amount) == (CostStatus.PRICED, Decimal(0))


def test_characters_not_reported_are_unmetered_not_free() -> None:
    line = price("text-embedding-005", 4, None)
    assert line.status is CostStatus.UNMETERED
    assert line.amount is None
    assert line.code is CostCode.USAGE_NOT_REPORTED
    assert "input_per_kchar" in (line.reason or "")


def test_characters_sent_malformed_are_unmetered_and_said_so() -> None:
    event = vertex_event("text-embedding-005", 4, None, malformed_usage=("billable_characters",))
    line = Ledger(table(KCHAR), warn=False).price(event)
    assert (line.status, line.code) == (CostStatus.UNMETERED, CostCode.USAGE_MALFORMED)


def test_no_usage_at_all_is_unmetered_for_a_character_rate() -> None:
    line = price("text-embedding-005", None, None)
    assert line.status is CostStatus.UNMETERED
    assert line.amount is None


def test_a_per_request_rate_is_still_charged_when_characters_are_unknown() -> None:
    rates = entry(VERTEX, "text-embedding-005", input_per_kchar="0.000025", per_request="0.001")
    line = price("text-embedding-005", 4, None, rates)
    assert (line.status, line.amount) == (CostStatus.UNMETERED, Decimal("0.001"))


def test_a_token_rate_records_the_characters() -> None:
    line = price("gemini-embedding-001", 4, 12)
    assert line.status is CostStatus.PRICED
    assert line.dimensions == {"input_tokens": Decimal("0.15") * 4 / 1_000_000}


def test_a_token_rate_without_reported_tokens_is_unmetered() -> None:
    line = price("gemini-embedding-001", None, 12)
    assert (line.status, line.code) == (CostStatus.UNMETERED, CostCode.USAGE_NOT_REPORTED)


def test_characters_with_no_rate_for_them_are_unpriced() -> None:
    line = price("m", None, 12, entry(VERTEX, "m", per_request="0.001"))
    assert (line.status, line.code) == (CostStatus.UNPRICED, CostCode.MISSING_RATE)
    assert "input_per_kchar" in (line.reason or "")


def test_an_entry_with_both_rates_charges_both() -> None:
    both = entry(VERTEX, "m", input_per_mtok="1", input_per_kchar="1")
    line = price("m", 1000, 1000, both)
    assert line.dimensions == {"input_tokens": Decimal("0.001"), "billable_characters": Decimal(1)}


def test_a_free_character_rate_records_the_tokens() -> None:
    line = price("m", 4, 20, entry(VERTEX, "m", input_per_kchar=0))
    assert (line.status, line.amount) == (CostStatus.PRICED, Decimal(0))


def test_an_abandoned_attempt_estimated_in_tokens_is_unmetered_by_a_character_rate() -> None:
    event = embedding_failed_event(
        "text-embedding-005", provider=VERTEX, estimated=EmbeddingUsage(input_tokens=9)
    )
    line = Ledger(table(KCHAR), warn=False).price(event)
    assert line.status is CostStatus.UNMETERED


def test_price_usage_charges_summed_characters_linearly() -> None:
    once = price_usage(
        table(KCHAR), VERTEX, "text-embedding-005", WHEN, EmbeddingUsage(billable_characters=7)
    )
    many = price_usage(
        table(KCHAR), VERTEX, "text-embedding-005", WHEN, EmbeddingUsage(billable_characters=21)
    )
    assert once.amount is not None
    assert many.amount is not None
    assert many.amount == 3 * once.amount
