"""Vertex AI's express mode (an API key; no project or location in the path) and its global
endpoint (``locations/global`` on ``aiplatform.googleapis.com``), recognised among plain HTTP
and recorded like the regional routes: the model the URL names, and the figures the body
reports, with the real recordings replayed at each URL.

The express URL is google-genai's ``Client(vertexai=True, api_key=...)`` (``v1beta1``, base
URL ``https://aiplatform.googleapis.com/``, the path built without ``projects/…`` when neither
project nor location is set) and the express-mode REST reference's ``/v1/{model}`` routes.
"""

from __future__ import annotations

import httpx
import pytest

from spanledger import EmbeddingUsage
from spanledger.capture.vendors import recognise
from spanledger.wire.endpoints import (
    VERTEX_EMBED_CONTENT,
    VERTEX_EMBEDDINGS,
    VERTEX_EXPRESS_EMBED_CONTENT,
    VERTEX_EXPRESS_EMBEDDINGS,
    Endpoint,
)

from .replay import load, replay_mocked

HOST = "https://aiplatform.googleapis.com"
PREDICT = load("vertex-predict-text-embedding-004-3-texts")
EMBED_CONTENT = load("vertex-embedcontent-gemini-embedding-2")

URLS: list[tuple[str, Endpoint]] = [
    (f"{HOST}/v1/publishers/google/models/text-embedding-005:predict", VERTEX_EXPRESS_EMBEDDINGS),
    (
        f"{HOST}/v1beta1/publishers/google/models/text-embedding-005:predict",
        VERTEX_EXPRESS_EMBEDDINGS,
    ),
    (
        f"{HOST}/v1/projects/p/locations/global/publishers/google/models/text-embedding-005:predict",
        VERTEX_EMBEDDINGS,
    ),
    (
        f"{HOST}/v1/publishers/google/models/gemini-embedding-2:embedContent",
        VERTEX_EXPRESS_EMBED_CONTENT,
    ),
    (
        f"{HOST}/v1beta1/projects/p/locations/global/publishers/google/models/"
        "gemini-embedding-2:embedContent",
        VERTEX_EMBED_CONTENT,
    ),
]


@pytest.mark.parametrize(("url", "endpoint"), URLS, ids=[url[len(HOST) :] for url, _ in URLS])
def test_the_url_is_recognised_as_its_endpoint(url: str, endpoint: Endpoint) -> None:
    body = PREDICT if url.endswith(":predict") else EMBED_CONTENT
    assert recognise(httpx.URL(url), body.request_body, {}) is endpoint


@pytest.mark.parametrize(
    "url",
    [
        f"{HOST}/v1/publishers/google/models/text-embedding-005:predict?key=AIza-test",
        f"{HOST}/v1/projects/p/locations/global/publishers/google/models/text-embedding-005:predict",
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
        "publishers/google/models/text-embedding-005:predict",
    ],
    ids=["express", "global", "regional"],
)
def test_a_predict_call_is_recorded_alike_wherever_it_went(url: str) -> None:
    [event] = replay_mocked(PREDICT, url=url).events
    assert event.kind == "embedding"
    assert (event.provider, event.model) == ("gcp.vertex_ai", "text-embedding-005")
    assert event.usage == EmbeddingUsage(input_tokens=4, billable_characters=20)
    assert (event.input_count, event.dimensions) == (3, 8)
    assert event.server_address == httpx.URL(url).host


@pytest.mark.parametrize(
    "url",
    [
        f"{HOST}/v1/publishers/google/models/gemini-embedding-2:embedContent",
        f"{HOST}/v1/projects/p/locations/global/publishers/google/models/"
        "gemini-embedding-2:embedContent",
    ],
    ids=["express", "global"],
)
def test_an_embed_content_call_is_recorded_alike(url: str) -> None:
    [event] = replay_mocked(EMBED_CONTENT, url=url).events
    assert event.kind == "embedding"
    assert (event.provider, event.model) == ("gcp.vertex_ai", "gemini-embedding-2")
    assert event.usage == EmbeddingUsage(input_tokens=11)


def test_an_express_route_on_another_host_is_still_vertex() -> None:
    """A proxy in front of express mode: the route alone tells the endpoint."""
    url = "https://llm-gateway.internal/v1/publishers/google/models/text-embedding-005:predict"
    assert recognise(httpx.URL(url), PREDICT.request_body, {}) is VERTEX_EXPRESS_EMBEDDINGS
