"""mistralai's ``Mistral`` (on httpx2), instrumented, against the stand-in: ``usage`` from the
raw body, each HTTP attempt one event (its ``RetryConfig`` on), sync and async, per client and
under the process-wide switch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from mistralai.client import Mistral, errors
from mistralai.client.utils import BackoffStrategy, RetryConfig

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, ErrorCategory
from spanledger.testing import StandIn, mistral_embeddings
from tests.instrument.conftest import Tape, tokens

API_KEY = "sk-SENTINEL-mistral-key-2f81"
SENTINEL = "SENTINEL-mistral-text-0b9d"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"the clock ticks {SENTINEL}"]
RETRY = RetryConfig("backoff", BackoffStrategy(1, 2, 1.1, 1000), retry_connection_errors=True)
SYNC_ASYNC = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


@pytest.fixture(autouse=True)
def fresh(standin: StandIn) -> None:
    standin.reset()


def mistral(standin: StandIn, **options: Any) -> Mistral:
    return Mistral(api_key=API_KEY, server_url=standin.base_url("mistral_ai"), **options)


def embed(client: Mistral, is_async: bool, model: str, texts: Any = TEXTS, **kw: Any) -> Any:
    if is_async:
        return asyncio.run(client.embeddings.create_async(model=model, inputs=texts, **kw))
    return client.embeddings.create(model=model, inputs=texts, **kw)


def outcome(work: Callable[[], Any]) -> tuple[str, Any]:
    try:
        result = work()
    except Exception as exc:
        return ("raised", (type(exc), str(exc)))
    return ("ok", result.model_dump())


@SYNC_ASYNC
def test_usage_and_model_come_from_the_raw_body(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    result = embed(spanledger.instrument(mistral(standin)), is_async, "mistral-embed")
    assert outcome(lambda: result) == outcome(
        lambda: embed(mistral(standin), is_async, "mistral-embed")
    )
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.response_model) == (
        "mistral_ai",
        "mistral-embed",
        "mistral-embed",
    )
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))
    assert (event.input_count, event.dimensions) == (2, 16)
    assert event.response_id is not None


@SYNC_ASYNC
def test_output_dimension_is_a_request_param(is_async: bool, standin: StandIn, tape: Tape) -> None:
    embed(spanledger.instrument(mistral(standin)), is_async, "codestral-embed", output_dimension=8)
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.dimensions, event.request_params) == (8, {"dimensions": 8})


@SYNC_ASYNC
@pytest.mark.parametrize("model", ["usage-malformed", "usage-missing"])
def test_a_bad_or_absent_figure_is_not_reported(
    is_async: bool, model: str, standin: StandIn, tape: Tape
) -> None:
    bare = outcome(lambda: embed(mistral(standin), is_async, model))
    seen = outcome(lambda: embed(spanledger.instrument(mistral(standin)), is_async, model))
    assert seen == bare
    [event] = tape.events
    if bare[0] == "ok":
        assert isinstance(event, EmbeddingEvent)
        assert event.usage is None
        assert event.malformed_usage == (("input_tokens",) if model == "usage-malformed" else ())
    else:  # the SDK's own model refuses the body: the call failed
        assert isinstance(event, EmbeddingFailedEvent)
        assert event.error_category is ErrorCategory.INVALID_RESPONSE


@SYNC_ASYNC
@pytest.mark.parametrize(
    ("status", "category"), [(429, ErrorCategory.RATE_LIMIT), (503, ErrorCategory.UNAVAILABLE)]
)
def test_an_error_status_is_one_event_and_the_sdk_error_unchanged(
    is_async: bool, status: int, category: ErrorCategory, standin: StandIn, tape: Tape
) -> None:
    bare = outcome(lambda: embed(mistral(standin), is_async, f"fail-{status}"))
    with pytest.raises(errors.SDKError) as caught:
        embed(spanledger.instrument(mistral(standin)), is_async, f"fail-{status}")
    assert ("raised", (type(caught.value), str(caught.value))) == bare
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (category, status)
    assert event.fingerprint is not None


@SYNC_ASYNC
def test_a_429_the_sdk_retries_is_one_event_per_attempt(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    standin.route(mistral_embeddings().failing(429), times=1)
    embed(spanledger.instrument(mistral(standin, retry_config=RETRY)), is_async, "mistral-embed")
    assert len(standin.requests) == 2
    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert (failed.error_category, failed.retried) == (ErrorCategory.RATE_LIMIT, True)
    assert isinstance(succeeded, EmbeddingEvent)
    assert (succeeded.attempt, succeeded.logical_call_id) == (2, failed.call_id)


@SYNC_ASYNC
def test_a_dropped_connection_is_unavailable(is_async: bool, standin: StandIn, tape: Tape) -> None:
    standin.route(mistral_embeddings().dropped())
    with pytest.raises(Exception) as caught:  # noqa: PT011 (whatever the SDK raises)
        embed(spanledger.instrument(mistral(standin)), is_async, "mistral-embed")
    assert SENTINEL not in str(caught.value)
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.UNAVAILABLE


def test_uninstrument_stops_recording(standin: StandIn, tape: Tape) -> None:
    client = spanledger.uninstrument(spanledger.instrument(mistral(standin)))
    embed(client, False, "mistral-embed")
    embed(client, True, "mistral-embed")
    assert tape.events == []


def test_the_switch_catches_clients_made_before_and_after(standin: StandIn, tape: Tape) -> None:
    before = mistral(standin)
    by_hand = spanledger.instrument(mistral(standin))
    spanledger.instrument(sdks=["mistralai"])
    try:
        after = mistral(standin)
        embed(before, False, "mistral-embed")
        embed(after, True, "mistral-embed")
        embed(by_hand, True, "mistral-embed")
    finally:
        spanledger.uninstrument()
    assert len(tape.events) == 3
    embed(after, False, "mistral-embed")
    embed(by_hand, False, "mistral-embed")
    assert len(tape.events) == 4


def test_no_text_or_key_reaches_an_event_a_log_or_an_exception(
    standin: StandIn, tape: Tape, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    client = spanledger.instrument(mistral(standin))
    embed(client, False, "mistral-embed")
    with pytest.raises(errors.ResponseValidationError) as invalid:
        embed(client, True, "usage-malformed")
    with pytest.raises(errors.SDKError) as caught:
        embed(client, False, "fail-401")
    assert len(tape.events) == 3
    raised = (str(invalid.value), str(caught.value))
    for surface in (caplog.text, *raised, *(e.model_dump_json() for e in tape.events)):
        assert SENTINEL not in surface
        assert API_KEY not in surface
