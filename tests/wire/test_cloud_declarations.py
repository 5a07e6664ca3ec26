"""Hostile variants of the real cloud recordings: each changes one thing a vendor could send.

A figure that is absent is not reported; one sent but not a count is not reported and named
in ``malformed_usage``; neither fails the call. A corrupt payload (vectors of several widths, a
result naming a document the request never held) fails as ``provider_invalid_response``.
"""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from spanledger.errors import ErrorCategory, ProviderError
from spanledger.events import EmbeddingUsage
from spanledger.wire.endpoints import BEDROCK_RERANK, VERTEX_RANK
from spanledger.wire.read import read_rerank

from .replay import (
    BEDROCK_TOKENS,
    REPLAYED,
    Exchange,
    body_bytes,
    expected,
    load,
    post,
    replay_mocked,
    vectors_of,
)


def ids(exchanges: list[Exchange]) -> list[Any]:
    return [pytest.param(ex, id=ex.stem) for ex in exchanges]


def succeeded(ex: Exchange) -> bool:
    wanted = expected(ex)
    return wanted is not None and wanted["kind"] == "embedding"


HEADER_ONLY = [
    ex
    for ex in REPLAYED
    if succeeded(ex) and "/invoke" in (ex.url or "") and "inputText" not in ex.request_body
]
"""Cohere and Nova on Bedrock: the token count travels only in a response header."""
TITAN = [ex for ex in REPLAYED if succeeded(ex) and "inputText" in (ex.request_body or {})]
GARBAGE = ["abc", "-1", "1.5", "", " ", "1e3", "+4", "0x4", "4 4", "99999999999999999999999"]
GARBAGE += ["\u0664", "\uff14"]  # ARABIC-INDIC and FULLWIDTH DIGIT FOUR: digits, not ASCII


def only_event(ex: Exchange) -> Any:
    events = replay_mocked(ex).events
    assert len(events) == 1
    return events[0]


def test_the_cloud_recordings_are_found() -> None:
    assert len(HEADER_ONLY) == 7
    assert len(TITAN) == 6


@pytest.mark.parametrize("ex", ids(HEADER_ONLY))
def test_header_figure_absent_is_not_reported(ex: Exchange) -> None:
    event = only_event(ex.replace(headers={BEDROCK_TOKENS: None}))
    assert event.kind == "embedding"
    assert event.usage is None
    assert event.malformed_usage == ()


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("ex", ids(HEADER_ONLY))
def test_header_figure_garbage_is_not_reported_but_named(ex: Exchange, garbage: str) -> None:
    event = only_event(ex.replace(headers={BEDROCK_TOKENS: garbage}))
    assert event.kind == "embedding"  # a bad figure never fails the call
    assert event.usage is None
    assert event.malformed_usage == ("input_tokens",)
    assert event.dimensions == 8


@pytest.mark.parametrize("ex", ids(HEADER_ONLY))
def test_header_figure_is_read_whatever_the_case_of_its_name(ex: Exchange) -> None:
    """Ruby's VCR writes ``X-Amzn-Bedrock-Input-Token-Count``; the wire's case is no figure."""
    sent = dict(ex.headers)[BEDROCK_TOKENS]
    event = only_event(
        ex.replace(headers={BEDROCK_TOKENS: None, "X-Amzn-Bedrock-Input-Token-Count": sent})
    )
    assert event.usage == EmbeddingUsage(input_tokens=int(sent))


@pytest.mark.parametrize("ex", ids(TITAN))
def test_titan_body_figure_absent_takes_the_header(ex: Exchange) -> None:
    body = {k: v for k, v in ex.body.items() if k != "inputTextTokenCount"}
    event = only_event(ex.replace(body=body, headers={BEDROCK_TOKENS: "17"}))
    assert event.usage == EmbeddingUsage(input_tokens=17)
    assert event.malformed_usage == ()


@pytest.mark.parametrize("ex", ids(TITAN))
def test_titan_body_figure_is_preferred_to_a_bad_header(ex: Exchange) -> None:
    event = only_event(ex.replace(headers={BEDROCK_TOKENS: "abc"}))
    assert event.usage == EmbeddingUsage(input_tokens=ex.body["inputTextTokenCount"])
    assert event.malformed_usage == ()


@pytest.mark.parametrize("ex", ids(TITAN))
def test_titan_without_any_figure_is_not_reported(ex: Exchange) -> None:
    body = {k: v for k, v in ex.body.items() if k != "inputTextTokenCount"}
    event = only_event(ex.replace(body=body, headers={BEDROCK_TOKENS: None}))
    assert event.usage is None
    assert event.malformed_usage == ()


@pytest.mark.parametrize("ex", ids(TITAN))
def test_titan_without_its_vector_is_corrupt(ex: Exchange) -> None:
    body = {k: v for k, v in ex.body.items() if k not in ("embedding", "embeddingsByType")}
    event = only_event(ex.replace(body=body))
    assert event.kind == "embedding_failed"
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    assert event.status_code == 200


# --- Vertex :predict, a count on each prediction ------------------------------------------------

VERTEX_3 = "vertex-predict-text-embedding-004-3-texts"
_ABSENT = object()


def with_token_count(ex: Exchange, at: int, value: object) -> Exchange:
    body = copy.deepcopy(ex.body)
    statistics = body["predictions"][at]["embeddings"]["statistics"]
    if value is _ABSENT:
        del statistics["token_count"]
    else:
        statistics["token_count"] = value
    return ex.replace(body=body)


VERTEX_3_CHARACTERS = EmbeddingUsage(billable_characters=20)
"""What is left of the recording's usage when its token sum is unknown: the characters billed
are a figure of their own."""


@pytest.mark.parametrize("at", [0, 2])
@pytest.mark.parametrize("value", ["1", 1.5, -1, True, [1], {"n": 1}])
def test_vertex_one_garbage_count_spoils_the_sum(at: int, value: object) -> None:
    event = only_event(with_token_count(load(VERTEX_3), at, value))
    assert event.kind == "embedding"
    assert event.usage == VERTEX_3_CHARACTERS
    assert event.malformed_usage == ("input_tokens",)
    assert event.dimensions == 8


@pytest.mark.parametrize("at", [0, 2])
@pytest.mark.parametrize("value", [_ABSENT, None])
def test_vertex_one_count_absent_is_not_reported(at: int, value: object) -> None:
    """A prediction without a count (or with ``null``): the sum is unknown, nothing malformed."""
    event = only_event(with_token_count(load(VERTEX_3), at, value))
    assert event.usage == VERTEX_3_CHARACTERS
    assert event.malformed_usage == ()


# --- corrupt vectors ----------------------------------------------------------------------------

BATCHES = [ex for ex in REPLAYED if succeeded(ex) and len(vectors_of(ex)) > 1]


def with_vectors(ex: Exchange, change: Any) -> Exchange:
    """``ex`` with its list of float vectors passed through ``change``."""
    body = copy.deepcopy(ex.body)
    for path in (("embeddings", "float"), ("embeddings",), ("data",), ("predictions",)):
        node: Any = body
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        if isinstance(node, list):
            change(node)
            return ex.replace(body=body)
    raise AssertionError(f"no vectors found in {ex.stem}")


def shorten_last(items: list[Any]) -> None:
    last = items[-1]
    if isinstance(last, list):
        last.pop()
    elif "embedding" in last:
        last["embedding"].pop()
    elif "values" in last:
        last["values"].pop()
    else:
        last["embeddings"]["values"].pop()


def test_the_batches_are_found() -> None:
    assert len(BATCHES) == 7


@pytest.mark.parametrize("ex", ids(BATCHES))
def test_vectors_of_inconsistent_length_are_corrupt(ex: Exchange) -> None:
    event = only_event(with_vectors(ex, shorten_last))
    assert event.kind == "embedding_failed"
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    assert event.status_code == 200


@pytest.mark.parametrize("ex", ids(BATCHES))
def test_a_missing_vector_is_corrupt(ex: Exchange) -> None:
    event = only_event(with_vectors(ex, lambda items: items.pop()))
    assert event.kind == "embedding_failed"
    assert event.error_category is ErrorCategory.INVALID_RESPONSE


# --- Bedrock error codes ------------------------------------------------------------------------

INVALID_MODEL = "error-invoke-invalid-model-400"
TITAN_REQUEST = {"inputText": "Hello, world!"}
"""botocore sent that recording's InvokeModel with no body (the cassette's ``Content-Length:
0``), which no route can tell as an embedding; the variants send Titan's."""


@pytest.mark.parametrize(
    ("code", "status", "category"),
    [
        ("ValidationException", 400, "provider_invalid_request"),
        ("AccessDeniedException", 400, "provider_authentication"),
        ("AccessDeniedException", 403, "provider_authentication"),
        ("ThrottlingException", 400, "provider_rate_limit"),
        ("ThrottlingException", 503, "provider_rate_limit"),
        ("SomethingNewException", 400, "provider_invalid_request"),
        ("SomethingNewException", 404, "provider_invalid_model"),
    ],
)
@pytest.mark.parametrize("suffix", [":http://internal.amazon.com/coral/com.amazon.bedrock/", ""])
def test_bedrock_error_code_beats_the_status(
    code: str, status: int, category: str, suffix: str
) -> None:
    ex = load("titan-embed-text-v2").replace(
        body={"message": "refused"}, headers={"x-amzn-errortype": code + suffix}, status=status
    )
    event = only_event(ex)
    assert event.kind == "embedding_failed"
    assert (event.provider, event.model) == ("aws.bedrock", "amazon.titan-embed-text-v2:0")
    assert event.error_category.value == category
    assert event.status_code == status


def test_a_titan_shaped_body_for_a_model_no_embedding_endpoint_names_passes_through() -> None:
    """Every Bedrock model shares ``/model/{id}/invoke``: a plain id decides (Titan Text's
    generation body holds ``inputText`` too), so the recording's unknown model is not read as
    Titan embeddings, on this path as on boto3's."""
    replayed = replay_mocked(load(INVALID_MODEL).replace(request_body=TITAN_REQUEST))
    assert replayed.events == []
    assert replayed.response.status_code == 400


def test_bedrock_invoke_without_a_body_passes_through() -> None:
    replayed = replay_mocked(load(INVALID_MODEL), content=b"")
    assert replayed.events == []
    assert replayed.response.status_code == 400


# --- ranking: results named by position or by id ------------------------------------------------

RERANK = "rerank-agent-runtime-body-only"
RERANK_URL = "https://bedrock-agent-runtime.us-east-1.amazonaws.com/rerank"
RERANK_ARN = "arn:aws:bedrock:us-east-1::foundation-model/cohere.rerank-v3-5:0"


def bedrock_rerank_request(sources: int) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": "what is the moon"}}],
        "sources": [
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": f"doc {n}"}},
            }
            for n in range(sources)
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": 2,
                "modelConfiguration": {"modelArn": RERANK_ARN},
            },
        },
    }


def rerank_exchange(sources: int) -> Exchange:
    ex = load(RERANK)
    data = copy.deepcopy(ex.data)
    data["request"] = {"url": RERANK_URL, "body": bedrock_rerank_request(sources)}
    data["response"]["status"] = 200
    data["response"]["headers"] = {"content-type": "application/json"}
    return Exchange(ex.path, data)


@pytest.mark.parametrize("documents", [1, 5])
def test_bedrock_rerank_index_out_of_range_is_corrupt(documents: int) -> None:
    with pytest.raises(ProviderError) as raised:
        read_rerank(BEDROCK_RERANK, load(RERANK).body, documents, None)
    assert raised.value.category is ErrorCategory.INVALID_RESPONSE
    event = only_event(rerank_exchange(documents))
    assert event.kind == "rerank_failed"
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    assert event.status_code == 200


def test_bedrock_rerank_over_the_transport() -> None:
    event = only_event(rerank_exchange(6))
    assert event.kind == "rerank"
    assert event.provider == "aws.bedrock"
    assert event.model == "cohere.rerank-v3-5:0"  # the foundation-model ARN's id
    assert (event.document_count, event.top_k, event.result_count) == (6, 2, 2)
    assert event.usage is None
    assert event.malformed_usage == ()


RANK_URL = (
    "https://discoveryengine.googleapis.com/v1/projects/p/locations/global/"
    "rankingConfigs/default_ranking_config:rank"
)
RECORDS = [{"id": "moon", "content": "the moon pulls the sea"}, {"id": "sea", "content": "tides"}]


def rank_exchange(results: list[dict[str, Any]]) -> Exchange:
    ex = load(RERANK)
    data = copy.deepcopy(ex.data)
    request = {"query": "what moves the tides", "records": RECORDS, "topN": 2}
    data["request"] = {"url": RANK_URL, "body": request}
    data["response"] = {
        "status": 200,
        "headers": {"content-type": "application/json"},
        "body": {"records": results},
    }
    return Exchange(ex.path, data)


def test_vertex_rank_names_records_by_id() -> None:
    body = {"records": [{"id": "sea", "score": 0.9}, {"id": "moon", "score": 0.4}]}
    part = read_rerank(VERTEX_RANK, body, 2, 2, ids=[r["id"] for r in RECORDS])
    assert sorted((r.index, r.relevance_score) for r in part.results) == [(0, 0.4), (1, 0.9)]
    assert part.usage is None
    event = only_event(rank_exchange(body["records"]))
    assert event.kind == "rerank"
    assert (event.provider, event.document_count, event.result_count) == ("gcp.vertex_ai", 2, 2)
    assert event.usage is None


@pytest.mark.parametrize(
    "results",
    [
        [{"id": "sun", "score": 0.9}],
        [{"id": "moon", "score": 0.9}, {"id": "Moon", "score": 0.1}],
        [{"id": 0, "score": 0.9}],
        [{"score": 0.9}],
    ],
)
def test_vertex_rank_id_not_in_the_request_is_corrupt(results: list[dict[str, Any]]) -> None:
    with pytest.raises(ProviderError) as raised:
        read_rerank(VERTEX_RANK, {"records": results}, 2, 2, ids=[r["id"] for r in RECORDS])
    assert raised.value.category is ErrorCategory.INVALID_RESPONSE
    event = only_event(rank_exchange(results))
    assert event.kind == "rerank_failed"
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == len(body_bytes({"records": results}))


def test_vertex_rank_without_ids_known_is_corrupt() -> None:
    body = {"records": [{"id": "moon", "score": 0.9}]}
    with pytest.raises(ProviderError) as raised:
        read_rerank(VERTEX_RANK, body, 2, 2)
    assert raised.value.category is ErrorCategory.INVALID_RESPONSE


def test_post_sends_what_it_is_given() -> None:
    """The helper posts the body it is handed, so the variants above test what they say."""
    ex = load("titan-embed-text-v1")
    seen: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200, json=ex.body)

    post(ex, httpx.MockTransport(answer), content=b'{"inputText": "x"}')
    assert seen == [b'{"inputText": "x"}']
