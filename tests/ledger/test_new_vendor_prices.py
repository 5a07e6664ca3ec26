"""Prices for the cloud vendors, Mistral and local models: the example table's dated entries
(each rate from genai-prices' data where it has one, else a vendor list price named in the
note) and the genai-prices import under spanledger's provider names."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from genai_prices.data import providers as bundled
from genai_prices.types import ClauseEquals, ModelInfo, ModelPrice, Provider

from spanledger.costs import CostStatus
from spanledger.ledger import Ledger, PriceEntry, PriceTable
from spanledger.ledger.imported import (
    LANGUAGE_MODEL_PROVIDERS,
    PROVIDERS,
    convert_genai_prices,
    read_genai_prices,
)
from tests.ledger.conftest import EXAMPLE_PRICES, embedding_event, rerank_event

CHECKED = date(2026, 12, 1)
NEW_ENTRIES = {
    ("aws.bedrock", "amazon.titan-embed-text-v1"): ("input_per_mtok", "0.1"),
    ("aws.bedrock", "amazon.titan-embed-text-v2:0"): ("input_per_mtok", "0.02"),
    ("aws.bedrock", "cohere.embed-english-v3"): ("input_per_mtok", "0.1"),
    ("aws.bedrock", "cohere.embed-multilingual-v3"): ("input_per_mtok", "0.1"),
    ("aws.bedrock", "cohere.embed-v4:0"): ("input_per_mtok", "0.12"),
    ("aws.bedrock", "amazon.rerank-v1:0"): ("per_search_unit", "0.001"),
    ("aws.bedrock", "cohere.rerank-v3-5:0"): ("per_search_unit", "0.002"),
    ("gcp.gemini", "gemini-embedding-001"): ("input_per_mtok", "0.15"),
    ("gcp.vertex_ai", "gemini-embedding-001"): ("input_per_mtok", "0.15"),
    ("gcp.vertex_ai", "semantic-ranker-default-004"): ("per_search_unit", "0.001"),
    ("mistral_ai", "mistral-embed"): ("input_per_mtok", "0.1"),
    ("azure.ai.openai", "text-embedding-3-small"): ("input_per_mtok", "0.02"),
    ("azure.ai.openai", "text-embedding-3-large"): ("input_per_mtok", "0.13"),
}
GENAI_PROVIDER = {
    "aws.bedrock": "aws",
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",  # genai-prices' google covers googleapis.com, Vertex AI's host
    "azure.ai.openai": "azure",
    "mistral_ai": "mistral",
}
"""spanledger provider -> the genai-prices 0.2.x provider whose data the example cites."""


def example() -> dict[tuple[str, str], PriceEntry]:
    return {(e.provider, e.model): e for e in PriceTable.load(EXAMPLE_PRICES).entries}


def genai_rate(provider_id: str, model_id: str) -> Decimal | None:
    for provider in bundled:
        if provider.id != provider_id:
            continue
        for model in provider.models:
            if model.id == model_id and isinstance(model.prices, ModelPrice):
                rate = model.prices.input_mtok
                return rate if isinstance(rate, Decimal) else None
    return None


@pytest.mark.parametrize(("key", "rate"), NEW_ENTRIES.items(), ids=lambda v: "/".join(v))
def test_the_example_table_has_a_dated_noted_entry_for_each_new_model(
    key: tuple[str, str], rate: tuple[str, str]
) -> None:
    entry = example()[key]
    field, value = rate
    assert getattr(entry, field) == Decimal(value)
    others = {"input_per_mtok", "per_search_unit", "per_request"} - {field}
    assert all(getattr(entry, name) is None for name in others)
    assert entry.checked == CHECKED
    assert entry.note


def test_each_example_rate_citing_genai_prices_is_the_rate_it_has() -> None:
    cited = 0
    for (provider, model), entry in example().items():
        if not (entry.note or "").startswith("genai-prices"):
            continue
        source = (entry.note or "").split("provider ", 1)[1].split()[0].rstrip(":")
        if provider in GENAI_PROVIDER:
            assert source == GENAI_PROVIDER[provider], entry.label
        assert entry.input_per_mtok == genai_rate(source, model), entry.label
        cited += 1
    assert cited >= 7


def test_an_example_rate_not_from_genai_prices_is_one_it_does_not_have() -> None:
    for (provider, model), entry in example().items():
        if (provider, model) in NEW_ENTRIES and "not in genai-prices" in (entry.note or ""):
            assert genai_rate(GENAI_PROVIDER[provider], model) is None, entry.label


def test_titan_v1_and_v2_are_priced_at_their_own_rates() -> None:
    ledger = Ledger(PriceTable.load(EXAMPLE_PRICES))
    v1 = ledger.price(
        embedding_event("amazon.titan-embed-text-v1", provider="aws.bedrock", tokens=10**6)
    )
    v2 = ledger.price(
        embedding_event("amazon.titan-embed-text-v2:0", provider="aws.bedrock", tokens=10**6)
    )
    assert (v1.amount, v1.price_entry) == (Decimal("0.1"), "aws.bedrock/amazon.titan-embed-text-v1")
    assert (v2.amount, v2.price_entry) == (
        Decimal("0.02"),
        "aws.bedrock/amazon.titan-embed-text-v2:0",
    )


def test_the_example_table_prices_a_bedrock_rerank_by_the_query_rule() -> None:
    event = rerank_event(
        "cohere.rerank-v3-5:0",
        provider="aws.bedrock",
        usage=None,
        billing="queries",
        document_count=230,
    )
    line = Ledger(PriceTable.load(EXAMPLE_PRICES)).price(event)
    assert (line.status, line.amount) == (CostStatus.ESTIMATED, Decimal("0.006"))


# The import


def imported_entries() -> dict[tuple[str, str], PriceEntry]:
    return {(e.provider, e.model): e for e in read_genai_prices(today=CHECKED).entries}


def bundled_ids() -> set[str]:
    return {provider.id for provider in bundled}


def test_the_import_takes_the_new_vendors_under_spanledgers_names() -> None:
    entries = imported_entries()
    providers = {provider for provider, _ in entries}
    known = {**PROVIDERS, **LANGUAGE_MODEL_PROVIDERS}
    expected = {known[source] for source in bundled_ids() & set(known)}
    assert providers == expected
    for name in ("aws", "google", "azure", "mistral"):
        if name in bundled_ids():
            assert PROVIDERS[name] in providers, name
    assert not providers & {"aws", "google", "azure", "mistral", "bedrock", "vertex"}


def test_the_import_gives_titan_v1_and_v2_their_own_rates() -> None:
    v1 = genai_rate("aws", "amazon.titan-embed-text-v1")
    v2 = genai_rate("aws", "amazon.titan-embed-text-v2:0")
    if v1 is None or v2 is None:
        pytest.skip("this genai-prices lists no input rate for both Titan text embedders")
    entries = imported_entries()
    titan_v1 = entries[("aws.bedrock", "amazon.titan-embed-text-v1")]
    titan_v2 = entries[("aws.bedrock", "amazon.titan-embed-text-v2:0")]
    assert titan_v1.input_per_mtok == v1
    assert titan_v2.input_per_mtok == v2
    assert titan_v1.input_per_mtok != titan_v2.input_per_mtok
    # and a table of them prices each by its own entry
    table = PriceTable(list(entries.values()))
    at = datetime.now(UTC)
    assert table.lookup("aws.bedrock", "amazon.titan-embed-text-v1", at).entry == titan_v1
    assert table.lookup("aws.bedrock", "amazon.titan-embed-text-v2:0", at).entry == titan_v2


def test_the_import_keeps_embedding_models_whole_and_language_models_by_input_rate() -> None:
    for (provider, model), entry in imported_entries().items():
        if provider in {"aws.bedrock", "gcp.gemini", "azure.ai.openai", "mistral_ai"}:
            assert "rerank" not in model, (provider, model)
            if "embed" not in model:
                assert "input rate only" in (entry.note or ""), (provider, model)


def test_an_embedding_models_output_rate_is_left_out_and_said_so() -> None:
    mistral = ModelInfo(
        id="mistral-embed",
        match=ClauseEquals(equals="mistral-embed"),
        prices=ModelPrice(input_mtok=Decimal("0.1"), output_mtok=Decimal("0.1")),
    )
    data = [Provider(id="mistral", name="Mistral", api_pattern="", models=[mistral])]
    [entry] = convert_genai_prices(data, version="9", today=CHECKED).entries
    assert (entry.provider, entry.model) == ("mistral_ai", "mistral-embed")
    assert entry.input_per_mtok == Decimal("0.1")
    assert "output_mtok rate is left out" in (entry.note or "")


def test_two_ids_of_one_vendor_do_not_list_a_model_twice() -> None:
    titan = ModelInfo(
        id="amazon.titan-embed-text-v2:0",
        match=ClauseEquals(equals="amazon.titan-embed-text-v2:0"),
        prices=ModelPrice(input_mtok=Decimal("0.02")),
    )
    data = [
        Provider(id="aws", name="AWS", api_pattern="", models=[titan]),
        Provider(id="bedrock", name="Bedrock", api_pattern="", models=[titan]),
    ]
    imported = convert_genai_prices(data, version="9", today=CHECKED)
    assert [e.label for e in imported.entries] == ["aws.bedrock/amazon.titan-embed-text-v2:0"]
    assert imported.skipped == {"listed twice": ["aws.bedrock/amazon.titan-embed-text-v2:0"]}
    imported.toml()  # and it reads back


def test_a_rerank_is_never_imported_for_the_new_vendors() -> None:
    assert not [key for key in imported_entries() if "rerank" in key[1]]
