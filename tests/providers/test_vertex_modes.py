"""``VertexEmbeddings`` in its three places: a region (``project`` and ``location``), the global
endpoint (``location="global"``) and Vertex AI express mode (no project: an API key, and no
project or location in the path), against the stand-in over loopback. Each call records the
model it names and every figure the body reports, the billable characters included."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage, ErrorCategory, ProviderError, Recorder
from spanledger.providers import VertexEmbeddings
from spanledger.testing import StandIn

KEY = "AQ.SENTINEL-express-key-0b9e"
TEXTS = ["moon and tides", "a clock"]
CHARACTERS = len("moonandtides") + len("aclock")
TOKENS = 4 + 2  # the stand-in's token per four UTF-8 bytes, each text at least one


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def events(standin: StandIn) -> Iterator[list[spanledger.Event]]:
    standin.reset()
    seen: list[spanledger.Event] = []
    with spanledger.use(Recorder([seen.append])):
        yield seen


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_express_mode_posts_without_project_or_location(
    standin: StandIn, events: list[spanledger.Event], is_async: bool
) -> None:
    embedder = VertexEmbeddings(
        "text-embedding-005", api_key=KEY, base_url=standin.base_url("gcp.vertex_ai")
    )
    with embedder:
        response = asyncio.run(embedder.aembed(TEXTS)) if is_async else embedder.embed(TEXTS)

    [request] = standin.requests
    assert request.path == "/v1/publishers/google/models/text-embedding-005:predict"
    assert request.headers.get("x-goog-api-key") == KEY
    assert "authorization" not in {name.lower() for name in request.headers}
    assert response.usage == EmbeddingUsage(input_tokens=TOKENS, billable_characters=CHARACTERS)
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("gcp.vertex_ai", "text-embedding-005")
    assert event.usage == response.usage
    assert KEY not in event.model_dump_json()


def test_express_mode_defaults_to_the_global_host() -> None:
    embedder = VertexEmbeddings("text-embedding-005", api_key=KEY)
    assert embedder.url == (
        "https://aiplatform.googleapis.com/v1/publishers/google/models/text-embedding-005:predict"
    )
    assert KEY not in repr(embedder)


def test_express_mode_reads_its_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    assert VertexEmbeddings("text-embedding-005").missing_key is None


def test_express_mode_without_a_key_is_refused_before_sending(
    monkeypatch: pytest.MonkeyPatch, events: list[spanledger.Event]
) -> None:
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    embedder = VertexEmbeddings("text-embedding-005")
    assert embedder.missing_key == "GOOGLE_API_KEY"
    with embedder, pytest.raises(ProviderError) as refused:
        embedder.embed(TEXTS)
    assert refused.value.category is ErrorCategory.AUTHENTICATION
    assert "GOOGLE_API_KEY" in str(refused.value)
    assert len(events) == 1


def test_a_location_without_a_project_is_refused() -> None:
    with pytest.raises(ValueError, match="express mode"):
        VertexEmbeddings("text-embedding-005", location="europe-west4", api_key=KEY)


@pytest.mark.parametrize(
    ("location", "host"),
    [
        ("global", "aiplatform.googleapis.com"),
        ("europe-west4", "europe-west4-aiplatform.googleapis.com"),
        (None, "us-central1-aiplatform.googleapis.com"),
    ],
)
def test_a_project_posts_to_its_location_on_its_host(location: str | None, host: str) -> None:
    embedder = VertexEmbeddings("text-embedding-005", project="p", location=location)
    place = location or "us-central1"
    assert embedder.url == (
        f"https://{host}/v1/projects/p/locations/{place}/publishers/google/models/"
        "text-embedding-005:predict"
    )


def test_the_global_endpoint_is_recorded_like_a_region(
    standin: StandIn, events: list[spanledger.Event]
) -> None:
    with VertexEmbeddings(
        "text-multilingual-embedding-002",
        project="p",
        location="global",
        api_key="an-access-token",
        base_url=standin.base_url("gcp.vertex_ai"),
    ) as embedder:
        embedder.embed(TEXTS)

    [request] = standin.requests
    assert request.path == (
        "/v1/projects/p/locations/global/publishers/google/models/"
        "text-multilingual-embedding-002:predict"
    )
    assert request.headers.get("authorization") == "Bearer an-access-token"
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert event.model == "text-multilingual-embedding-002"
    assert event.usage == EmbeddingUsage(input_tokens=TOKENS, billable_characters=CHARACTERS)
