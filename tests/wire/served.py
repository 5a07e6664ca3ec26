"""The recordings in ``recorded/`` served by vcrpy, and every path that can make their calls.

Each recorded exchange becomes a vcrpy cassette of one interaction (vcrpy's own YAML format),
its response body sent as recorded or gzip-compressed under ``Content-Encoding: gzip`` (as most
real cassettes hold it), and vcrpy itself plays it back to whichever client asks: httpx and
httpx2 transports, ``requests`` and botocore's urllib3 connections. A request matches the
recording when it names the same route: the same method and URL path, read unquoted and with
the API version left aside (``/v1/…:predict`` and ``/v1beta1/…:predict`` answer alike), whatever
the host (some recordings hold placeholder hosts no SDK can be pointed at).

``PATHS`` lists each way a call reaches spanledger: a provider class (sync and async), the
recording transport, ``http=True`` over httpx and over ``requests``, and each SDK whose calls
the recordings hold (openai's ``OpenAI`` and ``AzureOpenAI``, mistralai, ollama, google-genai,
boto3). A path that cannot make an exchange's call gives ``None`` for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import re
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import boto3  # type: ignore[import-untyped]
import google.oauth2.credentials
import httpx
import ollama
import openai
import requests
import vcr  # type: ignore[import-untyped]
import yaml
from google import genai
from google.genai import types as genai_types
from mistralai.client import Mistral
from mistralai.client.utils import BackoffStrategy, RetryConfig
from vcr.request import Request as VcrRequest  # type: ignore[import-untyped]

import spanledger
from spanledger import Event, ProviderError
from spanledger.providers import (
    AzureOpenAIEmbeddings,
    ClientOptions,
    EmbeddingProvider,
    GeminiEmbeddings,
    MistralEmbeddings,
    OllamaEmbeddings,
    VertexEmbeddings,
)

from .replay import HOP_BY_HOP, Exchange, body_bytes, route_of, vendor_of

__all__ = [
    "PATHS",
    "ServedPath",
    "aembed",
    "cassette",
    "embed",
    "provider_for",
    "route_matcher",
    "served",
]

KEY = "k"
TLS = ssl.create_default_context()
"""One TLS context for every client made here (nothing is sent: vcrpy answers first), since
making one per client costs more than the whole call."""
_VERSION = re.compile(r"^/v\d+(?:(?:alpha|beta)\d*)?(?=/)")


def _route(url: str) -> tuple[str, str]:
    """A URL as the matcher reads it: its path unquoted, without a leading API version."""
    path = unquote(httpx.URL(url).path)
    return _VERSION.sub("", path), path


def route_matcher(r1: VcrRequest, r2: VcrRequest) -> None:
    """vcrpy's matcher contract: raise ``AssertionError`` when the two are not one call."""
    assert r1.method == r2.method, (r1.method, r2.method)
    assert _route(r1.uri)[0] == _route(r2.uri)[0], (r1.uri, r2.uri)


def cassette(ex: Exchange, *, gzipped: bool) -> dict[str, Any]:
    """``ex`` as a vcrpy cassette of one interaction: its status, its headers (those that
    describe the recorded connection replaced by the served body's own) and its body."""
    assert ex.url is not None
    assert ex.status is not None
    body = body_bytes(ex.body)
    if gzipped:
        body = gzip.compress(body, mtime=0)
    headers: dict[str, list[str]] = {}
    for name, value in ex.header_lines:
        if name.lower() not in HOP_BY_HOP:
            headers.setdefault(name, []).append(value)
    headers["content-length"] = [str(len(body))]
    if gzipped:
        headers["content-encoding"] = ["gzip"]
    request = None if ex.request_body is None else body_bytes(ex.request_body).decode()
    return {
        "version": 1,
        "interactions": [
            {
                "request": {"method": "POST", "uri": ex.url, "body": request, "headers": {}},
                "response": {
                    "status": {"code": ex.status, "message": ""},
                    "headers": headers,
                    "body": {"string": body},
                },
            }
        ],
    }


@contextlib.contextmanager
def served(ex: Exchange, directory: Path, *, gzipped: bool) -> Iterator[Any]:
    """vcrpy playing ``ex``'s cassette (never recording); on leaving, it was played once."""
    path = directory / f"{ex.stem}{'-gzip' if gzipped else ''}.yaml"
    path.write_text(yaml.dump(cassette(ex, gzipped=gzipped), Dumper=yaml.Dumper))
    player = vcr.VCR(record_mode="none", match_on=("route",))
    player.register_matcher("route", route_matcher)
    with player.use_cassette(str(path)) as playing:
        yield playing
    assert playing.play_count == 1, f"{ex.stem}: played {playing.play_count} times"


# --------------------------------------------------------------------------- the paths

Events = list[Event]
Run = Callable[[], object]


@dataclass(frozen=True)
class ServedPath:
    """One way a call reaches spanledger: ``call(ex)`` is the call to make for ``ex`` (run
    under the recorder, inside the cassette), or ``None`` when this path cannot make it."""

    name: str
    call: Callable[[Exchange], Run | None]
    switch_http: bool = False
    """Whether the call runs with ``spanledger.instrument(http=True)`` on."""


def _texts(ex: Exchange) -> list[str]:
    """The input texts of an embedding request, in order (one per input)."""
    body = ex.request_body
    route = route_of(ex.url or "")
    if route == "batchEmbedContents":
        return [" ".join(p["text"] for p in r["content"]["parts"]) for r in body["requests"]]
    if route == "predict":
        return [instance["content"] for instance in body["instances"]]
    if route == "embedContent":
        return [" ".join(part["text"] for part in body["content"]["parts"])]
    if route == "/api/embeddings":
        return [body["prompt"]]
    inputs = body["input"]
    return [inputs] if isinstance(inputs, str) else list(inputs)


def _model(ex: Exchange) -> str:
    """The model (or deployment) the request names, as the caller passes it."""
    path = unquote(httpx.URL(ex.url or "").path)
    deployment = re.search(r"/openai/deployments/([^/]+)/", path)
    if deployment:
        return deployment.group(1)
    if "/models/" in path:
        return path.split("/models/", 1)[1].split(":", 1)[0]
    model: str = ex.request_body["model"]
    return model


def _origin(ex: Exchange) -> str:
    url = httpx.URL(ex.url or "")
    return f"{url.scheme}://{url.netloc.decode('ascii')}"


def _is_embedding(ex: Exchange, *routes: str) -> bool:
    return isinstance(ex.request_body, dict) and route_of(ex.url or "") in routes


def _vertex_place(ex: Exchange) -> tuple[str, str]:
    path = unquote(httpx.URL(ex.url or "").path)
    found = re.search(r"/projects/([^/]+)/locations/([^/]+)/", path)
    assert found is not None
    return found.group(1), found.group(2)


def provider_for(
    ex: Exchange, sync: httpx.BaseTransport | None = None, a: httpx.AsyncBaseTransport | None = None
) -> EmbeddingProvider | None:
    """spanledger's provider class for ``ex``'s endpoint, aimed at its origin, its clients
    over ``sync`` and ``a`` (httpx's own transports by default)."""
    if ex.url is None or not isinstance(ex.request_body, dict):
        return None
    vendor, route = vendor_of(ex.url), route_of(ex.url)
    if route not in ("openai-embeddings", "/api/embed", "batchEmbedContents", "predict"):
        return None
    model, origin = _model(ex), _origin(ex)
    clients: ClientOptions = {
        "base_url": origin,
        "api_key": KEY,
        "http_client": httpx.Client(transport=sync or httpx.HTTPTransport(verify=TLS)),
        "async_http_client": httpx.AsyncClient(transport=a or httpx.AsyncHTTPTransport(verify=TLS)),
    }
    if vendor == "azure.ai.openai" and "/openai/deployments/" in ex.url:
        version = parse_qs(httpx.URL(ex.url).query.decode())["api-version"][0]
        return AzureOpenAIEmbeddings(model, api_version=version, **clients)
    if vendor == "mistral_ai" and route == "openai-embeddings":
        return MistralEmbeddings(model, **clients)
    if vendor == "ollama" and route == "/api/embed":
        return OllamaEmbeddings(model, **clients)
    if vendor == "gcp.gemini" and route == "batchEmbedContents":
        requests_ = ex.request_body["requests"]
        if any(len(r["content"]["parts"]) != 1 for r in requests_):
            return None  # the class sends one part a content
        return GeminiEmbeddings(model, **clients)
    if vendor == "gcp.vertex_ai" and route == "predict":
        project, location = _vertex_place(ex)
        return VertexEmbeddings(model, project=project, location=location, **clients)
    return None


def _extras(ex: Exchange) -> dict[str, Any] | None:
    encoding = ex.request_body.get("encoding_format")
    return {"encoding_format": encoding} if encoding else None


def embed(provider: EmbeddingProvider, ex: Exchange) -> None:
    """``ex``'s call through ``provider``; a ``ProviderError`` is the call's own outcome."""
    with contextlib.suppress(ProviderError):
        provider.embed(_texts(ex), extras=_extras(ex))


async def aembed(provider: EmbeddingProvider, ex: Exchange) -> None:
    with contextlib.suppress(ProviderError):
        await provider.aembed(_texts(ex), extras=_extras(ex))


def _provider_sync(ex: Exchange) -> Run | None:
    if provider_for(ex) is None:
        return None

    def run() -> None:
        provider = provider_for(ex)
        assert provider is not None
        with provider:
            embed(provider, ex)

    return run


def _provider_async(ex: Exchange) -> Run | None:
    if provider_for(ex) is None:
        return None

    async def call() -> None:
        provider = provider_for(ex)
        assert provider is not None
        async with provider:
            await aembed(provider, ex)

    return lambda: asyncio.run(call())


def _request_content(ex: Exchange) -> bytes:
    return b"" if ex.request_body is None else body_bytes(ex.request_body)


_JSON = {"content-type": "application/json"}


def _transport(ex: Exchange) -> Run | None:
    def run() -> None:
        recording = spanledger.instrumentation.transport(httpx.HTTPTransport(verify=TLS))
        with httpx.Client(transport=recording, timeout=5.0) as client:
            client.post(ex.url or "", content=_request_content(ex), headers=_JSON).read()

    return run


def _httpx_switched(ex: Exchange) -> Run | None:
    def run() -> None:
        with httpx.Client(timeout=5.0, verify=TLS) as client:
            client.post(ex.url or "", content=_request_content(ex), headers=_JSON).read()

    return run


def _requests_switched(ex: Exchange) -> Run | None:
    if "<" in (ex.url or ""):
        return None  # a placeholder host: urllib3 refuses it before anything is sent
    return lambda: requests.post(ex.url or "", data=_request_content(ex), headers=_JSON, timeout=5)


def _sdk_call(sdk: Any, call: Callable[[Any], object], *errors: type[BaseException]) -> Run:
    """Call ``sdk`` instrumented, its own errors let go, uninstrumented afterwards."""

    def run() -> None:
        spanledger.instrument(sdk)
        try:
            with contextlib.suppress(*errors):
                call(sdk)
        finally:
            spanledger.uninstrument(sdk)

    return run


def _openai(ex: Exchange) -> Run | None:
    """openai's ``AzureOpenAI`` on a deployment, its ``OpenAI`` on every OpenAI-shaped route."""
    if not _is_embedding(ex, "openai-embeddings"):
        return None
    body = ex.request_body
    options = {k: body[k] for k in ("encoding_format", "dimensions") if k in body}
    client: openai.OpenAI
    if "/openai/deployments/" in (ex.url or ""):
        version = parse_qs(httpx.URL(ex.url or "").query.decode())["api-version"][0]
        client = openai.AzureOpenAI(
            azure_endpoint=_origin(ex),
            api_version=version,
            api_key=KEY,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(verify=TLS),
        )
    else:
        base = (ex.url or "").rsplit("/embeddings", 1)[0]
        client = openai.OpenAI(
            base_url=base,
            api_key=KEY,
            max_retries=0,
            http_client=openai.DefaultHttpxClient(verify=TLS),
        )
    return _sdk_call(
        client,
        lambda c: c.embeddings.create(model=_model(ex), input=body["input"], **options),
        openai.APIError,
    )


def _mistral(ex: Exchange) -> Run | None:
    if vendor_of(ex.url or "") != "mistral_ai" or not _is_embedding(ex, "openai-embeddings"):
        return None
    no_retries = RetryConfig("none", BackoffStrategy(1, 1, 1.0, 1), False)
    client = Mistral(api_key=KEY, server_url=_origin(ex), retry_config=no_retries)
    return _sdk_call(
        client, lambda c: c.embeddings.create(model=_model(ex), inputs=_texts(ex)), Exception
    )


def _ollama(ex: Exchange) -> Run | None:
    client = ollama.Client(host=_origin(ex), verify=TLS)
    if _is_embedding(ex, "/api/embed"):
        return _sdk_call(
            client, lambda c: c.embed(model=_model(ex), input=_texts(ex)), ollama.ResponseError
        )
    if _is_embedding(ex, "/api/embeddings"):
        return _sdk_call(
            client,
            lambda c: c.embeddings(model=_model(ex), prompt=_texts(ex)[0]),
            ollama.ResponseError,
        )
    return None


def _genai_contents(ex: Exchange) -> list[genai_types.Content]:
    body = ex.request_body
    contents = (
        [entry["content"] for entry in body["requests"]]
        if "requests" in body
        else [body["content"]]
        if "content" in body
        else [{"parts": [{"text": instance["content"]}]} for instance in body["instances"]]
    )
    return [
        genai_types.Content(parts=[genai_types.Part(text=part["text"]) for part in c["parts"]])
        for c in contents
    ]


def _genai(ex: Exchange) -> Run | None:
    if not _is_embedding(ex, "batchEmbedContents", "predict", "embedContent"):
        return None
    options = genai_types.HttpOptions(
        base_url=_origin(ex),
        retry_options=genai_types.HttpRetryOptions(attempts=1),
        httpx_client=httpx.Client(verify=TLS),
    )
    if vendor_of(ex.url or "") == "gcp.gemini":
        client = genai.Client(api_key=KEY, http_options=options)
    else:
        project, location = _vertex_place(ex)
        credentials = google.oauth2.credentials.Credentials(token=KEY)  # type: ignore[no-untyped-call]
        client = genai.Client(
            vertexai=True,
            project=project,
            location=location,
            credentials=credentials,
            http_options=options,
        )
    contents = _genai_contents(ex)
    return _sdk_call(
        client,
        lambda c: c.models.embed_content(model=_model(ex), contents=contents),
        genai.errors.APIError,
    )


@functools.cache
def _boto_session() -> Any:
    """One boto3 session for every Bedrock client (its loaded service models are shared)."""
    return boto3.session.Session()


def _boto3(ex: Exchange) -> Run | None:
    if not _is_embedding(ex, "bedrock-invoke"):
        return None
    client = _boto_session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key=KEY,
    )
    model = unquote(httpx.URL(ex.url or "").path).split("/model/", 1)[1].rsplit("/", 1)[0]

    def invoke(c: Any) -> object:
        answer = c.invoke_model(
            modelId=model,
            body=body_bytes(ex.request_body),
            contentType="application/json",
            accept="application/json",
        )
        return answer["body"].read()

    return _sdk_call(client, invoke, Exception)


PATHS: tuple[ServedPath, ...] = (
    ServedPath("provider", _provider_sync),
    ServedPath("provider-async", _provider_async),
    ServedPath("transport", _transport),
    ServedPath("http-switch-httpx", _httpx_switched, switch_http=True),
    ServedPath("http-switch-requests", _requests_switched, switch_http=True),
    ServedPath("openai-sdk", _openai),
    ServedPath("mistral-sdk", _mistral),
    ServedPath("ollama-sdk", _ollama),
    ServedPath("genai-sdk", _genai),
    ServedPath("bedrock-sdk", _boto3),
)
