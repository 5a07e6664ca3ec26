"""google-genai's ``Client(vertexai=True)`` in Vertex AI express mode (an API key, no project or
location: the SDK requests ``/v1beta1/publishers/google/models/{m}:predict``) and on the global
endpoint (``location="global"``), instrumented, against the stand-in over loopback: each call
is recorded as on the regional routes, with the model the URL names and every figure the body
reports, the billable characters included."""

from __future__ import annotations

import asyncio
from typing import Any

import google.oauth2.credentials
import pytest
from google import genai
from google.genai import types as gtypes

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage
from spanledger.testing import StandIn, vertex_express_embeddings
from tests.instrument.conftest import Tape, tokens

API_KEY = "AQ.SENTINEL-vertex-express-key-7d2f"
TEXTS = ["ticks feed on blood", "the clock ticks"]
CHARACTERS = sum(len("".join(text.split())) for text in TEXTS)


@pytest.fixture(autouse=True)
def no_cloud_environment(monkeypatch: pytest.MonkeyPatch, standin: StandIn) -> None:
    """The SDK prefers a project from the environment over an API key: none here."""
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    standin.reset()


def express(standin: StandIn) -> genai.Client:
    http = gtypes.HttpOptions(base_url=standin.base_url("gcp.vertex_ai"))
    return genai.Client(vertexai=True, api_key=API_KEY, http_options=http)


def on_global(standin: StandIn) -> genai.Client:
    http = gtypes.HttpOptions(base_url=standin.base_url("gcp.vertex_ai"))
    credentials = google.oauth2.credentials.Credentials(token=API_KEY)  # type: ignore[no-untyped-call]
    return genai.Client(
        vertexai=True,
        project="proj",
        location="global",
        credentials=credentials,
        http_options=http,
    )


def embed(client: genai.Client, is_async: bool, model: str, texts: Any = TEXTS) -> Any:
    if is_async:
        return asyncio.run(client.aio.models.embed_content(model=model, contents=texts))
    return client.models.embed_content(model=model, contents=texts)


SYNC_ASYNC = pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])


@SYNC_ASYNC
def test_express_predict_is_recorded_with_its_model_and_figures(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    embed(spanledger.instrument(express(standin)), is_async, "text-embedding-005")

    [request] = standin.requests
    assert request.path == "/v1beta1/publishers/google/models/text-embedding-005:predict"
    assert request.headers.get("x-goog-api-key") == API_KEY  # the SDK's express mode
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.vertex_ai", "text-embedding-005")
    assert event.usage == EmbeddingUsage(
        input_tokens=sum(map(tokens, TEXTS)), billable_characters=CHARACTERS
    )
    assert (event.input_count, event.dimensions) == (2, 16)
    assert API_KEY not in event.model_dump_json()


@SYNC_ASYNC
def test_express_embed_content_is_recorded(is_async: bool, standin: StandIn, tape: Tape) -> None:
    model = "gemini-embedding-2-preview"
    embed(spanledger.instrument(express(standin)), is_async, model, TEXTS[:1])

    [request] = standin.requests
    assert request.path == f"/v1beta1/publishers/google/models/{model}:embedContent"
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.vertex_ai", model)
    assert event.usage == EmbeddingUsage(input_tokens=tokens(TEXTS[0]))


@SYNC_ASYNC
def test_the_global_endpoint_is_recorded_like_a_region(
    is_async: bool, standin: StandIn, tape: Tape
) -> None:
    embed(spanledger.instrument(on_global(standin)), is_async, "text-embedding-005")

    [request] = standin.requests
    assert request.path == (
        "/v1beta1/projects/proj/locations/global/publishers/google/models/"
        "text-embedding-005:predict"
    )
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.model == "text-embedding-005"
    assert event.usage == EmbeddingUsage(
        input_tokens=sum(map(tokens, TEXTS)), billable_characters=CHARACTERS
    )


def test_an_express_count_the_route_sets_is_the_one_recorded(standin: StandIn, tape: Tape) -> None:
    standin.route(vertex_express_embeddings(tokens=9, characters=1234), times=1)
    result = embed(
        spanledger.instrument(express(standin)), False, "text-multilingual-embedding-002"
    )
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == EmbeddingUsage(input_tokens=9, billable_characters=1234)
    assert result.metadata.billable_character_count == 1234  # what the SDK itself read
