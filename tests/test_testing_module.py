"""``spanledger.testing`` as a user meets it: only its public API and the public providers,
over real loopback sockets, with a recorder whose sink is a list."""

from __future__ import annotations

import inspect
import logging
import socket
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

import spanledger
from spanledger import testing
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    JinaEmbeddings,
    JinaReranker,
    OpenAIEmbeddings,
    TEIEmbeddings,
    TEIReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.testing import (
    RecordedRequest,
    Reply,
    Route,
    StandIn,
    azure_embeddings,
    azure_v1_embeddings,
    bedrock_cohere_embeddings,
    bedrock_cohere_rerank,
    bedrock_nova_embeddings,
    bedrock_rerank,
    bedrock_titan_embeddings,
    cohere_embeddings,
    cohere_rerank,
    cohere_v1_embeddings,
    cohere_v1_rerank,
    gemini_embed_content,
    gemini_embeddings,
    jina_embeddings,
    jina_rerank,
    mistral_embeddings,
    ollama_embed,
    ollama_embeddings,
    ollama_openai_embeddings,
    openai_embeddings,
    standin_vector,
    tei_embeddings,
    tei_rerank,
    vertex_embed_content,
    vertex_embeddings,
    vertex_express_embed_content,
    vertex_express_embeddings,
    vertex_rank,
    voyage_embeddings,
    voyage_rerank,
)

API_KEY = "sk-test-7f3a"
SECRET_TEXT = "the-caller-text-4b1e9d"
DOCS = ["moon tides", "sun", "tides of the moon"]


@pytest.fixture
def server() -> Iterator[StandIn]:
    with StandIn() as running:
        yield running


@pytest.fixture
def events() -> Iterator[list[spanledger.Event]]:
    seen: list[spanledger.Event] = []
    with spanledger.use(spanledger.Recorder([seen.append])):
        yield seen


@dataclass(frozen=True)
class Endpoint:
    """One vendor endpoint: its scripted route, the provider that calls it and what it bills."""

    name: str
    route: Route
    call: Callable[[str], object]  # base_url -> drives one call
    usage: spanledger.EmbeddingUsage | spanledger.RerankUsage | None
    path: str | None = None  # the path the call sends, where the route's is a template


def _embed(kind: Any, model: str) -> Callable[[str], object]:
    def call(base_url: str) -> object:
        with kind(model, base_url=base_url, api_key=API_KEY) as provider:
            return provider.embed(["alpha beta", "gamma"])

    return call


def _rerank(kind: Any, model: str) -> Callable[[str], object]:
    def call(base_url: str) -> object:
        with kind(model, base_url=base_url, api_key=API_KEY) as provider:
            return provider.rerank("moon tides", DOCS, top_k=2)

    return call


def _http(vendor: str, path: str, body: dict[str, Any]) -> Callable[[str], object]:
    """A call with no provider class: plain httpx, recorded by spanledger's transport."""

    def call(base_url: str) -> object:
        recording = spanledger.instrumentation.transport(vendors={base_url: vendor})
        with httpx.Client(transport=recording) as client:
            return client.post(base_url + path, json=body)

    return call


def _cloud(name: str, route: Route, path: str, body: dict[str, Any], usage: Any) -> Endpoint:
    return Endpoint(name, route, _http(route.vendor, path, body), usage, path.partition("?")[0])


TITAN = "/model/amazon.titan-embed-text-v2%3A0/invoke"
VERTEX = "/v1/projects/p/locations/us-central1/publishers/google/models"
RECORDS = [{"id": f"r{i}", "content": d} for i, d in enumerate(DOCS)]
AGENT_RERANK = {
    "queries": [{"type": "TEXT", "textQuery": {"text": "moon tides"}}],
    "sources": [{"inlineDocumentSource": {"textDocument": {"text": d}}} for d in DOCS],
    "rerankingConfiguration": {
        "bedrockRerankingConfiguration": {
            "numberOfResults": 2,
            "modelConfiguration": {"modelArn": "arn:aws:bedrock:::foundation-model/amazon.rerank"},
        }
    },
}
TEXTS = ["alpha beta", "gamma"]
TOKENS = spanledger.EmbeddingUsage(input_tokens=11)
CLOUD_ENDPOINTS = [
    _cloud("bedrock-titan", bedrock_titan_embeddings(tokens=11), TITAN, {"inputText": "a"}, TOKENS),
    _cloud(
        "bedrock-cohere-embed",
        bedrock_cohere_embeddings(tokens=11),
        "/model/cohere.embed-v4%3A0/invoke",
        {"texts": TEXTS},
        TOKENS,
    ),
    _cloud(
        "bedrock-nova",
        bedrock_nova_embeddings(tokens=11),
        "/model/amazon.nova-2-multimodal-embeddings-v1%3A0/invoke",
        {"singleEmbeddingParams": {"text": {"value": "a"}}},
        TOKENS,
    ),
    _cloud(
        "bedrock-cohere-rerank",
        bedrock_cohere_rerank(),
        "/model/cohere.rerank-v3-5%3A0/invoke",
        {"query": "moon tides", "documents": DOCS, "top_n": 2},
        None,
    ),
    _cloud("bedrock-rerank", bedrock_rerank(), "/rerank", AGENT_RERANK, None),
    _cloud(
        "gemini-batch",
        gemini_embeddings(tokens=11),
        "/v1beta/models/gemini-embedding-2:batchEmbedContents",
        {"requests": [{"content": {"parts": [{"text": t}]}} for t in TEXTS]},
        TOKENS,
    ),
    _cloud(
        "gemini-embed-content",
        gemini_embed_content(tokens=11),
        "/v1beta/models/gemini-embedding-2:embedContent",
        {"content": {"parts": [{"text": "a"}]}},
        TOKENS,
    ),
    _cloud(
        "vertex-predict",
        vertex_embeddings(tokens=11),
        f"{VERTEX}/text-embedding-005:predict",
        {"instances": [{"content": t} for t in TEXTS]},
        spanledger.EmbeddingUsage(input_tokens=11, billable_characters=len("alphabetagamma")),
    ),
    _cloud(
        "vertex-express-predict",
        vertex_express_embeddings(tokens=11, characters=30),
        "/v1/publishers/google/models/text-embedding-005:predict",
        {"instances": [{"content": t} for t in TEXTS]},
        spanledger.EmbeddingUsage(input_tokens=11, billable_characters=30),
    ),
    _cloud(
        "vertex-express-embed-content",
        vertex_express_embed_content(tokens=11),
        "/v1/publishers/google/models/gemini-embedding-2:embedContent",
        {"content": {"parts": [{"text": "a"}]}},
        TOKENS,
    ),
    _cloud(
        "vertex-embed-content",
        vertex_embed_content(tokens=11),
        f"{VERTEX}/gemini-embedding-001:embedContent",
        {"content": {"parts": [{"text": "a"}]}},
        TOKENS,
    ),
    _cloud(
        "vertex-rank",
        vertex_rank(),
        "/v1/projects/p/locations/global/rankingConfigs/default_ranking_config:rank",
        {"query": "moon tides", "records": RECORDS, "topN": 2},
        None,
    ),
    _cloud(
        "azure-deployment",
        azure_embeddings(tokens=11),
        "/openai/deployments/my-embedder/embeddings?api-version=2024-10-21",
        {"input": TEXTS},
        TOKENS,
    ),
    _cloud(
        "azure-v1",
        azure_v1_embeddings(tokens=11),
        "/openai/v1/embeddings",
        {"model": "my-embedder", "input": TEXTS},
        TOKENS,
    ),
    _cloud(
        "mistral",
        mistral_embeddings(tokens=11),
        "/v1/embeddings",
        {"model": "mistral-embed", "input": TEXTS},
        TOKENS,
    ),
    _cloud(
        "ollama-embed",
        ollama_embed(tokens=11),
        "/api/embed",
        {"model": "nomic-embed-text", "input": TEXTS},
        TOKENS,
    ),
    _cloud(
        "ollama-legacy",
        ollama_embeddings(),
        "/api/embeddings",
        {"model": "nomic-embed-text", "prompt": "a"},
        None,
    ),
    _cloud(
        "ollama-openai",
        ollama_openai_embeddings(tokens=11),
        "/v1/embeddings",
        {"model": "nomic-embed-text", "input": TEXTS},
        TOKENS,
    ),
]
ENDPOINTS = [
    Endpoint(
        "openai-embeddings", openai_embeddings(tokens=11), _embed(OpenAIEmbeddings, "m"), TOKENS
    ),
    Endpoint(
        "cohere-embeddings", cohere_embeddings(tokens=11), _embed(CohereEmbeddings, "m"), TOKENS
    ),
    Endpoint(
        "cohere-rerank",
        cohere_rerank(search_units=4),
        _rerank(CohereReranker, "m"),
        spanledger.RerankUsage(search_units=4),
    ),
    Endpoint("jina-embeddings", jina_embeddings(tokens=11), _embed(JinaEmbeddings, "m"), TOKENS),
    Endpoint(
        "jina-rerank",
        jina_rerank(tokens=23),
        _rerank(JinaReranker, "m"),
        spanledger.RerankUsage(input_tokens=23),
    ),
    Endpoint("tei-embeddings", tei_embeddings(), _embed(TEIEmbeddings, "bge"), None),
    Endpoint("tei-rerank", tei_rerank(), _rerank(TEIReranker, "bge-reranker"), None),
    Endpoint(
        "voyage-embeddings", voyage_embeddings(tokens=11), _embed(VoyageEmbeddings, "m"), TOKENS
    ),
    Endpoint(
        "voyage-rerank",
        voyage_rerank(tokens=23),
        _rerank(VoyageReranker, "m"),
        spanledger.RerankUsage(input_tokens=23),
    ),
    *CLOUD_ENDPOINTS,
]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_each_endpoint_answers_and_the_event_has_the_usage_its_route_reports(
    server: StandIn, events: list[spanledger.Event], endpoint: Endpoint
) -> None:
    server.route(endpoint.route)
    endpoint.call(server.base_url(endpoint.route.vendor))
    [event] = events
    assert isinstance(event, spanledger.EmbeddingEvent | spanledger.RerankEvent)
    assert event.usage == endpoint.usage
    assert (event.server_address, event.server_port) == ("127.0.0.1", httpx.URL(server.url).port)
    [request] = server.requests
    sent = endpoint.path or endpoint.route.path
    assert (request.vendor, request.path) == (endpoint.route.vendor, sent)


def test_embeddings_are_the_documented_stand_in_vectors(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    with CohereEmbeddings("m", base_url=server.base_url("cohere"), api_key=API_KEY) as embedder:
        response = embedder.embed(["first", "second"], dimensions=8)
    assert response.vectors == [standin_vector("first", 8), standin_vector("second", 8)]
    assert [e.kind for e in events] == ["embedding"]


@pytest.mark.parametrize(
    ("route", "provider"),
    [
        (openai_embeddings(report_usage=False), OpenAIEmbeddings),
        (jina_embeddings(report_usage=False), JinaEmbeddings),
    ],
)
def test_a_route_without_usage_gives_an_event_with_none(
    server: StandIn, events: list[spanledger.Event], route: Route, provider: Any
) -> None:
    server.route(route)
    _embed(provider, "m")(server.base_url(route.vendor))
    [event] = events
    assert isinstance(event, spanledger.EmbeddingEvent)
    assert event.usage is None


def test_a_scripted_429_is_a_failed_event_with_its_retry_after_then_the_endpoint_recovers(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(voyage_embeddings().failing(429, retry_after=7), times=1)
    with VoyageEmbeddings("m", base_url=server.base_url("voyageai"), api_key=API_KEY) as embedder:
        with pytest.raises(spanledger.ProviderError) as caught:
            embedder.embed(["x"])
        embedder.embed(["x"])
    assert caught.value.category is spanledger.ErrorCategory.RATE_LIMIT
    failed, succeeded = events
    assert isinstance(failed, spanledger.EmbeddingFailedEvent)
    assert (failed.status_code, failed.retry_after) == (429, 7.0)
    assert failed.error_category is spanledger.ErrorCategory.RATE_LIMIT
    assert isinstance(succeeded, spanledger.EmbeddingEvent)
    assert len(server.requests) == 2


def test_retry_after_may_be_an_http_date(server: StandIn, events: list[spanledger.Event]) -> None:
    server.route(cohere_rerank().failing(503, retry_after="Thu, 01 Jan 1970 00:00:00 GMT"))
    with (
        CohereReranker("m", base_url=server.base_url("cohere"), api_key=API_KEY) as reranker,
        pytest.raises(spanledger.ProviderError),
    ):
        reranker.rerank("q", DOCS)
    [event] = events
    assert isinstance(event, spanledger.RerankFailedEvent)
    assert (event.status_code, event.retry_after) == (503, 0.0)  # a date in the past


def test_a_malformed_body_gives_provider_invalid_response(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(cohere_rerank().malformed())
    with (
        CohereReranker("m", base_url=server.base_url("cohere"), api_key=API_KEY) as reranker,
        pytest.raises(spanledger.ProviderError) as caught,
    ):
        reranker.rerank("q", DOCS)
    assert caught.value.category is spanledger.ErrorCategory.INVALID_RESPONSE
    [event] = events
    assert isinstance(event, spanledger.RerankFailedEvent)
    assert event.error_category == "provider_invalid_response"
    assert event.status_code == 200


def test_a_slow_answer_trips_the_client_timeout(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(openai_embeddings().slow(2.0))
    with OpenAIEmbeddings("m", base_url=server.base_url("openai"), api_key=API_KEY) as embedder:
        with pytest.raises(spanledger.ProviderError) as caught:
            embedder.embed(["x"], timeout=0.2)
        assert caught.value.category is spanledger.ErrorCategory.UNAVAILABLE
    [event] = events
    assert isinstance(event, spanledger.EmbeddingFailedEvent)
    assert event.error_type == "ReadTimeout"
    assert event.latency_ms < 1500


def test_a_slow_answer_still_arrives_when_the_client_waits(server: StandIn) -> None:
    server.route(jina_rerank(tokens=5).slow(0.3))
    started = time.monotonic()
    with JinaReranker("m", base_url=server.base_url("jina"), api_key=API_KEY) as reranker:
        response = reranker.rerank("moon", DOCS)
    assert time.monotonic() - started >= 0.3
    assert response.usage == spanledger.RerankUsage(input_tokens=5)


def test_a_dropped_connection_is_unavailable_with_no_status(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(tei_rerank().dropped())
    with (
        TEIReranker("m", base_url=server.base_url("tei"), api_key=API_KEY) as reranker,
        pytest.raises(spanledger.ProviderError) as caught,
    ):
        reranker.rerank("q", DOCS)
    assert caught.value.category is spanledger.ErrorCategory.UNAVAILABLE
    assert caught.value.status_code is None
    assert len(events) == 1


def test_failure_variants_compose_and_a_custom_route_can_answer_anything(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(jina_embeddings().failing(503).slow(0.2), times=1)
    server.route(Route("jina", "/v1/rerank", lambda request: Reply(418, {"detail": "teapot"})))
    with JinaEmbeddings("m", base_url=server.base_url("jina"), api_key=API_KEY) as embedder:
        started = time.monotonic()
        with pytest.raises(spanledger.ProviderError) as slow_503:
            embedder.embed(["x"])
        assert time.monotonic() - started >= 0.2
    with (
        JinaReranker("m", base_url=server.base_url("jina"), api_key=API_KEY) as reranker,
        pytest.raises(spanledger.ProviderError) as teapot,
    ):
        reranker.rerank("q", DOCS)
    assert (slow_503.value.status_code, teapot.value.status_code) == (503, 418)
    assert [e.kind for e in events] == ["embedding_failed", "rerank_failed"]


def test_limited_routes_stack_and_reset_restores_the_fresh_server(server: StandIn) -> None:
    server.route(openai_embeddings().failing(500), times=2)
    server.route(openai_embeddings().failing(429), times=1)
    url = f"{server.base_url('openai')}/v1/embeddings"
    body = {"model": "m", "input": ["x"]}
    statuses = [httpx.post(url, json=body).status_code for _ in range(4)]
    assert statuses == [429, 500, 500, 200]
    server.route(openai_embeddings().failing(503))
    assert httpx.post(url, json=body).status_code == 503
    server.reset()
    assert server.requests == []
    assert httpx.post(url, json=body).status_code == 200


def test_model_name_behaviours_still_script_failures(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    with (
        TEIEmbeddings("bge", base_url=server.base_url("tei", "fail-429"), api_key=API_KEY) as tei,
        pytest.raises(spanledger.ProviderError),
    ):
        tei.embed(["x"])
    [event] = events
    assert isinstance(event, spanledger.EmbeddingFailedEvent)
    assert (event.status_code, event.retry_after) == (429, 2.0)


def test_stop_is_bounded_with_an_answer_in_flight() -> None:
    server = StandIn().start()
    server.route(cohere_embeddings().slow(30))
    port = httpx.URL(server.url).port
    outcome: list[BaseException | int] = []

    def call() -> None:
        try:
            reply = httpx.post(
                f"{server.base_url('cohere')}/v2/embed",
                json={"model": "m", "texts": ["x"]},
                timeout=20,
            )
            outcome.append(reply.status_code)
        except httpx.HTTPError as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(server.requests) == 1, "the slow request never arrived"
    started = time.monotonic()
    server.stop(timeout=5)
    assert time.monotonic() - started < 1.0, "stop waited out the slow answer"
    caller.join(timeout=3)
    assert not caller.is_alive(), "the client still waits on a stopped server"
    [result] = outcome
    assert isinstance(result, httpx.TransportError)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    with pytest.raises(RuntimeError):
        server.start()


def test_stop_ends_an_idle_kept_alive_connection_promptly() -> None:
    with httpx.Client(timeout=5) as client:
        server = StandIn().start()
        url = f"{server.base_url('voyageai')}/v1/embeddings"
        body = {"model": "m", "input": ["x"]}
        assert client.post(url, json=body).status_code == 200  # the connection stays open
        started = time.monotonic()
        server.stop(timeout=5)
        assert time.monotonic() - started < 1.0, "stop waited on the idle connection"
        with pytest.raises(httpx.TransportError):
            client.post(url, json=body)


def test_defaults_bind_loopback_on_a_free_port() -> None:
    with StandIn() as first, StandIn() as second:
        assert httpx.URL(first.url).host == "127.0.0.1"
        assert first.url != second.url


def test_the_request_log_is_complete_under_concurrent_calls(server: StandIn) -> None:
    def worker(index: int) -> None:
        base_url = server.base_url("jina")
        with JinaEmbeddings("m", base_url=base_url, api_key=API_KEY) as embedder:
            for call in range(10):
                embedder.embed([f"text {index}-{call}"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    sent = server.requests
    assert len(sent) == 80
    texts = sorted(request.json()["input"][0] for request in sent)
    assert texts == sorted(f"text {i}-{c}" for i in range(8) for c in range(10))


def test_no_caller_text_or_key_reaches_a_log_repr_or_error(
    server: StandIn,
    events: list[spanledger.Event],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    server.route(cohere_embeddings().failing(400))
    server.route(Route("cohere", "/v2/rerank", _raises_with_the_text))
    with (
        CohereEmbeddings("m", base_url=server.base_url("cohere"), api_key=API_KEY) as embedder,
        pytest.raises(spanledger.ProviderError) as bad_request,
    ):
        embedder.embed([SECRET_TEXT])
    with (
        CohereReranker("m", base_url=server.base_url("cohere"), api_key=API_KEY) as reranker,
        pytest.raises(spanledger.ProviderError) as broken_route,
    ):
        reranker.rerank(SECRET_TEXT, [SECRET_TEXT])
    raw = httpx.post(
        f"{server.base_url('cohere')}/v2/rerank",
        json={"model": "m", "query": SECRET_TEXT, "documents": []},
    )
    assert (raw.status_code, raw.json()["standin_route_error"]) == (500, "ValueError")
    [embedded, reranked, _] = server.requests
    assert SECRET_TEXT in embedded.json()["texts"]  # kept for assertions, in memory only
    assert broken_route.value.status_code == 500
    captured = capfd.readouterr()
    shown = [
        raw.text,
        repr(embedded),
        repr(reranked),
        str(bad_request.value),
        str(broken_route.value),
        caplog.text,
        captured.out,
        captured.err,
        *(event.model_dump_json() for event in events),
    ]
    for text in shown:
        assert SECRET_TEXT not in text
        assert API_KEY not in text


def _raises_with_the_text(request: RecordedRequest) -> Reply:
    raise ValueError(f"cannot answer {request.json()['query']}")


def test_bad_arguments_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="vendor"):
        Route("nope", "/v1/embeddings", lambda request: Reply())
    with pytest.raises(ValueError, match="status"):
        openai_embeddings().failing(200)
    with pytest.raises(ValueError, match="retry_after"):
        openai_embeddings().failing(429, retry_after=-1)
    with pytest.raises(ValueError, match="retry_after"):
        openai_embeddings().failing(429, retry_after="2\r\nx-injected: 1")
    with pytest.raises(ValueError, match="delay"):
        openai_embeddings().slow(-1)
    with pytest.raises(ValueError, match="tokens"):
        openai_embeddings(tokens=-3)
    with StandIn() as server:
        with pytest.raises(ValueError, match="times"):
            server.route(openai_embeddings(), times=0)
        with pytest.raises(ValueError, match="vendor"):
            server.base_url("acme")


def test_every_public_name_exists_and_is_documented() -> None:
    doc = testing.__doc__ or ""
    assert len(testing.__all__) == len(set(testing.__all__))
    for name in testing.__all__:
        value = getattr(testing, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"
        else:
            assert f"``{name}``" in doc, f"the module docstring never mentions {name}"
        if inspect.isclass(value):
            for member, attribute in vars(value).items():
                if member.startswith("_") or not callable(getattr(value, member)):
                    continue
                assert (attribute.__doc__ or "").strip(), f"{name}.{member} has no docstring"
    for member in ("url", "requests"):
        assert (getattr(StandIn, member).__doc__ or "").strip(), f"StandIn.{member}"


def _docstring_example() -> str:
    """The ``::`` block of the module docstring, dedented."""
    doc = testing.__doc__ or ""
    _, _, after = doc.partition("::\n\n")
    lines = []
    for line in after.splitlines():
        if line.strip() and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_the_usage_example_in_the_module_docstring_runs() -> None:
    source = _docstring_example()
    assert "StandIn()" in source
    namespace: dict[str, Any] = {}
    exec(compile(source, "spanledger.testing docstring", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    tests[0]()


def test_cohere_v1_routes_answer_the_v1_client_with_the_figures_they_are_given(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    import cohere

    server.route(cohere_v1_embeddings(tokens=11))
    server.route(cohere_v1_rerank(search_units=4))
    client = spanledger.instrument(
        cohere.Client(api_key="k", base_url=server.base_url("cohere"), max_retries=0)
    )
    embedded = client.embed(model="m", texts=["a", "b"])
    ranked = client.rerank(model="m", query="q", documents=["a b", "c"], return_documents=True)

    assert embedded.response_type == "embeddings_floats"
    assert [r.document.text if r.document else None for r in ranked.results] == [
        ["a b", "c"][r.index] for r in ranked.results
    ]
    embedding, rerank = events
    assert isinstance(embedding, spanledger.EmbeddingEvent)
    assert isinstance(rerank, spanledger.RerankEvent)
    assert embedding.usage == spanledger.EmbeddingUsage(input_tokens=11)
    assert rerank.usage == spanledger.RerankUsage(search_units=4)
    assert [r.path for r in server.requests] == ["/v1/embed", "/v1/rerank"]


def test_a_cloud_routes_vendor_error_reaches_the_event_by_its_code(
    server: StandIn, events: list[spanledger.Event]
) -> None:
    server.route(bedrock_titan_embeddings().failing(503, retry_after=4), times=1)
    call = _http("aws.bedrock", TITAN, {"inputText": "a"})
    call(server.base_url("aws.bedrock"))
    call(server.base_url("aws.bedrock", "not-ready"))  # a Titan model, still loading
    call(server.base_url("aws.bedrock"))
    unavailable, not_ready, answered = events
    assert isinstance(unavailable, spanledger.EmbeddingFailedEvent)
    assert (unavailable.status_code, unavailable.retry_after) == (503, 4.0)
    assert unavailable.error_category is spanledger.ErrorCategory.UNAVAILABLE
    assert isinstance(not_ready, spanledger.EmbeddingFailedEvent)
    assert not_ready.error_category is spanledger.ErrorCategory.MODEL_NOT_LOADED
    assert isinstance(answered, spanledger.EmbeddingEvent)
