"""A model with no price entry of its own is looked up by the model the response reported: an
Azure OpenAI event's ``model`` is the deployment name, its ``response_model`` the model that
deployment serves. The cost line names the entry used and says why."""

from __future__ import annotations

from decimal import Decimal

from spanledger.costs import CostCode, CostStatus
from spanledger.events import EmbeddingEvent, RerankUsage
from spanledger.ledger import Ledger, PriceTable
from tests.ledger.conftest import EXAMPLE_PRICES, embedding_event, entry, rerank_event, table


def azure(
    model: str = "my-embedder", response_model: str | None = "text-embedding-3-small"
) -> EmbeddingEvent:
    return embedding_event(
        model, provider="azure.ai.openai", tokens=1_000_000, response_model=response_model
    )


def test_a_deployment_without_an_entry_is_priced_by_the_model_the_response_reported() -> None:
    line = Ledger(PriceTable.load(EXAMPLE_PRICES)).price(azure())
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.02")
    assert line.price_entry == "azure.ai.openai/text-embedding-3-small"
    assert line.reason is not None
    assert "azure.ai.openai/my-embedder" in line.reason
    assert "text-embedding-3-small" in line.reason


def test_an_entry_for_the_deployment_itself_wins() -> None:
    prices = table(
        entry("azure.ai.openai", "my-embedder", input_per_mtok="0.5"),
        entry("azure.ai.openai", "text-embedding-3-small", input_per_mtok="0.02"),
    )
    line = Ledger(prices).price(azure())
    assert line.amount == Decimal("0.5")
    assert line.price_entry == "azure.ai.openai/my-embedder"
    assert line.reason is None


def test_a_glob_matching_the_deployment_wins_too() -> None:
    prices = table(
        entry("azure.ai.openai", "my-*", input_per_mtok="0.5"),
        entry("azure.ai.openai", "text-embedding-3-small", input_per_mtok="0.02"),
    )
    assert Ledger(prices).price(azure()).price_entry == "azure.ai.openai/my-*"


def test_with_neither_entry_the_call_is_unpriced_naming_both() -> None:
    line = Ledger(table(entry("openai", "x", input_per_mtok="1")), warn=False).price(azure())
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.NO_PRICE_ENTRY
    assert line.amount is None
    assert "my-embedder" in (line.reason or "")
    assert "text-embedding-3-small" in (line.reason or "")


def test_without_a_response_model_nothing_else_is_looked_up() -> None:
    line = Ledger(PriceTable.load(EXAMPLE_PRICES), warn=False).price(azure(response_model=None))
    assert line.status is CostStatus.UNPRICED
    assert line.reason == "no price entry for azure.ai.openai/my-embedder"


def test_an_ambiguous_entry_for_the_deployment_is_not_resolved_by_the_response_model() -> None:
    prices = table(
        entry("azure.ai.openai", "my-*", input_per_mtok="0.5"),
        entry("azure.ai.openai", "*der", input_per_mtok="0.7"),  # as specific as my-*
        entry("azure.ai.openai", "text-embedding-3-small", input_per_mtok="0.02"),
    )
    line = Ledger(prices, warn=False).price(azure())
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.AMBIGUOUS_PRICE


def test_the_response_models_entry_names_a_missing_rate_and_says_how_it_was_found() -> None:
    prices = table(entry("azure.ai.openai", "text-embedding-3-small", per_request="0.1"))
    line = Ledger(prices, warn=False).price(azure())
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.MISSING_RATE
    assert line.price_entry == "azure.ai.openai/text-embedding-3-small"
    assert "my-embedder" in (line.reason or "")


def test_unmetered_by_the_response_models_entry() -> None:
    line = Ledger(PriceTable.load(EXAMPLE_PRICES), warn=False).price(
        embedding_event(
            "my-embedder",
            provider="azure.ai.openai",
            tokens=None,
            response_model="text-embedding-3-large",
        )
    )
    assert line.status is CostStatus.UNMETERED
    assert line.price_entry == "azure.ai.openai/text-embedding-3-large"
    assert "my-embedder" in (line.reason or "")


def test_a_rerank_is_looked_up_by_its_response_model_too() -> None:
    prices = table(entry("cohere", "rerank-v3.5", per_search_unit="0.002"))
    event = rerank_event(
        "rerank-latest", usage=RerankUsage(search_units=2), response_model="rerank-v3.5"
    )
    line = Ledger(prices).price(event)
    assert (line.status, line.amount) == (CostStatus.PRICED, Decimal("0.004"))
    assert line.price_entry == "cohere/rerank-v3.5"
