"""A chain's attempts on rule-billed and local rerankers price as their calls do."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx

from spanledger.costs import CostCode, CostStatus
from spanledger.ledger import PriceTable, price_outcome
from spanledger.providers import VertexReranker
from spanledger.providers.fallback import with_fallback

TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "prices": [
            {
                "provider": "gcp.vertex_ai",
                "model": "semantic-ranker-default-004",
                "per_search_unit": "0.001",
                "checked": "2026-12-01",
            }
        ],
    }
)


def ranking(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    records = body["records"][: body.get("topN", 1000)]
    return httpx.Response(
        200,
        json={"records": [{"id": r["id"], "score": 1 - i / 1000} for i, r in enumerate(records)]},
    )


def test_an_answered_rule_billed_step_is_estimated_by_the_documents_it_was_sent() -> None:
    client = httpx.Client(transport=httpx.MockTransport(ranking))
    step = VertexReranker(
        "semantic-ranker-default-004", project="p", api_key="t", http_client=client
    )
    outcome = with_fallback([step], "q", [f"d{n}" for n in range(150)], top_k=3)
    (attempt,) = outcome.attempts
    assert (attempt.usage, attempt.billing, attempt.document_count) == (None, "queries", 150)
    (line,) = price_outcome(TABLE, outcome)
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.002")  # two queries of up to 100 documents
    assert line.code is not CostCode.USAGE_NOT_REPORTED


def test_a_local_step_is_priced_by_your_compute_rate_and_else_not_billed() -> None:
    from spanledger.costs import CostStatus as Status
    from spanledger.providers.fallback import BM25Step

    outcome = with_fallback([BM25Step()], "tides", ["the moon and the tides", "clocks"])
    (attempt,) = outcome.attempts
    assert attempt.duration_ms is not None
    (free,) = price_outcome(TABLE, outcome)
    assert (free.status, free.code, free.amount) == (
        Status.NOT_BILLED,
        CostCode.LOCAL_MODEL,
        Decimal(0),
    )
    rated = PriceTable.from_dict(
        {
            "currency": "USD",
            "prices": [
                {
                    "provider": "rank_bm25",
                    "model": "bm25okapi",
                    "per_compute_second": "2",
                    "checked": "2026-12-01",
                }
            ],
        }
    )
    (line,) = price_outcome(rated, outcome)
    assert line.status is Status.PRICED
    assert line.amount == Decimal(2) * Decimal(int(attempt.duration_ms * 1000)) / 1_000_000
