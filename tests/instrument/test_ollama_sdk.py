"""ollama's ``Client`` / ``AsyncClient`` and the module-level ``ollama.embed``, instrumented,
against the stand-in: ``prompt_eval_count`` from the raw body, the legacy route's absent usage,
each HTTP call one event, per client and under the process-wide switch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import ollama
import pytest

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, ErrorCategory
from spanledger.testing import StandIn, ollama_embed
from tests.instrument.conftest import Tape, tokens

SENTINEL = "SENTINEL-ollama-text-77c2"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"the clock ticks {SENTINEL}"]
SYNC_ASYNC = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


@pytest.fixture(autouse=True)
def fresh(standin: StandIn) -> None:
    standin.reset()


def client(standin: StandIn, is_async: bool = False) -> Any:
    kind = ollama.AsyncClient if is_async else ollama.Client
    return kind(host=standin.base_url("ollama"))


def run(target: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    result = getattr(target, method)(*args, **kwargs)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def outcome(work: Callable[[], Any]) -> tuple[str, Any]:
    try:
        result = work()
    except Exception as exc:
        return ("raised", (type(exc), str(exc)))
    return ("ok", result.model_dump())


@SYNC_ASYNC
def test_embed_reads_prompt_eval_count(is_async: bool, standin: StandIn, tape: Tape) -> None:
    instrumented = spanledger.instrument(client(standin, is_async))
    result = run(instrumented, "embed", "nomic-embed-text", TEXTS, dimensions=8, truncate=True)
    bare = run(
        client(standin, is_async), "embed", "nomic-embed-text", TEXTS, dimensions=8, truncate=True
    )
    assert result.model_dump() == bare.model_dump()
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.response_model) == (
        "ollama",
        "nomic-embed-text",
        "nomic-embed-text",
    )
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))
    assert (event.input_count, event.dimensions) == (2, 8)
    assert event.request_params == {"dimensions": 8}
    assert event.request_extras == {"truncate": True}
    assert (event.server_address, event.server_port) == ("127.0.0.1", httpx.URL(standin.url).port)


@SYNC_ASYNC
def test_the_legacy_route_reports_no_usage(is_async: bool, standin: StandIn, tape: Tape) -> None:
    run(
        spanledger.instrument(client(standin, is_async)),
        "embeddings",
        model="all-minilm",
        prompt=TEXTS[0],
    )
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.usage, event.input_count, event.dimensions) == (None, 1, 16)
    assert standin.requests[-1].path == "/api/embeddings"


@SYNC_ASYNC
@pytest.mark.parametrize("model", ["usage-malformed", "usage-missing"])
def test_a_bad_or_absent_figure_is_not_reported(
    is_async: bool, model: str, standin: StandIn, tape: Tape
) -> None:
    bare = outcome(lambda: run(client(standin, is_async), "embed", model, TEXTS))
    seen = outcome(
        lambda: run(spanledger.instrument(client(standin, is_async)), "embed", model, TEXTS)
    )
    assert seen == bare
    [event] = tape.events
    if bare[0] == "ok":
        assert isinstance(event, EmbeddingEvent)
        assert event.usage is None
        assert event.malformed_usage == (("input_tokens",) if model == "usage-malformed" else ())
    else:  # the SDK's own model refuses ``prompt_eval_count: "abc"``
        assert isinstance(event, EmbeddingFailedEvent)
        assert event.error_category is ErrorCategory.INVALID_RESPONSE


@SYNC_ASYNC
@pytest.mark.parametrize(
    ("status", "category"),
    [
        (404, ErrorCategory.INVALID_MODEL),
        (429, ErrorCategory.RATE_LIMIT),
        (500, ErrorCategory.UNAVAILABLE),
    ],
)
def test_an_error_status_is_one_event_and_the_sdk_error_unchanged(
    is_async: bool, status: int, category: ErrorCategory, standin: StandIn, tape: Tape
) -> None:
    bare = outcome(lambda: run(client(standin, is_async), "embed", f"fail-{status}", TEXTS))
    with pytest.raises(ollama.ResponseError) as caught:
        run(spanledger.instrument(client(standin, is_async)), "embed", f"fail-{status}", TEXTS)
    assert ("raised", (type(caught.value), str(caught.value))) == bare
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (category, status)
    assert event.fingerprint is not None


@SYNC_ASYNC
def test_a_dropped_connection_is_unavailable(is_async: bool, standin: StandIn, tape: Tape) -> None:
    standin.route(ollama_embed().dropped())
    with pytest.raises(Exception) as caught:  # noqa: PT011 (whatever the SDK raises)
        run(spanledger.instrument(client(standin, is_async)), "embed", "nomic-embed-text", TEXTS)
    assert SENTINEL not in str(caught.value)
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.UNAVAILABLE


def test_uninstrument_stops_recording(standin: StandIn, tape: Tape) -> None:
    for is_async in (False, True):
        made = spanledger.uninstrument(spanledger.instrument(client(standin, is_async)))
        run(made, "embed", "nomic-embed-text", TEXTS)
    assert tape.events == []


@pytest.fixture
def default_client_at_standin(standin: StandIn) -> Iterator[None]:
    """Point the client ``ollama`` made at import (behind ``ollama.embed``) at the stand-in."""
    default = ollama._client._client
    saved = default.base_url
    default.base_url = standin.base_url("ollama")
    yield
    default.base_url = saved


def test_the_switch_catches_the_module_level_functions_and_every_client(
    standin: StandIn, tape: Tape, default_client_at_standin: None
) -> None:
    before = client(standin)
    by_hand = spanledger.instrument(client(standin, True))
    spanledger.instrument(sdks=["ollama"])
    try:
        after = client(standin)
        ollama.embed(model="nomic-embed-text", input=TEXTS[0])
        ollama.embeddings(model="nomic-embed-text", prompt=TEXTS[0])
        run(before, "embed", "nomic-embed-text", TEXTS)
        run(after, "embed", "nomic-embed-text", TEXTS)
        run(by_hand, "embeddings", "nomic-embed-text", TEXTS[0])
    finally:
        spanledger.uninstrument()
    assert len(tape.events) == 5
    assert [e.usage is None for e in tape.events] == [False, True, False, False, True]  # type: ignore[union-attr]
    ollama.embed(model="nomic-embed-text", input=TEXTS[0])
    run(after, "embed", "nomic-embed-text", TEXTS)
    assert len(tape.events) == 5


def test_no_text_reaches_an_event_a_log_or_an_exception(
    standin: StandIn, tape: Tape, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    instrumented = spanledger.instrument(client(standin))
    run(instrumented, "embed", "nomic-embed-text", TEXTS)
    with pytest.raises(ValueError, match="validation") as invalid:
        run(instrumented, "embed", "usage-malformed", TEXTS)
    with pytest.raises(ollama.ResponseError) as caught:
        run(instrumented, "embed", "fail-400", TEXTS)
    assert len(tape.events) == 3
    raised = (str(invalid.value), str(caught.value))
    for surface in (caplog.text, *raised, *(e.model_dump_json() for e in tape.events)):
        assert SENTINEL not in surface
