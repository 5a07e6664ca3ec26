"""``openai.AzureOpenAI`` / ``AsyncAzureOpenAI``, instrumented per client and by the switch,
against the stand-in's Azure prefix: recorded as ``azure.ai.openai``, the deployment the URL
names as the model, the model the response names as ``response_model``, read by the route the
SDK really requested. A plain ``openai.OpenAI`` stays OpenAI's, even on a path that ends as
Azure's v1 route does, unless the host is Azure's."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

import spanledger
from spanledger import (
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
)
from spanledger.testing import Reply, Route, StandIn, azure_embeddings
from tests.instrument.conftest import Tape, tokens

API_KEY = "azure-key-SENTINEL-7f31"
SENTINEL = "SENTINEL-azure-c2d9"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"deer carry ticks {SENTINEL}"]
VERSION = "2024-10-21"
AZURE_HOST = "contoso-rag.openai.azure.com"
DEPLOYMENT_ROUTE = "/openai/deployments/{deployment}/embeddings"


@pytest.fixture
def server() -> Iterator[StandIn]:
    with StandIn() as standin:
        yield standin


def azure(server: StandIn, *, is_async: bool = False, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    kind = openai.AsyncAzureOpenAI if is_async else openai.AzureOpenAI
    return kind(
        azure_endpoint=server.base_url("azure.ai.openai"),
        api_version=VERSION,
        api_key=API_KEY,
        **options,
    )


async def embed(client: Any, model: str, *, is_async: bool) -> Any:
    if is_async:
        return await client.embeddings.create(model=model, input=TEXTS)
    return client.embeddings.create(model=model, input=TEXTS)


def expected_usage() -> EmbeddingUsage:
    return EmbeddingUsage(input_tokens=sum(map(tokens, TEXTS)))


def assert_private(tape: Tape) -> None:
    for _, record in tape.log:
        text = record.model_dump_json()
        assert SENTINEL not in text
        assert API_KEY not in text


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_deployment_named_by_the_sdk_from_the_model_argument(
    server: StandIn, is_async: bool, tape: Tape
) -> None:
    client = spanledger.instrument(azure(server, is_async=is_async))
    result = await embed(client, "rag-embedder", is_async=is_async)

    [request] = server.requests
    assert request.path == "/openai/deployments/rag-embedder/embeddings"
    assert [kind for kind, _ in tape.log] == ["start", "event"]
    (_, started), (_, event) = tape.log
    assert isinstance(started, CallStarted)
    assert (started.provider, started.model) == ("azure.ai.openai", "rag-embedder")
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("azure.ai.openai", "rag-embedder")
    assert event.response_model == result.model == "text-embedding-3-small"
    assert event.usage == expected_usage()
    assert (event.input_count, event.dimensions) == (2, len(result.data[0].embedding))
    assert event.server_address == "127.0.0.1"
    assert_private(tape)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_the_clients_own_deployment_is_the_model_and_the_body_names_the_answer(
    server: StandIn, is_async: bool, tape: Tape
) -> None:
    server.route(azure_embeddings(response_model="text-embedding-3-large"))
    client = spanledger.instrument(azure(server, is_async=is_async, azure_deployment="prod-emb"))
    result = await embed(client, "text-embedding-3-small", is_async=is_async)

    [request] = server.requests
    assert request.path == "/openai/deployments/prod-emb/embeddings"
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("azure.ai.openai", "prod-emb")
    assert event.response_model == result.model == "text-embedding-3-large"
    assert event.usage == expected_usage()


class ToAzureHost(httpx2.HTTPTransport):
    """Sends each request, whatever its host, to the stand-in's Azure prefix: the SDK (and the
    instrumentation) see the Azure host the client was given."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = httpx2.URL(prefix)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return super().handle_request(_forwarded(request, self.prefix))


class ToAzureHostAsync(httpx2.AsyncHTTPTransport):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = httpx2.URL(prefix)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await super().handle_async_request(_forwarded(request, self.prefix))


def _forwarded(request: httpx2.Request, prefix: httpx2.URL) -> httpx2.Request:
    url = prefix.copy_with(raw_path=prefix.raw_path.rstrip(b"/") + request.url.raw_path)
    headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
    return httpx2.Request(request.method, url, headers=headers, content=request.content)


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_the_v1_route_on_an_azure_host_names_the_deployment_in_the_body(
    server: StandIn, is_async: bool, tape: Tape
) -> None:
    prefix = server.base_url("azure.ai.openai")
    base_url = f"https://{AZURE_HOST}/openai/v1/"
    if is_async:
        client: Any = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=API_KEY,
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=ToAzureHostAsync(prefix)),
        )
    else:
        client = openai.OpenAI(
            base_url=base_url,
            api_key=API_KEY,
            max_retries=0,
            http_client=httpx2.Client(transport=ToAzureHost(prefix)),
        )
    spanledger.instrument(client)
    result = await embed(client, "text-embedding-3-large", is_async=is_async)

    [request] = server.requests
    assert request.path == "/openai/v1/embeddings"
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("azure.ai.openai", "text-embedding-3-large")
    assert (event.server_address, event.server_port) == (AZURE_HOST, 443)
    assert event.response_model == "text-embedding-3-large"
    assert event.response_id is not None  # the v1 route's answer carries an id
    assert event.usage == expected_usage()
    assert result.usage.prompt_tokens == expected_usage().input_tokens


def test_an_azure_client_given_a_v1_base_url_still_posts_to_a_deployment(
    server: StandIn, tape: Tape
) -> None:
    """The SDK adds ``/deployments/{model}`` to any base URL that names none, ``/openai/v1/``
    too: the request is recorded by the URL it went to (this stand-in serves no such route)."""
    client = spanledger.instrument(
        openai.AzureOpenAI(
            base_url=server.base_url("azure.ai.openai") + "/openai/v1/",
            api_version="preview",
            api_key=API_KEY,
            max_retries=0,
        )
    )
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="text-embedding-3-large", input=TEXTS)

    [request] = server.requests
    assert request.path == "/openai/v1/deployments/text-embedding-3-large/embeddings"
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.provider, event.model) == ("azure.ai.openai", "text-embedding-3-large")
    assert (event.status_code, event.error_category) == (404, ErrorCategory.INVALID_MODEL)


def _rate_limited() -> Route:
    """Azure's 429, asking the SDK to retry at once."""
    body = {"error": {"code": "429", "message": "Rate limit is exceeded."}}
    return Route(
        "azure.ai.openai",
        DEPLOYMENT_ROUTE,
        lambda request: Reply(429, body, {"retry-after-ms": "1", "retry-after": "0"}),
    )


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_429_the_sdk_retries_is_one_event_per_attempt(
    server: StandIn, is_async: bool, tape: Tape
) -> None:
    server.route(_rate_limited(), times=1)
    client = spanledger.instrument(azure(server, is_async=is_async, max_retries=2))
    result = await embed(client, "rag-embedder", is_async=is_async)

    assert len(server.requests) == 2
    limited, answered = tape.events
    assert isinstance(limited, EmbeddingFailedEvent)
    assert (limited.provider, limited.model) == ("azure.ai.openai", "rag-embedder")
    assert (limited.status_code, limited.error_category) == (429, ErrorCategory.RATE_LIMIT)
    assert limited.retried is True
    assert isinstance(answered, EmbeddingEvent)
    assert (answered.provider, answered.model) == ("azure.ai.openai", "rag-embedder")
    assert answered.response_model == result.model
    assert answered.usage == expected_usage()
    assert answered.logical_call_id == limited.logical_call_id == limited.call_id
    assert answered.call_id != limited.call_id
    assert_private(tape)


def test_nothing_the_caller_sent_reaches_events_or_logs(
    server: StandIn, tape: Tape, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="spanledger")
    server.route(azure_embeddings().failing(400))
    client = spanledger.instrument(azure(server))
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="rag-embedder", input=TEXTS)
    server.reset()
    client.embeddings.create(model="rag-embedder", input=TEXTS, dimensions=64)

    assert [type(event) for event in tape.events] == [EmbeddingFailedEvent, EmbeddingEvent]
    assert tape.events[1].request_params == {"dimensions": 64}
    assert_private(tape)
    for event in tape.events:
        assert "rag-embedder" in repr(event)
        assert SENTINEL not in repr(event)
        assert API_KEY not in repr(event)
    assert SENTINEL not in caplog.text
    assert API_KEY not in caplog.text


def test_uninstrument_takes_everything_back(server: StandIn, tape: Tape) -> None:
    client = azure(server)
    resource = client.embeddings  # the SDK caches its resource on first use
    before, resource_before = dict(vars(client)), dict(vars(resource))
    spanledger.instrument(client)
    client.embeddings.create(model="rag-embedder", input=TEXTS)
    spanledger.uninstrument(client)
    assert (vars(client), vars(resource)) == (before, resource_before)
    client.embeddings.create(model="rag-embedder", input=TEXTS)

    assert len(server.requests) == 2
    assert len(tape.events) == 1


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_the_switch_records_azure_clients_made_before_and_after_it(
    server: StandIn, is_async: bool, tape: Tape
) -> None:
    earlier = azure(server, is_async=is_async)
    spanledger.instrument(sdks=["openai"])
    try:
        later = azure(server, is_async=is_async, azure_deployment="prod-emb")
        await embed(earlier, "rag-embedder", is_async=is_async)
        await embed(later, "text-embedding-3-small", is_async=is_async)
    finally:
        spanledger.uninstrument()
    await embed(earlier, "rag-embedder", is_async=is_async)

    assert len(server.requests) == 3
    assert [(e.provider, e.model) for e in tape.events] == [
        ("azure.ai.openai", "rag-embedder"),
        ("azure.ai.openai", "prod-emb"),
    ]
    assert all(isinstance(e, EmbeddingEvent) and e.usage is not None for e in tape.events)


def test_a_plain_openai_client_on_a_path_like_azures_stays_openai(
    server: StandIn, tape: Tape
) -> None:
    """The stand-in's OpenAI prefix makes the path ``/openai/v1/embeddings``, as Azure's v1
    route ends: only an Azure host or an Azure client makes it Azure's."""
    client = spanledger.instrument(
        openai.OpenAI(base_url=server.base_url("openai") + "/v1", api_key=API_KEY, max_retries=0)
    )
    client.embeddings.create(model="text-embedding-3-small", input=TEXTS)

    [request] = server.requests
    assert (request.vendor, request.path) == ("openai", "/v1/embeddings")
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("openai", "text-embedding-3-small")
    assert event.usage == expected_usage()


def test_a_mistral_model_through_the_openai_sdk_is_mistrals(server: StandIn, tape: Tape) -> None:
    """As plain traffic is read: Mistral's wire (LiteLLM's ``mistral/`` takes this path)."""
    client = spanledger.instrument(
        openai.OpenAI(
            base_url=server.base_url("mistral_ai") + "/v1", api_key=API_KEY, max_retries=0
        )
    )
    client.embeddings.create(model="mistral-embed", input=TEXTS)

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.response_model) == (
        "mistral_ai",
        "mistral-embed",
        "mistral-embed",
    )
    assert event.usage == expected_usage()
