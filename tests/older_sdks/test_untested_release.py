"""A release below its tested range really installed: ollama 0.5.4, which nothing else here
needs (spanledger's tests cover ollama 0.6.x). The switch leaves it unpatched with one warning
and switches the rest on, its HTTP is still recorded with ``http=True``, ``configure()`` starts
as usual, and ``instrument(client)`` records its client, whose shape is the one spanledger
knows, with the same warning. Runs in ``.venv-older`` only."""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Iterator
from pathlib import Path

import cohere
import ollama
import openai
import pytest

import spanledger
from spanledger import EmbeddingEvent, Recorder
from spanledger.instrumentation import (
    SdkState,
    _skipped,
    instrumented_sdks,
    is_instrumented,
    sdk_status,
)
from spanledger.testing import StandIn
from tests.frameworks.privacy import Kept

API_KEY = "sk-untested-release-0d4f"
TEXTS = ["a tick is a small arachnid", "ticks feed on blood"]
OLLAMA_TESTED = "0.6 and later, below 0.7"
OLLAMA_METHODS = [
    (kind, name) for kind in (ollama.Client, ollama.AsyncClient) for name in ("embed", "embeddings")
]


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    _skipped._forget_warnings()
    yield
    spanledger.uninstrument()
    _skipped._forget_warnings()


def untested_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "spanledger.instrumentation"
        and r.levelno == logging.WARNING
        and r.getMessage().startswith("untested_version ")
    ]


def ollama_state() -> list[object]:
    return [vars(kind).get(name) for kind, name in OLLAMA_METHODS]


def test_ollama_is_a_release_below_its_tested_range() -> None:
    assert importlib.metadata.version("ollama") == "0.5.4"
    assert sdk_status()["ollama"].state is SdkState.UNTESTED_VERSION


def test_the_switch_leaves_it_alone_once_warned_and_records_the_rest_and_its_http(
    standin: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    before = ollama_state()
    module_embed = ollama.embed
    vendors = {standin.base_url("ollama"): "ollama"}
    spanledger.instrument(http=True, vendors=vendors)
    spanledger.instrument()
    spanledger.instrument(sdks=["ollama", "openai"], http=True, vendors=vendors)

    assert ollama_state() == before
    assert ollama.embed is module_embed
    assert "ollama" not in instrumented_sdks()
    assert {"openai", "cohere", "voyageai", "http"} <= set(instrumented_sdks())
    [warning] = untested_warnings(caplog)
    assert "package='ollama'" in warning
    assert "version='0.5.4'" in warning
    assert f"tested='{OLLAMA_TESTED}'" in warning
    status = sdk_status()["ollama"]
    assert (status.state, status.version, status.tested) == (
        SdkState.UNTESTED_VERSION,
        "0.5.4",
        OLLAMA_TESTED,
    )

    kept = Kept()
    with spanledger.use(Recorder([kept])):
        ollama.Client(host=standin.base_url("ollama")).embed(model="nomic-embed-text", input=TEXTS)
        openai.OpenAI(
            api_key=API_KEY, base_url=standin.base_url("openai") + "/v1", max_retries=0
        ).embeddings.create(model="text-embedding-3-small", input=TEXTS)
        cohere.ClientV2(api_key=API_KEY, base_url=standin.base_url("cohere")).embed(
            model="embed-english-v3.0",
            texts=TEXTS,
            input_type="search_document",
            embedding_types=["float"],
        )
    assert sorted(event.provider for event in kept.events) == ["cohere", "ollama", "openai"]
    assert all(isinstance(e, EmbeddingEvent) and e.input_count == 2 for e in kept.events)


def test_configure_starts_and_the_switch_records_beside_it(
    standin: StandIn, tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    recorder = spanledger.configure(events_path=log, install=False, environ={})
    try:
        spanledger.instrument()
        with spanledger.use(recorder):
            openai.OpenAI(
                api_key=API_KEY, base_url=standin.base_url("openai") + "/v1", max_retries=0
            ).embeddings.create(model="text-embedding-3-small", input=TEXTS)
    finally:
        recorder.shutdown()
    assert len(log.read_text().splitlines()) == 1


def test_instrument_client_records_a_client_of_the_shape_it_knows_with_the_warning(
    standin: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    client = spanledger.instrument(ollama.Client(host=standin.base_url("ollama")))
    try:
        assert is_instrumented(client)
        kept = Kept()
        with spanledger.use(Recorder([kept])):
            client.embed(model="nomic-embed-text", input=TEXTS)
        [event] = kept.events
        assert isinstance(event, EmbeddingEvent)
        assert (event.provider, event.model, event.input_count) == ("ollama", "nomic-embed-text", 2)
        assert event.usage is not None
        [warning] = untested_warnings(caplog)
        assert "version='0.5.4'" in warning
    finally:
        spanledger.uninstrument(client)
