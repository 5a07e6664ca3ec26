"""openai 2.x, which every LlamaIndex app runs (``llama-index-llms-openai`` pins ``openai<3``):
its clients recorded one by one and under the switch, and LlamaIndex's ``OpenAIEmbedding``
(beside that LLM package) recorded by the switch. Runs in ``.venv-older`` only."""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from llama_index.embeddings.openai import OpenAIEmbedding  # type: ignore[import-untyped]

import spanledger
from spanledger import EmbeddingEvent, Recorder
from spanledger.instrumentation import instrumented_sdks
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Kept, Recording

API_KEY = "sk-openai-two-7c1e"
SENTINEL = "SENTINEL-openai-two-52bd"
TEXTS = [f"passage {i} on ticks {SENTINEL}" for i in range(3)]
PRIVATE = (SENTINEL, API_KEY)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def recording(standin: StandIn, caplog: pytest.LogCaptureFixture) -> Recording:
    return Recording(standin, caplog, PRIVATE)


def client(standin: StandIn, *, is_async: bool = False) -> Any:
    kind = openai.AsyncOpenAI if is_async else openai.OpenAI
    return kind(api_key=API_KEY, base_url=standin.base_url("openai") + "/v1", max_retries=0)


def test_the_llm_package_that_pins_openai_2_is_installed_beside_it() -> None:
    assert importlib.metadata.version("openai").startswith("2.")
    requires = importlib.metadata.requires("llama-index-llms-openai") or []
    assert any(r.startswith("openai") and "<3" in r for r in requires)


@pytest.mark.parametrize("mode", ["per-client", "process-wide"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_openai_2_clients_record_each_call(standin: StandIn, mode: str, is_async: bool) -> None:
    made = client(standin, is_async=is_async)
    if mode == "per-client":
        spanledger.instrument(made)
    else:
        spanledger.instrument(sdks=["openai"])
        assert instrumented_sdks() == ("openai",)
    kept = Kept()
    try:
        with spanledger.use(Recorder([kept])):
            if is_async:
                asyncio.run(made.embeddings.create(model="text-embedding-3-small", input=TEXTS))
            else:
                made.embeddings.create(model="text-embedding-3-small", input=TEXTS)
    finally:
        spanledger.uninstrument(made)
        spanledger.uninstrument()
    [event] = kept.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.input_count) == (
        "openai",
        "text-embedding-3-small",
        3,
    )
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))


def test_llama_index_openai_embedding_under_the_switch(
    standin: StandIn, recording: Recording
) -> None:
    embedder = OpenAIEmbedding(
        model="text-embedding-3-small",
        api_base=standin.base_url("openai") + "/v1",
        api_key=API_KEY,
        max_retries=0,
    )

    def work() -> Any:
        return embedder.get_text_embedding_batch(TEXTS)

    vectors, events = recording.run(work, lambda: spanledger.instrument(sdks=["openai"]))
    assert len(vectors) == len(TEXTS)
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == "openai"
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))
