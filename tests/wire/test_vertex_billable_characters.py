"""Vertex AI's ``metadata.billableCharacterCount``, read from the real recordings by the figure
rule: a usage figure of its own beside the token sum, ``None`` when absent, named malformed
(and never reported) when it is not a count, summed over chunks only when every chunk sent it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx
import pytest

from spanledger import EmbeddingUsage
from spanledger.providers import VertexEmbeddings

from .replay import Exchange, load, replay_mocked

RECORDED = {
    "vertex-predict-text-embedding-004-3-texts": EmbeddingUsage(
        input_tokens=1 + 1 + 2, billable_characters=20
    ),
    "vertex-predict-gemini-embedding-001": EmbeddingUsage(input_tokens=4, billable_characters=12),
}
"""Each recording's figures, as ``recorded/README.md`` documents them."""
THREE = "vertex-predict-text-embedding-004-3-texts"
_ABSENT = object()
MALFORMED = ["20", 20.0, -1, True, [20], {"n": 20}, 2**63, ""]


def only_event(ex: Exchange) -> Any:
    events = replay_mocked(ex).events
    assert len(events) == 1
    return events[0]


def with_characters(ex: Exchange, value: object) -> Exchange:
    body = copy.deepcopy(ex.body)
    if value is _ABSENT:
        del body["metadata"]["billableCharacterCount"]
    else:
        body["metadata"]["billableCharacterCount"] = value
    return ex.replace(body=body)


@pytest.mark.parametrize("stem", sorted(RECORDED))
def test_the_recorded_count_is_reported_beside_the_tokens(stem: str) -> None:
    event = only_event(load(stem))
    assert event.usage == RECORDED[stem]
    assert event.malformed_usage == ()


@pytest.mark.parametrize("value", MALFORMED, ids=repr)
def test_a_malformed_count_is_not_reported_and_named(value: object) -> None:
    event = only_event(with_characters(load(THREE), value))
    assert event.kind == "embedding"  # a bad figure never fails the call
    assert event.usage == EmbeddingUsage(input_tokens=4)  # the sound figure beside it stays
    assert event.usage.billable_characters is None
    assert event.malformed_usage == ("billable_characters",)


@pytest.mark.parametrize("value", [_ABSENT, None], ids=["absent", "null"])
def test_an_absent_count_is_unknown_not_zero(value: object) -> None:
    event = only_event(with_characters(load(THREE), value))
    assert event.usage == EmbeddingUsage(input_tokens=4)
    assert event.usage.billable_characters is None
    assert event.malformed_usage == ()


def test_metadata_that_is_not_an_object_reports_no_count() -> None:
    body = copy.deepcopy(load(THREE).body)
    body["metadata"] = [20]
    event = only_event(load(THREE).replace(body=body))
    assert event.usage == EmbeddingUsage(input_tokens=4)


def test_both_figures_bad_is_no_usage_at_all() -> None:
    body = copy.deepcopy(load(THREE).body)
    body["metadata"]["billableCharacterCount"] = "abc"
    body["predictions"][1]["embeddings"]["statistics"]["token_count"] = "abc"
    event = only_event(load(THREE).replace(body=body))
    assert event.usage is None
    assert event.malformed_usage == ("input_tokens", "billable_characters")


def test_old_usage_without_the_figure_reads_as_not_reported() -> None:
    usage = EmbeddingUsage.model_validate_json('{"input_tokens": 7}')
    assert usage.billable_characters is None
    assert json.loads(usage.model_dump_json()) == {"input_tokens": 7}  # nothing made up


def _chunked(counts: list[object]) -> VertexEmbeddings:
    """A provider sending one instance a request, each answered with the next count."""
    answers = iter(counts)

    def answer(request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = {
            "predictions": [
                {"embeddings": {"values": [0.5, 0.25], "statistics": {"token_count": 2}}}
            ]
        }
        count = next(answers)
        if count is not _ABSENT:
            body["metadata"] = {"billableCharacterCount": count}
        return httpx.Response(200, json=body)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    return VertexEmbeddings(
        "text-embedding-005",
        project="p",
        base_url="https://vertex.test",
        http_client=client,
        chunk_size=1,
    )


def test_chunks_sum_their_counts() -> None:
    response = _chunked([5, 7, 9]).embed(["a", "b", "c"])
    assert response.usage == EmbeddingUsage(input_tokens=6, billable_characters=21)


@pytest.mark.parametrize("missing", [_ABSENT, "9"], ids=["absent", "malformed"])
def test_one_chunk_without_a_sound_count_leaves_the_sum_unknown(missing: object) -> None:
    response = _chunked([5, missing, 9]).embed(["a", "b", "c"])
    assert response.usage == EmbeddingUsage(input_tokens=6)
    assert response.malformed_usage == (("billable_characters",) if missing == "9" else ())
