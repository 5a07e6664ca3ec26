"""google-genai's ``Client`` on both backends, instrumented, against the stand-in: the figures
come from the raw body (the SDK drops a top-level ``usageMetadata``), each HTTP attempt is one
event, sync and async (aiohttp), per client and under the process-wide switch."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import types as pytypes
from collections.abc import Callable
from typing import Any

import google.oauth2.credentials
import pytest
from google import genai
from google.genai import _api_client, errors
from google.genai import types as gtypes

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, ErrorCategory
from spanledger.instrumentation import is_instrumented
from spanledger.testing import (
    StandIn,
    gemini_embeddings,
    vertex_batch_embed_contents,
    vertex_embed_content,
    vertex_embeddings,
)
from tests.instrument.conftest import Tape, tokens

API_KEY = "AIza-SENTINEL-google-key-91c3"
SENTINEL = "SENTINEL-google-text-4e7a"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"the clock ticks {SENTINEL}"]


def gemini(standin: StandIn, **options: Any) -> genai.Client:
    http = gtypes.HttpOptions(base_url=standin.base_url("gcp.gemini"), **options)
    return genai.Client(api_key=API_KEY, http_options=http)


def vertex(standin: StandIn, **options: Any) -> genai.Client:
    http = gtypes.HttpOptions(base_url=standin.base_url("gcp.vertex_ai"), **options)
    credentials = google.oauth2.credentials.Credentials(token=API_KEY)  # type: ignore[no-untyped-call]
    return genai.Client(
        vertexai=True,
        project="proj",
        location="us-central1",
        credentials=credentials,
        http_options=http,
    )


def embed(client: genai.Client, is_async: bool, model: str, texts: Any = TEXTS, **kw: Any) -> Any:
    if is_async:
        return asyncio.run(client.aio.models.embed_content(model=model, contents=texts, **kw))
    return client.models.embed_content(model=model, contents=texts, **kw)


def vertex_route(model: str) -> str:
    """Where google-genai sends several contents for ``model`` on Vertex: ``:predict``, except
    a Gemini model from google-genai 3 on, which goes to ``:batchEmbedContents``."""
    major = int(importlib.metadata.version("google-genai").split(".")[0])
    return ":batchEmbedContents" if major >= 3 and model.startswith("gemini") else ":predict"


def outcome(work: Callable[[], Any]) -> tuple[str, Any]:
    try:
        result = work()
    except Exception as exc:
        return ("raised", (type(exc), str(exc)))
    return ("ok", result.model_dump(exclude={"sdk_http_response"}))


@pytest.fixture(autouse=True)
def fresh(standin: StandIn) -> None:
    standin.reset()


RETRY = gtypes.HttpRetryOptions(attempts=2, initial_delay=0.0, max_delay=0.0, jitter=0.0)
SYNC_ASYNC = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


@SYNC_ASYNC
def test_gemini_batch_figures_come_from_the_raw_body(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    client = spanledger.instrument(gemini(standin))
    config = {"output_dimensionality": 8, "task_type": "RETRIEVAL_DOCUMENT"}
    result = embed(client, is_async, "gemini-embedding-001", config=config)

    assert outcome(lambda: result) == outcome(
        lambda: embed(gemini(standin), is_async, "gemini-embedding-001", config=config)
    )
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.gemini", "gemini-embedding-001")
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))
    assert (event.input_count, event.dimensions, event.response_model) == (2, 8, None)
    assert event.request_params == {"input_type": "RETRIEVAL_DOCUMENT", "dimensions": 8}
    assert standin.requests[-1].path.endswith(":batchEmbedContents")


@SYNC_ASYNC
def test_gemini_without_usage_metadata_reports_none(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    standin.route(gemini_embeddings(report_usage=False), times=1)
    embed(spanledger.instrument(gemini(standin)), is_async, "text-embedding-004")
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None
    assert event.malformed_usage == ()


@SYNC_ASYNC
@pytest.mark.parametrize("model", ["text-embedding-005", "gemini-embedding-001"])
def test_vertex_predict_sums_each_token_count(
    is_async: bool, model: str, standin: StandIn, tape: Tape
) -> None:
    standin.route(vertex_embeddings(tokens=7), times=1)
    standin.route(vertex_batch_embed_contents(tokens=7), times=1)
    embed(spanledger.instrument(vertex(standin)), is_async, model)
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.vertex_ai", model)
    assert event.usage is not None
    assert event.usage.input_tokens == 7  # 4 + 3 as the body spread it, or the batch's total
    assert (event.input_count, event.dimensions) == (2, 16)
    assert standin.requests[-1].path.endswith(f"/{model}{vertex_route(model)}")


@SYNC_ASYNC
@pytest.mark.parametrize("report", [True, False])
def test_vertex_embed_content_reads_its_usage_metadata(
    is_async: bool, report: bool, standin: StandIn, tape: Tape
) -> None:
    standin.route(vertex_embed_content(tokens=5, report_usage=report), times=1)
    embed(spanledger.instrument(vertex(standin)), is_async, "gemini-embedding-2-preview", TEXTS[:1])
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert standin.requests[-1].path.endswith(":embedContent")
    assert (event.input_count, event.dimensions) == (1, 16)
    assert (event.usage.input_tokens if event.usage else None) == (5 if report else None)


@SYNC_ASYNC
@pytest.mark.parametrize("make", [gemini, vertex], ids=["gemini", "vertex"])
def test_a_garbage_figure_is_not_reported(
    is_async: bool, make: Callable[..., genai.Client], standin: StandIn, tape: Tape
) -> None:
    bare = outcome(lambda: embed(make(standin), is_async, "usage-malformed"))
    seen = outcome(lambda: embed(spanledger.instrument(make(standin)), is_async, "usage-malformed"))
    assert seen == bare
    [event] = tape.events
    if bare[0] == "ok":
        assert isinstance(event, EmbeddingEvent)
        assert event.usage is None
        assert event.malformed_usage == ("input_tokens",)
    else:  # Vertex's SDK itself fails on ``token_count: "abc"``: the call failed
        assert isinstance(event, EmbeddingFailedEvent)
        assert event.error_category is ErrorCategory.INVALID_RESPONSE
        assert event.error_type == "ValidationError"


@SYNC_ASYNC
@pytest.mark.parametrize(
    ("status", "category", "kind"),
    [
        (429, ErrorCategory.RATE_LIMIT, errors.ClientError),
        (503, ErrorCategory.UNAVAILABLE, errors.ServerError),
    ],
)
def test_an_error_status_is_one_event_and_the_sdk_error_unchanged(
    is_async: bool,
    status: int,
    category: ErrorCategory,
    kind: type[Exception],
    standin: StandIn,
    tape: Tape,
) -> None:
    model = f"fail-{status}"
    bare = outcome(lambda: embed(gemini(standin), is_async, model))
    with pytest.raises(kind) as caught:
        embed(spanledger.instrument(gemini(standin)), is_async, model)
    assert ("raised", (type(caught.value), str(caught.value))) == bare
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (category, status)
    assert event.fingerprint is not None
    if status == 429:
        assert event.retry_after == 2.0


@SYNC_ASYNC
def test_a_429_the_sdk_retries_is_one_event_per_attempt(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    standin.route(gemini_embeddings().failing(429), times=1)
    client = spanledger.instrument(gemini(standin, retry_options=RETRY))
    result = embed(client, is_async, "text-embedding-004")

    assert result.embeddings is not None
    assert len(standin.requests) == 2
    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert isinstance(succeeded, EmbeddingEvent)
    assert (failed.error_category, failed.retried) == (ErrorCategory.RATE_LIMIT, True)
    assert succeeded.attempt == 2
    assert succeeded.logical_call_id == failed.call_id
    assert succeeded.usage is not None


@SYNC_ASYNC
def test_a_dropped_connection_is_unavailable(is_async: bool, standin: StandIn, tape: Tape) -> None:
    standin.route(gemini_embeddings().dropped())
    client = spanledger.instrument(gemini(standin, retry_options=RETRY))
    with pytest.raises(Exception, match=r".") as caught:
        embed(client, is_async, "text-embedding-004")
    assert SENTINEL not in str(caught.value)
    assert len(tape.events) == len(standin.requests)  # what the SDK retries: aiohttp's errors
    assert len(tape.events) == (2 if is_async else 1)
    assert all(isinstance(e, EmbeddingFailedEvent) for e in tape.events)
    assert {e.error_category for e in tape.events} == {ErrorCategory.UNAVAILABLE}  # type: ignore[union-attr]


def test_aiohttps_own_retry_after_a_dropped_connection_is_an_attempt(
    standin: StandIn, tape: Tape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without retry options the aiohttp path retries a connection error by itself, inside
    one SDK attempt: both HTTP requests are recorded."""

    async def no_wait(_seconds: float) -> None:
        return None

    fast = pytypes.SimpleNamespace(**{**vars(asyncio), "sleep": no_wait})
    monkeypatch.setattr(_api_client, "asyncio", fast)
    standin.route(gemini_embeddings().dropped(), times=1)
    client = spanledger.instrument(gemini(standin))
    result = embed(client, True, "text-embedding-004")

    assert result.embeddings is not None
    assert len(standin.requests) == 2
    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert (failed.error_category, failed.retried) == (ErrorCategory.UNAVAILABLE, True)
    assert isinstance(succeeded, EmbeddingEvent)
    assert succeeded.logical_call_id == failed.call_id


def test_uninstrument_stops_recording(standin: StandIn, tape: Tape) -> None:
    client = spanledger.instrument(gemini(standin))
    assert is_instrumented(client)
    assert is_instrumented(client.models)
    spanledger.uninstrument(client)
    embed(client, False, "text-embedding-004")
    embed(client, True, "text-embedding-004")
    assert tape.events == []
    assert not is_instrumented(client.models)


def test_the_switch_catches_clients_made_before_and_after(standin: StandIn, tape: Tape) -> None:
    before = vertex(standin)
    by_hand = spanledger.instrument(gemini(standin))
    spanledger.instrument(sdks=["google.genai"])
    try:
        after = gemini(standin)
        embed(before, False, "text-embedding-005")
        embed(after, True, "text-embedding-004")
        embed(by_hand, False, "text-embedding-004")
    finally:
        spanledger.uninstrument()
    assert [e.provider for e in tape.events] == ["gcp.vertex_ai", "gcp.gemini", "gcp.gemini"]
    embed(after, False, "text-embedding-004")
    assert len(tape.events) == 3
    embed(by_hand, False, "text-embedding-004")  # still instrumented by hand
    assert len(tape.events) == 4


def test_no_text_or_key_reaches_an_event_a_log_or_an_exception(
    standin: StandIn, tape: Tape, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = spanledger.instrument(gemini(standin))
    embed(client, False, "text-embedding-004", config={"task_type": "RETRIEVAL_QUERY"})
    malformed = outcome(lambda: embed(client, True, "usage-malformed"))  # google-genai 3 refuses it
    with pytest.raises(errors.ClientError) as caught:
        embed(client, False, "fail-400")
    assert len(tape.events) == 3
    events = (e.model_dump_json() for e in tape.events)
    for surface in (caplog.text, str(caught.value), str(malformed), *events):
        assert SENTINEL not in surface
        assert API_KEY not in surface
