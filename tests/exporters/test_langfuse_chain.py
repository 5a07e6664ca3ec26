"""A rerank chain through a real ``langfuse.Langfuse`` client: one ``chain`` observation with
the step calls nested under it, its outcome and attempts in the metadata, nothing of the text."""

from __future__ import annotations

import json
from typing import Any

import spanledger
from spanledger.providers.fallback import BM25Step, with_fallback

from .conftest import SENTINEL, LangfuseRig, Providers

TYPE = "langfuse.observation.type"
LEVEL = "langfuse.observation.level"
METADATA = "langfuse.observation.metadata."


def metadata_of(attributes: dict[str, Any]) -> dict[str, Any]:
    return {
        key[len(METADATA) :]: json.loads(str(value))
        for key, value in attributes.items()
        if key.startswith(METADATA)
    }


def test_a_chain_is_one_observation_with_its_calls_under_it(
    langfuse_rig: LangfuseRig, providers: Providers
) -> None:
    failing = providers.reranker("cohere", "fail-503", langfuse_rig.recorder)
    documents = [f"{SENTINEL} the moon and the tides", "clocks tick"]
    with spanledger.use(langfuse_rig.recorder), spanledger.request("turn-1"):
        outcome = with_fallback([failing, BM25Step()], f"{SENTINEL} tides", documents)

    assert outcome.status == "degraded"
    spans = {span.name: span for span in langfuse_rig.spans()}
    chain, call, request = spans["rerank_chain"], spans["rerank fail-503"], spans["request"]
    attributes = dict(chain.attributes or {})
    assert attributes[TYPE] == "chain"
    assert attributes[LEVEL] == "WARNING"
    assert call.parent is not None
    assert call.parent.span_id == chain.context.span_id
    assert chain.parent is not None
    assert chain.parent.span_id == request.context.span_id
    metadata = metadata_of(attributes)
    assert metadata["status"] == "degraded"
    assert metadata["answered_by"] == 2
    assert [(a["kind"], a["status"]) for a in metadata["attempts"]] == [
        ("provider", "failed"),
        ("bm25", "ok"),
    ]
    assert metadata["attempts"][0]["reason"] == "provider_unavailable"
    everything = "\n".join(
        f"{k}={v!r}" for s in spans.values() for k, v in (s.attributes or {}).items()
    )
    assert SENTINEL not in everything


def test_an_invalid_request_is_an_error_observation(langfuse_rig: LangfuseRig) -> None:
    with spanledger.use(langfuse_rig.recorder):
        outcome = with_fallback([BM25Step()], "   ", ["a document"])
    assert outcome.status == "invalid_request"
    span = langfuse_rig.only_span()
    attributes = dict(span.attributes or {})
    assert span.name == "rerank_chain"
    assert attributes[LEVEL] == "ERROR"
    assert metadata_of(attributes)["status"] == "invalid_request"
