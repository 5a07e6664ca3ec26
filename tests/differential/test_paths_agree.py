"""Differential test: every recording path records the same response body the same way.

For every endpoint in ``spanledger.wire.endpoints.ALL_ENDPOINTS`` (a new one is covered as soon
as it is declared: one in ``ENDPOINTS`` must name its provider class in ``paths.PROVIDERS``, one
in ``VARIANT_ENDPOINTS`` the mode of it in ``paths.VARIANT_PROVIDERS``; one in
``SDK_ONLY_ENDPOINTS`` is driven through the transport and ``record_*``, and through its SDK
once ``paths.SDKS`` names one), hypothesis draws a call and the reply it gets
(``bodies.cases``: valid bodies, and bodies with absent, malformed, negative, float or huge
figures, a missing or non-text id or model, wrong vector counts or widths, non-finite or
non-number entries, bad or repeated indices, results over ``top_k``, scores that are not
numbers, ids the request never gave, header figures that are no decimal count, per-item figures
of which one is bad, truncated or non-JSON bodies, and error statuses wherever two paths can
carry one). Every path that can carry the reply (``paths.Rig.paths``: our provider, the
recording httpx transport replaying the provider's request, ``record_*(raw=..., headers=...)``
for 2xx, and each instrumented official SDK) makes the call, and all must record one event of
the same kind, with the same error category and the same figures: usage (and
``malformed_usage``), ``response_id``, ``response_model``, ``dimensions`` / ``result_count``,
and for failures ``status_code``, ``retry_after`` and ``estimated_usage``.

An SDK that raises on a 2xx body itself never hands that body over: its event must be a
``provider_invalid_response`` failure, and it is left out of the comparison. A path that is not
told a 2xx body's status (``record_*(raw=...)``, the Voyage SDK's requestor) must leave
``status_code`` unset, and is compared on everything else.

Error statuses are a small finite space, so besides being sampled they are also run whole
(``test_every_error_status_is_recorded_alike``). ``REGRESSIONS`` are named bodies with the
outcome every path must record. ``KNOWN`` lists the divergences this test found: the fuzz
counts them (see the end-of-run summary) instead of failing, and each has a minimal body in
``test_a_known_divergence_on_its_minimal_body``: a strict xfail for a certain src bug (fixing
it makes that test fail until the ``KNOWN`` entry goes), an assertion of the divergence as it
stands for an uncertain one.

Budget: ``SPANLEDGER_FUZZ_EXAMPLES`` examples per endpoint (default below), derandomized.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, seed, settings

from spanledger import EmbeddingEvent, EmbeddingFailedEvent, RerankEvent, RerankFailedEvent
from spanledger.errors import ErrorCategory
from spanledger.wire.endpoints import (
    ALL_ENDPOINTS,
    ENDPOINTS,
    SDK_ONLY_ENDPOINTS,
    VARIANT_ENDPOINTS,
    Endpoint,
)
from tests.differential.bodies import (
    JSON_TYPE,
    Call,
    Case,
    Reply,
    cases,
    encode,
    every_error_reply,
)
from tests.differential.paths import (
    CASES_RUN,
    KNOWN_SEEN,
    PROVIDERS,
    SDKS,
    VARIANT_PROVIDERS,
    Key,
    Rig,
    Seen,
    error_carriers,
    has_provider,
    path_names,
    rig_for_module,
)

DEFAULT_EXAMPLES = 500
"""Examples per endpoint when ``SPANLEDGER_FUZZ_EXAMPLES`` is unset: the file runs in well
under a minute."""

INVALID = ErrorCategory.INVALID_RESPONSE.value


def examples() -> int:
    configured = os.environ.get("SPANLEDGER_FUZZ_EXAMPLES", "").strip()
    if not configured:
        return DEFAULT_EXAMPLES
    value = int(configured)
    if value <= 0:
        raise ValueError("SPANLEDGER_FUZZ_EXAMPLES must be a positive integer")
    return value


def endpoint_id(key: Key) -> str:
    return f"{key[0].value}-{key[1]}"


BY_NAME: dict[str, Endpoint] = {endpoint.name: endpoint for endpoint in ALL_ENDPOINTS}
NAMES = list(BY_NAME)
ERROR_CARRIED = [name for name in NAMES if error_carriers(BY_NAME[name]) > 1]
"""The endpoints whose error statuses two paths or more carry (so can be compared)."""


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    with rig_for_module() as made:
        yield made


# --------------------------------------------------------------------------- comparison


def _usage(usage: Any) -> dict[str, Any] | None:
    return None if usage is None else usage.model_dump()


def record_of(seen: Seen) -> dict[str, object]:
    """What the differential test compares of one path's event."""
    found: dict[str, object] = {"kind": seen.event.kind}
    match seen.event:
        case EmbeddingFailedEvent() | RerankFailedEvent() as failed:
            found.update(
                error_category=failed.error_category.value,
                status_code=failed.status_code,
                retry_after=failed.retry_after,
                estimated_usage=_usage(failed.estimated_usage),
            )
        case EmbeddingEvent() as embedded:
            found.update(
                usage=_usage(embedded.usage),
                response_id=embedded.response_id,
                response_model=embedded.response_model,
                dimensions=embedded.dimensions,
                malformed_usage=list(embedded.malformed_usage),
            )
        case RerankEvent() as reranked:
            found.update(
                usage=_usage(reranked.usage),
                response_id=reranked.response_id,
                response_model=reranked.response_model,
                result_count=reranked.result_count,
                malformed_usage=list(reranked.malformed_usage),
            )
    return found


CARRIED = "sdk-raised"
"""The pseudo-field of an SDK that raised on a 2xx body but did not record it as invalid."""


@dataclass(frozen=True)
class Difference:
    """One field on which one path departs from what it should have recorded."""

    path: str
    field: str
    got: object
    want: object
    record: dict[str, object]
    reference: dict[str, object]

    def __str__(self) -> str:
        return f"{self.path}.{self.field} = {self.got!r}, expected {self.want!r}"


def differences(case: Case, seen: list[Seen]) -> list[Difference]:
    """Each path's departures from the provider's record of ``case`` (empty: all agree).

    A path not told a 2xx body's status must leave ``status_code`` unset; an SDK that raised
    on a 2xx body must record a ``provider_invalid_response`` failure, and nothing more of it
    is compared.
    """
    reference = record_of(seen[0])
    found: list[Difference] = []
    for other in seen[1:]:
        record = record_of(other)
        if not other.carried:
            verdict = (str(record["kind"]).endswith("_failed"), record.get("error_category"))
            if verdict != (True, INVALID):
                found.append(
                    Difference(other.path, CARRIED, verdict, (True, INVALID), record, reference)
                )
            continue
        for name in sorted({*reference, *record}):
            want = reference.get(name)
            if name == "status_code" and case.reply.success and not other.knows_status:
                want = None
            if record.get(name) != want:
                found.append(
                    Difference(other.path, name, record.get(name), want, record, reference)
                )
    return found


# --------------------------------------------------------------------------- known divergences


def _parses(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _json_typed(reply: Reply) -> bool:
    return (reply.header("content-type") or "").split(";")[0].strip().endswith("json")


def _unread_2xx(case: Case, diff: Difference) -> bool:
    """A 2xx body no reader accepts, recorded without the estimate the provider gives it."""
    return (
        case.reply.success
        and diff.reference.get("error_category") == INVALID
        and diff.got is None
        and diff.want is not None
    )


def _not_utf8_2xx(case: Case, diff: Difference) -> bool:
    try:
        case.reply.body.decode("utf-8")
    except UnicodeDecodeError:
        return case.reply.success and diff.record.get("error_category") == "provider_unavailable"
    return False


def _non_json_2xx_as_success(case: Case, diff: Difference) -> bool:
    reply = case.reply
    return (
        reply.success
        and not _json_typed(reply)
        and not _parses(reply.body)
        and diff.record.get("kind") == "embedding"
        and diff.reference.get("error_category") == INVALID
    )


def _error_body_without_detail(case: Case, diff: Difference) -> bool:
    reply = case.reply
    try:
        payload = json.loads(reply.body)
    except ValueError:
        return False
    return (
        400 <= reply.status < 500
        and not (type(payload) is dict and "detail" in payload)
        and diff.got is None
        and reply.header("retry-after") is not None
    )


def _cut_client_side(case: Case, diff: Difference) -> bool:
    top_k = case.call.top_k
    return (
        case.endpoint.client_side_top_k
        and top_k is not None
        and diff.want == top_k
        and isinstance(diff.got, int)
        and diff.got > top_k
    )


@dataclass(frozen=True)
class Known:
    """A divergence found and reported: the fuzz counts it instead of failing on it, and its
    regression below keeps it honest (a certain src bug is a strict xfail there, so the fix
    makes it fail until this entry goes; an uncertain one asserts the divergence as it is)."""

    name: str
    paths: frozenset[str]
    fields: frozenset[str] | None
    """``None``: every field (the event is of another kind altogether)."""
    applies: Callable[[Case, Difference], bool]
    certain_bug: bool
    reason: str

    def covers(self, case: Case, diff: Difference) -> bool:
        return (
            diff.path in self.paths
            and (self.fields is None or diff.field in self.fields)
            and self.applies(case, diff)
        )


KNOWN = [
    Known(
        "voyage-sdk: Retry-After lost on a 4xx whose JSON body has no detail",
        frozenset({"voyage-sdk"}),
        frozenset({"retry_after"}),
        _error_body_without_detail,
        certain_bug=False,
        reason="the Voyage SDK raises APIError without the response headers for a 4xx JSON body "
        "without 'detail'; the requestor wrapper never sees Retry-After",
    ),
    Known(
        "transport: a client-side top_k is not applied to result_count",
        frozenset({"transport"}),
        frozenset({"result_count"}),
        _cut_client_side,
        certain_bug=False,
        reason="TEI has no top_k on the wire: the provider (and record_rerank(top_k=...)) cut "
        "results to top_k and count what the caller keeps; the transport cannot know top_k",
    ),
]


def unexplained(case: Case, seen: list[Seen]) -> list[Difference]:
    """The differences no known divergence covers (the known ones are tallied)."""
    left: list[Difference] = []
    for diff in differences(case, seen):
        known = next((k for k in KNOWN if k.covers(case, diff)), None)
        if known is None:
            left.append(diff)
        else:
            KNOWN_SEEN[known.name] += 1
    return left


def check_agreement(case: Case, seen: list[Seen]) -> None:
    problems = unexplained(case, seen)
    assert not problems, f"paths disagree on {case!r}:\n  " + "\n  ".join(map(str, problems))


# --------------------------------------------------------------------------- the fuzz


def test_every_endpoint_has_a_provider_class() -> None:
    """Every ``ENDPOINTS`` entry has its provider class, and every ``SDK_ONLY_ENDPOINTS`` entry
    is driven by the transport and ``record_*`` (and its SDKs, once ``SDKS`` names them)."""
    missing = [endpoint_id(key) for key in ENDPOINTS if key not in PROVIDERS]
    assert not missing, f"endpoints without a provider class in paths.PROVIDERS: {missing}"
    stray = [endpoint_id(key) for key in PROVIDERS if key not in ENDPOINTS]
    stray += [name for name in SDKS if name not in BY_NAME]
    variants = {endpoint.name for endpoint in VARIANT_ENDPOINTS}
    stray += [name for name in VARIANT_PROVIDERS if name not in variants]
    assert not stray, f"paths for endpoints that are not declared: {stray}"
    assert all(has_provider(endpoint) for endpoint in ENDPOINTS.values())
    assert all(has_provider(endpoint) for endpoint in VARIANT_ENDPOINTS)
    for endpoint in SDK_ONLY_ENDPOINTS:
        assert not has_provider(endpoint), endpoint.name
        assert path_names(endpoint, success=True)[:2] == ["transport", "manual"], endpoint.name
    assert len(BY_NAME) == len(ALL_ENDPOINTS), "two declarations share a name"


@pytest.mark.parametrize("name", NAMES)
def test_every_path_records_a_body_alike(rig: Rig, name: str) -> None:
    endpoint: Endpoint = BY_NAME[name]
    before = CASES_RUN[name]

    def check(case: Case) -> None:
        family = case.reply.label.split(":", 1)[0]
        event(f"{name}: {family}")
        CASES_RUN[name] += 1
        CASES_RUN[f"{name} / {family}"] += 1
        seen = rig.paths(case)
        assert [each.path for each in seen] == path_names(endpoint, case.reply.success)
        check_agreement(case, seen)

    # a derandomized run is seeded by the test function's source, the same for every endpoint:
    # a fixed seed per endpoint keeps the run stable and gives endpoints of one shape bodies
    # of their own
    errors = error_carriers(endpoint) > 1
    fuzz = seed(zlib.crc32(name.encode()))(
        settings(
            max_examples=examples(),
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(given(case=cases(endpoint, errors=errors))(check))
    )
    fuzz()
    assert CASES_RUN[name] > before


@pytest.mark.parametrize("name", ERROR_CARRIED)
def test_every_error_status_is_recorded_alike(rig: Rig, name: str) -> None:
    """Every error status, error body and ``Retry-After`` (a finite space: all of it) gives
    every path one failure of the same category, status and wait."""
    endpoint = BY_NAME[name]
    for count, reply in enumerate(every_error_reply(endpoint)):
        items = 1 if endpoint.single_input else 1 + count % 3
        call = Call(endpoint, tuple(f"item {n}" for n in range(items)), "q", None)
        case = Case(call, reply)
        CASES_RUN[name] += 1
        CASES_RUN[f"{name} / status (all)"] += 1
        seen = rig.paths(case)
        assert all(str(record_of(each)["kind"]).endswith("_failed") for each in seen)
        check_agreement(case, seen)


# --------------------------------------------------------------------------- regressions


@dataclass(frozen=True)
class Regression:
    """A named body every path must record as ``expected`` (the fields given)."""

    name: str
    key: str
    """The endpoint's name."""
    items: int
    top_k: int | None
    reply: Reply
    expected: dict[str, object]
    model: str | None = None
    """The model the call names (``None``: the rig's choice for the endpoint)."""

    def case(self) -> Case:
        endpoint = BY_NAME[self.key]
        items = tuple(f"item {n}" for n in range(self.items))
        return Case(Call(endpoint, items, "what is a tick", self.top_k, self.model), self.reply)


def ok(payload: object, *headers: tuple[str, str]) -> Reply:
    return Reply(200, encode(payload), (("content-type", JSON_TYPE), *headers), "regression")


def raw(status: int, body: bytes, *headers: tuple[str, str]) -> Reply:
    return Reply(status, body, headers, "regression")


def vectors_at(count: int, width: int = 3) -> list[dict[str, Any]]:
    return [{"object": "embedding", "index": i, "embedding": [0.5] * width} for i in range(count)]


COHERE_EMBED = "cohere-embed"
COHERE_RERANK = "cohere-rerank"
VOYAGE_EMBED = "voyageai-embeddings"
VOYAGE_RERANK = "voyageai-rerank"
OPENAI_EMBED = "openai-embeddings"
JINA_RERANK = "jina-rerank"
TEI_EMBED = "tei-embed"
TEI_RERANK = "tei-rerank"


def cohere_meta(**billed_units: object) -> dict[str, Any]:
    return {"api_version": {"version": "2"}, "billed_units": billed_units}


def header(count: str) -> tuple[str, str]:
    return ("X-Amzn-Bedrock-Input-Token-Count", count)


def openai_shaped(count: int, model: str) -> dict[str, Any]:
    return {
        "object": "list",
        "data": vectors_at(count),
        "model": model,
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }


def predictions(*tokens: object) -> dict[str, Any]:
    """Vertex's answer: one prediction per input, each with its own token count."""
    made = []
    for count in tokens:
        statistics: dict[str, Any] = {"truncated": False}
        if count is not None:
            statistics["token_count"] = count
        made.append({"embeddings": {"values": [0.5, 0.25], "statistics": statistics}})
    return {"predictions": made}


def embedded(dimensions: int, tokens: object = None, **more: object) -> dict[str, object]:
    """An embedding success: the given width and token figure (``None``: not reported)."""
    usage = None if tokens is None else {"input_tokens": tokens}
    return {"kind": "embedding", "dimensions": dimensions, "usage": usage, **more}


def billed(payload: dict[str, Any], count: object) -> dict[str, Any]:
    """Vertex's answer with ``count`` as its ``metadata.billableCharacterCount``."""
    return {**payload, "metadata": {"billableCharacterCount": count}}


def characters(
    tokens: int | None, count: int | None, malformed: list[str] | None = None
) -> dict[str, object]:
    """A two-input Vertex success with these figures (``None``: not reported)."""
    usage: dict[str, object] = {"input_tokens": tokens}
    if count is not None:
        usage["billable_characters"] = count
    return embedded(2, usage=usage, malformed_usage=malformed or [])


FAILED_EMBEDDING: dict[str, object] = {"kind": "embedding_failed", "error_category": INVALID}
FAILED_RERANK: dict[str, object] = {"kind": "rerank_failed", "error_category": INVALID}

NEW_ENDPOINT_REGRESSIONS = [
    Regression(
        "gemini batch: usageMetadata.promptTokenCount is the tokens",
        "gemini-batch-embed",
        2,
        None,
        ok(
            {
                "embeddings": [{"values": [0.5, 0.25]}, {"values": [0.1, 0.2]}],
                "usageMetadata": {"promptTokenCount": 9},
            }
        ),
        embedded(2, 9, malformed_usage=[]),
    ),
    Regression(
        "gemini batch: an item without values",
        "gemini-batch-embed",
        2,
        None,
        ok({"embeddings": [{"values": [0.5, 0.25]}, {}]}),
        FAILED_EMBEDDING,
    ),
    Regression(
        "vertex predict: a token count per prediction, summed",
        "vertex-predict",
        2,
        None,
        ok(predictions(3, 4)),
        embedded(2, 7, malformed_usage=[]),
    ),
    Regression(
        "vertex predict: one prediction's count in text: not reported, named",
        "vertex-predict",
        2,
        None,
        ok(predictions(3, "4")),
        embedded(2, None, malformed_usage=["input_tokens"]),
    ),
    Regression(
        "vertex predict: one prediction's count a float: not reported, named",
        "vertex-predict",
        2,
        None,
        ok(predictions(3.0, 4)),
        embedded(2, None, malformed_usage=["input_tokens"]),
    ),
    Regression(
        "vertex predict: one prediction without a count: not reported, not named",
        "vertex-predict",
        2,
        None,
        ok(predictions(3, None)),
        embedded(2, None, malformed_usage=[]),
    ),
    Regression(
        "vertex predict: metadata.billableCharacterCount is the billable characters",
        "vertex-predict",
        2,
        None,
        ok(billed(predictions(3, 4), 20)),
        characters(7, 20),
    ),
    Regression(
        "vertex predict: a billable character count in text: not reported, named",
        "vertex-predict",
        2,
        None,
        ok(billed(predictions(3, 4), "20")),
        characters(7, None, ["billable_characters"]),
    ),
    Regression(
        "vertex predict: the billable characters stay beside a bad token count",
        "vertex-predict",
        2,
        None,
        ok(billed(predictions(3, "4"), 20)),
        characters(None, 20, ["input_tokens"]),
    ),
    Regression(
        "vertex express predict: the regional wire, no project or location in the path",
        "vertex-express-predict",
        2,
        None,
        ok(billed(predictions(3, 4), 20)),
        characters(7, 20),
    ),
    Regression(
        "vertex express embedContent: one vector at embedding.values",
        "vertex-express-embed",
        1,
        None,
        ok({"embedding": {"values": [0.5, 0.25]}, "usageMetadata": {"promptTokenCount": 2}}),
        embedded(2, 2),
    ),
    Regression(
        "vertex rank: results name records by id",
        "vertex-rank",
        3,
        None,
        ok({"records": [{"id": "2", "score": 0.9}, {"id": "0", "score": 0.5}]}),
        {"kind": "rerank", "result_count": 2, "usage": None, "malformed_usage": []},
    ),
    Regression(
        "vertex rank: an id the request never gave",
        "vertex-rank",
        2,
        None,
        ok({"records": [{"id": "7", "score": 0.9}]}),
        FAILED_RERANK,
    ),
    Regression(
        "vertex rank: an index beside an id that is not text is not read",
        "vertex-rank",
        2,
        None,
        ok({"records": [{"id": 0, "index": 0, "score": 0.9}]}),
        FAILED_RERANK,
    ),
    Regression(
        "vertex rank: two results for one id",
        "vertex-rank",
        2,
        None,
        ok({"records": [{"id": "1", "score": 0.9}, {"id": "1", "score": 0.5}]}),
        FAILED_RERANK,
    ),
    Regression(
        "azure deployment: OpenAI's answer, the model echoed",
        "azure-deployment-embeddings",
        2,
        None,
        ok(openai_shaped(2, "text-embedding-3-small")),
        embedded(3, 5, response_model="text-embedding-3-small"),
    ),
    Regression(
        "azure v1: OpenAI's answer, the model echoed",
        "azure-v1-embeddings",
        2,
        None,
        ok(openai_shaped(2, "text-embedding-3-small")),
        embedded(3, 5, response_model="text-embedding-3-small"),
    ),
    Regression(
        "mistral: usage.prompt_tokens and the id",
        "mistral-embeddings",
        1,
        None,
        ok({**openai_shaped(1, "mistral-embed"), "id": "emb-9"}),
        embedded(3, 5, response_model="mistral-embed", response_id="emb-9"),
    ),
    Regression(
        "ollama embed: rows at embeddings, prompt_eval_count",
        "ollama-embed",
        2,
        None,
        ok(
            {
                "model": "all-minilm",
                "embeddings": [[0.5, 0.25], [0.1, 0.2]],
                "total_duration": 14143917,
                "prompt_eval_count": 8,
            }
        ),
        embedded(2, 8, response_model="all-minilm"),
    ),
    Regression(
        "ollama embed: rows of uneven width",
        "ollama-embed",
        2,
        None,
        ok({"model": "all-minilm", "embeddings": [[0.5, 0.25], [0.1]]}),
        FAILED_EMBEDDING,
    ),
    Regression(
        "ollama legacy: one vector, no usage, no model",
        "ollama-legacy-embeddings",
        1,
        None,
        ok({"embedding": [0.5, 0.25, 0.1]}),
        embedded(3, None, response_model=None, malformed_usage=[]),
    ),
    Regression(
        "ollama v1: OpenAI's answer",
        "ollama-v1-embeddings",
        2,
        None,
        ok(openai_shaped(2, "all-minilm")),
        embedded(3, 5, response_model="all-minilm"),
    ),
    Regression(
        "titan: inputTextTokenCount",
        "bedrock-titan-embed",
        1,
        None,
        ok({"embedding": [0.5, 0.25, 0.1], "inputTextTokenCount": 4}, header("99")),
        embedded(3, 4),
    ),
    Regression(
        "titan: the header counts when the body has no figure",
        "bedrock-titan-embed",
        1,
        None,
        ok({"embedding": [0.5, 0.25, 0.1]}, header("6")),
        embedded(3, 6),
    ),
    Regression(
        "titan: a text body figure is not replaced by the header's",
        "bedrock-titan-embed",
        1,
        None,
        ok({"embedding": [0.5], "inputTextTokenCount": "4"}, header("6")),
        embedded(1, None, malformed_usage=["input_tokens"]),
    ),
    Regression(
        "titan: two vectors for one input",
        "bedrock-titan-embed",
        1,
        None,
        ok({"embedding": [[0.5], [0.25]], "inputTextTokenCount": 4}),
        FAILED_EMBEDDING,
    ),
    Regression(
        "bedrock cohere: tokens only in the header",
        "bedrock-cohere-embed",
        2,
        None,
        ok(
            {
                "id": "b-1",
                "embeddings": [[0.5, 0.25], [0.1, 0.2]],
                "texts": ["item 0", "item 1"],
                "response_type": "embeddings_floats",
            },
            header("11"),
        ),
        embedded(2, 11, response_id="b-1"),
    ),
    Regression(
        "bedrock cohere: header text that is no decimal count: not reported, named",
        "bedrock-cohere-embed",
        1,
        None,
        ok({"id": "b-2", "embeddings": {"float": [[0.5]]}}, header("11 tokens")),
        embedded(1, None, malformed_usage=["input_tokens"]),
    ),
    Regression(
        "bedrock cohere: a header count beyond 64 bits: not reported, named",
        "bedrock-cohere-embed",
        1,
        None,
        ok({"embeddings": [[0.5]]}, header("9223372036854775808")),
        embedded(1, None, malformed_usage=["input_tokens"]),
    ),
    Regression(
        "nova: embeddings[].embedding, tokens in the header",
        "bedrock-nova-embed",
        1,
        None,
        ok({"embeddings": [{"embeddingType": "TEXT", "embedding": [0.5, 0.25]}]}, header("3")),
        embedded(2, 3),
    ),
    Regression(
        "bedrock cohere rerank: search units",
        "bedrock-cohere-rerank",
        2,
        1,
        ok(
            {
                "id": "r-9",
                "results": [{"index": 1, "relevance_score": 0.9}],
                "meta": {"billed_units": {"search_units": 1}},
            }
        ),
        {
            "kind": "rerank",
            "usage": {"search_units": 1, "input_tokens": None},
            "response_id": "r-9",
            "result_count": 1,
        },
    ),
    Regression(
        "bedrock rerank: relevanceScore, no usage",
        "bedrock-rerank",
        2,
        None,
        ok({"results": [{"index": 1, "relevanceScore": 0.8}]}),
        {"kind": "rerank", "usage": None, "result_count": 1, "malformed_usage": []},
    ),
    Regression(
        "bedrock rerank of a Cohere model ARN: relevanceScore, no usage",
        "bedrock-rerank",
        2,
        None,
        ok({"results": [{"index": 1, "relevanceScore": 0.8}]}),
        {"kind": "rerank", "usage": None, "result_count": 1, "malformed_usage": []},
        model="arn:aws:bedrock:us-west-2::foundation-model/cohere.rerank-v3-5:0",
    ),
    Regression(
        "bedrock rerank: a body botocore's parser crashes on (null) is an invalid response",
        "bedrock-rerank",
        1,
        None,
        raw(200, b"null", ("content-type", JSON_TYPE)),
        {"kind": "rerank_failed", "error_category": "provider_invalid_response"},
    ),
    Regression(
        "bedrock rerank: more results than numberOfResults",
        "bedrock-rerank",
        2,
        1,
        ok({"results": [{"index": i, "relevanceScore": 0.8 - i / 10} for i in range(2)]}),
        FAILED_RERANK,
    ),
    Regression(
        "cohere v1: the float vectors as embeddings itself",
        "cohere-v1-embed",
        2,
        None,
        ok(
            {
                "id": "v1-1",
                "embeddings": [[0.5, 0.25], [0.1, 0.2]],
                "texts": [],
                "meta": cohere_meta(input_tokens=6),
            }
        ),
        embedded(2, 6, response_id="v1-1"),
    ),
    Regression(
        "gemini embedContent: one vector at embedding.values",
        "gemini-embed",
        1,
        None,
        ok({"embedding": {"values": [0.5, 0.25]}, "usageMetadata": {"promptTokenCount": 2}}),
        embedded(2, 2),
    ),
    Regression(
        "vertex embedContent: one vector at embedding.values",
        "vertex-embed",
        1,
        None,
        ok({"embedding": {"values": [0.5, 0.25]}, "usageMetadata": {"promptTokenCount": 2}}),
        embedded(2, 2),
    ),
    Regression(
        "vertex batchEmbedContents: a vector per request, one figure for the batch",
        "vertex-batch-embed",
        2,
        None,
        ok(
            {
                "embeddings": [{"values": [0.5, 0.25]}, {"values": [0.1, 0.2]}],
                "usageMetadata": {"promptTokenCount": 4},
            }
        ),
        embedded(2, 4),
    ),
]
"""The rule each new declaration brings, on a named body per endpoint."""


REGRESSIONS = [
    Regression(
        "cohere embed: one vector for two inputs",
        COHERE_EMBED,
        2,
        None,
        ok(
            {
                "id": "e-1",
                "embeddings": {"float": [[0.5, 0.25]]},
                "texts": [],
                "meta": cohere_meta(input_tokens=4),
            }
        ),
        {"kind": "embedding_failed", "error_category": INVALID},
    ),
    Regression(
        "cohere rerank: search_units 1.0 is not reported",
        COHERE_RERANK,
        2,
        None,
        ok(
            {
                "id": "r-1",
                "results": [{"index": 1, "relevance_score": 0.9}],
                "meta": cohere_meta(search_units=1.0),
            }
        ),
        {
            "kind": "rerank",
            "usage": None,
            "response_id": "r-1",
            "result_count": 1,
            "malformed_usage": ["search_units"],
        },
    ),
    Regression(
        "cohere rerank: search_units 1 is",
        COHERE_RERANK,
        2,
        2,
        ok(
            {
                "id": "r-2",
                "results": [{"index": 0, "relevance_score": 0.9}],
                "meta": cohere_meta(search_units=1),
            }
        ),
        {
            "kind": "rerank",
            "usage": {"search_units": 1, "input_tokens": None},
            "result_count": 1,
            "malformed_usage": [],
        },
    ),
    Regression(
        "voyage rerank: 3 results for top_k=2",
        VOYAGE_RERANK,
        3,
        2,
        ok(
            {
                "object": "list",
                "data": [{"index": i, "relevance_score": 0.9 - i / 10} for i in range(3)],
                "model": "rerank-2.5",
                "usage": {"total_tokens": 12},
            }
        ),
        {"kind": "rerank_failed", "error_category": INVALID, "status_code": 200},
    ),
    Regression(
        "voyage embed: a token count beyond 64 bits is not reported",
        VOYAGE_EMBED,
        1,
        None,
        ok(
            {
                "object": "list",
                "data": vectors_at(1),
                "model": "voyage-3.5",
                "usage": {"total_tokens": 2**63},
            }
        ),
        {
            "kind": "embedding",
            "usage": None,
            "response_model": "voyage-3.5",
            "dimensions": 3,
            "malformed_usage": ["input_tokens"],
        },
    ),
    Regression(
        "openai embed: a token count in text is not reported",
        OPENAI_EMBED,
        2,
        None,
        ok(
            {
                "object": "list",
                "data": vectors_at(2, 4),
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": "12", "total_tokens": 12},
            }
        ),
        {"kind": "embedding", "usage": None, "dimensions": 4, "malformed_usage": ["input_tokens"]},
    ),
    Regression(
        "openai embed: two entries share an index",
        OPENAI_EMBED,
        2,
        None,
        ok(
            {
                "object": "list",
                "data": [{"index": 0, "embedding": [0.5]}, {"index": 0, "embedding": [0.5]}],
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": 2, "total_tokens": 2},
            }
        ),
        {"kind": "embedding_failed", "error_category": INVALID},
    ),
    Regression(
        "openai embed: a NaN entry",
        OPENAI_EMBED,
        1,
        None,
        Reply(
            200,
            b'{"data":[{"index":0,"embedding":[0.5,NaN]}],"model":"m","usage":{"prompt_tokens":1}}',
            (("content-type", JSON_TYPE),),
            "regression",
        ),
        {"kind": "embedding_failed", "error_category": INVALID},
    ),
    Regression(
        "jina rerank: a score in text",
        JINA_RERANK,
        2,
        None,
        ok(
            {
                "model": "jina-reranker-v2",
                "results": [{"index": 0, "relevance_score": "0.9"}],
                "usage": {"total_tokens": 9},
            }
        ),
        {"kind": "rerank_failed", "error_category": INVALID},
    ),
    Regression(
        "tei embed: rows of uneven width",
        TEI_EMBED,
        2,
        None,
        ok([[0.5, 0.25], [0.5]]),
        {"kind": "embedding_failed", "error_category": INVALID},
    ),
    Regression(
        "tei rerank: an index out of range",
        TEI_RERANK,
        2,
        None,
        ok([{"index": 2, "score": 0.5}]),
        {"kind": "rerank_failed", "error_category": INVALID},
    ),
    Regression(
        "tei embed: 424 is unavailable",
        TEI_EMBED,
        1,
        None,
        raw(424, b'{"error":"model not loaded"}', ("content-type", JSON_TYPE)),
        {"kind": "embedding_failed", "error_category": "provider_unavailable", "status_code": 424},
    ),
    Regression(
        "cohere embed: truncated JSON",
        COHERE_EMBED,
        1,
        None,
        raw(200, b'{"id":"e-1","embeddings":{"float":[[0.5', ("content-type", JSON_TYPE)),
        {"kind": "embedding_failed", "error_category": INVALID},
    ),
    *(
        Regression(
            f"{key}: 429 with Retry-After",
            key,
            1,
            None,
            raw(
                429,
                b'{"detail":"slow down"}',
                ("content-type", JSON_TYPE),
                ("retry-after", "7"),
            ),
            {
                "kind": f"{'embedding' if BY_NAME[key].operation == 'embeddings' else 'rerank'}"
                "_failed",
                "error_category": "provider_rate_limit",
                "status_code": 429,
                "retry_after": 7.0,
                "estimated_usage": None,
            },
        )
        for key in ERROR_CARRIED
    ),
    *NEW_ENDPOINT_REGRESSIONS,
]


def expected_of(each: Seen, case: Case, expected: dict[str, object]) -> dict[str, object]:
    """``expected`` as ``each`` should record it: a path not told a 2xx body's status leaves
    ``status_code`` unset."""
    if case.reply.success and not each.knows_status and "status_code" in expected:
        return {**expected, "status_code": None}
    return expected


@pytest.mark.parametrize("regression", REGRESSIONS, ids=lambda r: r.name)
def test_a_named_body_is_recorded_alike_on_every_path(rig: Rig, regression: Regression) -> None:
    """Every path agrees, and records ``expected``; a path whose departure is a known
    divergence is held to the agreement (which tallies it) only."""
    case = regression.case()
    seen = rig.paths(case)
    check_agreement(case, seen)
    departed = {diff.path for diff in differences(case, seen)}
    for each in seen:
        if not each.carried or each.path in departed:
            continue
        record = record_of(each)
        got = {name: record.get(name) for name in regression.expected}
        assert got == expected_of(each, case, regression.expected), each.path


def test_the_regression_table_reaches_every_endpoint() -> None:
    assert {regression.key for regression in REGRESSIONS} == set(BY_NAME)


# --------------------------------------------------------------------------- known, pinned

FIXED: dict[str, Regression] = {
    "manual: no estimate for an unreadable 2xx body": Regression(
        "manual estimate", OPENAI_EMBED, 1, None, ok({"data": []}), {"kind": "embedding_failed"}
    ),
    "voyage-sdk: no estimate for an unreadable 2xx body": Regression(
        "voyage estimate",
        VOYAGE_EMBED,
        1,
        None,
        ok({"data": [{"index": 1, "embedding": [0.5]}], "usage": {"total_tokens": 1}}),
        {"kind": "embedding_failed"},
    ),
    "voyage-sdk: a 2xx body that is not UTF-8 was provider_unavailable": Regression(
        "voyage not utf-8",
        VOYAGE_EMBED,
        1,
        None,
        raw(200, b"\xff", ("content-type", JSON_TYPE)),
        {"kind": "embedding_failed"},
    ),
    "openai-sdk: a non-JSON 2xx body not typed as JSON was a success": Regression(
        "openai not json",
        OPENAI_EMBED,
        1,
        None,
        raw(200, b"not json", ("content-type", "text/plain")),
        {"kind": "embedding_failed"},
    ),
    "manual: a client-side top_k was not applied to result_count": Regression(
        "tei top_k, manual",
        TEI_RERANK,
        3,
        2,
        ok([{"index": i, "score": 0.9 - i / 10} for i in range(3)]),
        {"kind": "rerank"},
    ),
}
"""Divergences this test found and the recording core fixed: every path agrees on them now."""


@pytest.mark.parametrize("name", list(FIXED))
def test_a_divergence_found_and_fixed_stays_fixed(rig: Rig, name: str) -> None:
    case = FIXED[name].case()
    found = differences(case, rig.paths(case))
    left = [d for d in found if not any(k.covers(case, d) for k in KNOWN)]
    assert not left, "; ".join(map(str, left))


KNOWN_CASES: dict[str, Regression] = {
    KNOWN[0].name: Regression(
        "voyage retry-after",
        VOYAGE_RERANK,
        1,
        None,
        raw(429, b'{"message":"no"}', ("content-type", JSON_TYPE), ("retry-after", "7")),
        {"kind": "rerank_failed"},
    ),
    KNOWN[1].name: Regression(
        "tei top_k",
        TEI_RERANK,
        3,
        2,
        ok([{"index": i, "score": 0.9 - i / 10} for i in range(3)]),
        {"kind": "rerank"},
    ),
}


def _pinned(known: Known) -> Any:
    marks = []
    if known.certain_bug:
        marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=known.reason))
    return pytest.param(known, marks=marks, id=known.name)


@pytest.mark.parametrize("known", [_pinned(known) for known in KNOWN])
def test_a_known_divergence_on_its_minimal_body(rig: Rig, known: Known) -> None:
    """A certain src bug: the paths must agree (a strict xfail until fixed, then drop its
    ``KNOWN`` entry). An uncertain one: the divergence is asserted as it stands, so a change
    in it is seen."""
    case = KNOWN_CASES[known.name].case()
    seen = rig.paths(case)
    found = differences(case, seen)
    others = [d for d in found if not any(k.covers(case, d) for k in KNOWN)]
    if others:  # not the expected failure of an xfail: a real one
        pytest.fail("unexplained: " + "; ".join(map(str, others)))
    mine = [d for d in found if known.covers(case, d)]
    if known.certain_bug:
        assert not mine, "; ".join(map(str, mine))
    elif not mine:
        pytest.fail(f"{known.name!r} no longer happens: drop its KNOWN entry")


def test_every_known_divergence_has_a_minimal_body() -> None:
    assert set(KNOWN_CASES) == {known.name for known in KNOWN}
