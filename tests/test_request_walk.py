"""Reading a recognised request's facts is one call of the recording core that only goes down:
into ``wire/`` and the ground floor, never back up into capture or instrumentation."""

from __future__ import annotations

import httpx

from spanledger.capture.vendors import recognise
from spanledger.recording.facts import RerankFacts, request_facts
from tests.walk import layers, walking


def test_reading_a_requests_facts_never_climbs_above_the_recording_core() -> None:
    height = layers()
    url = httpx.URL("https://api.cohere.com/v2/rerank")
    body = {"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"], "top_n": 2}
    endpoint = recognise(url, body, {})
    assert endpoint is not None
    with walking() as walk:
        facts = request_facts(endpoint, body, url)
    assert isinstance(facts, RerankFacts)
    assert (facts.model, facts.document_count, facts.top_k) == ("rerank-v3.5", 2, 2)
    assert walk.stops[0] == "spanledger.recording.facts"
    above = [room for room in walk.rooms if height[room.split(".")[1]] > height["recording"]]
    assert not above, walk.stops
    assert "spanledger.wire.request" in walk.rooms


def test_recognising_a_vendor_is_instrumentation_business_that_reads_no_facts() -> None:
    url = httpx.URL("https://api.cohere.com/v2/rerank")
    body = {"model": "rerank-v3.5", "query": "q", "documents": ["a", "b"]}
    with walking() as walk:
        assert recognise(url, body, {}) is not None
    assert "spanledger.recording.facts" not in walk.rooms
