"""``openai.OpenAI`` / ``AsyncOpenAI`` and ``openai.AzureOpenAI`` / ``AsyncAzureOpenAI``:
``embeddings.create``, recorded as the vendor whose wire the request went to.

The SDK posts to ``{base_url}/embeddings``; an Azure client rewrites that to
``/deployments/{model}/embeddings`` unless its base URL already names a deployment (it does so
for a ``.../openai/v1/`` base URL too). So each attempt is read by the URL it really requests
(handed to the SDK's own ``_prepare_request`` callback just before it is sent), as plain HTTP
traffic is read (``spanledger.capture.vendors``): Azure's deployment route names the deployment,
which is the call's model; a request to an Azure host's ``/openai/v1/`` is Azure's v1 route, the
body's model the deployment; a Mistral or Ollama server, or a Voyage or Jina model, is that
vendor; anything else is OpenAI's. An Azure client's call is Azure's whatever its URL (a
gateway, a loopback stand-in). The call is announced with the endpoint the client's base URL
predicts, before the request is built.

Usage and ids are read from the raw JSON body: hooks on the client's own httpx client see each
HTTP attempt, and the body's ``usage.prompt_tokens`` is read from the JSON the SDK decodes (the
SDK builds its typed result without validating it, so ``"abc"`` would reach ``result.usage``).
The response's ``model`` (an Azure deployment's model) is the event's ``response_model``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import openai
from openai.lib.azure import BaseAzureClient

from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec, current_call
from spanledger.capture.vendors import recognise
from spanledger.recording.call import logged
from spanledger.recording.facts import EmbedFacts, input_texts, passed, server_of, text_or_none
from spanledger.wire.endpoints import (
    AZURE_EMBEDDINGS,
    AZURE_V1_EMBEDDINGS,
    OPENAI_EMBEDDINGS,
    Endpoint,
    VectorLayout,
    Vendor,
)
from spanledger.wire.read import vector_type
from spanledger.wire.request import request_model, request_path

__all__ = ["install"]

_PARAMS = ("dimensions",)
_EXTRAS = ("encoding_format", "user")
_ROUTE = "/embeddings"

_ANY_PREFIX = replace(AZURE_EMBEDDINGS, route=AZURE_EMBEDDINGS.route.removeprefix("/openai"))
"""Azure's deployment route under any base path (an Azure client given a gateway's
``base_url``, or ``.../openai/v1/``, to which it still adds ``/deployments/{model}``)."""


@dataclass(slots=True)
class _EmbeddingsSpec(MethodSpec):
    """An ``embeddings.create`` spec: ``azure`` when the client is an Azure one. Each attempt
    is read by the endpoint its URL names (``by_endpoint`` keeps one spec per endpoint)."""

    azure: bool = False
    by_endpoint: dict[str, MethodSpec] = field(default_factory=dict)

    def for_endpoint(self, endpoint: Endpoint) -> MethodSpec:
        if endpoint is self.endpoint:
            return self
        found = self.by_endpoint.get(endpoint.name)
        if found is None:
            found = self.by_endpoint[endpoint.name] = replace(self, endpoint=endpoint)
        return found


def install(client: Any, installation: Installation) -> None:
    """Instrument an ``openai.OpenAI`` or ``AsyncOpenAI`` client (Azure's too).

    Anything else is refused with a ``TypeError``.
    """
    if isinstance(client, openai.AsyncOpenAI):
        installation.is_async = True
    elif not isinstance(client, openai.OpenAI):
        raise TypeError(
            "spanledger.instrument supports openai.OpenAI and AsyncOpenAI (and their Azure "
            f"clients), not {type(client).__qualname__}"
        )
    azure = isinstance(client, BaseAzureClient)
    spec = _EmbeddingsSpec(
        facts=partial(_embed_facts, _Predicted(client), azure),
        endpoint=OPENAI_EMBEDDINGS,
        shape=_width,
        route=_ROUTE,
        azure=azure,
    )
    installation.wrap(client.embeddings, "create", spec)
    installation.hook(client._client)
    _watch_requests(client, installation)


Server = tuple[str | None, int | None]
Resolved = tuple[Endpoint, str, Server]
"""The endpoint a request URL and model call, the call's model, and the URL's server."""

_resolved: dict[tuple[str, str, bool], Resolved] = {}
_RESOLVED_KEPT = 512


def _resolved_for(url: Any, model: str, azure: bool) -> Resolved:
    """What a request to ``url`` for ``model`` calls, worked out once per URL text, model and
    kind of client (the same on every call of a client; a changed URL is a new key)."""
    key = (str(url), model, azure)
    found = _resolved.get(key)
    if found is None:
        endpoint, named = _endpoint_of(url, model, azure)
        found = (endpoint, named, server_of(url))
        if len(_resolved) < _RESOLVED_KEPT:
            _resolved[key] = found
    return found


class _Predicted:
    """The URL a client's ``embeddings.create`` posts to, by its base URL: made again when the
    client is given another base URL. The client is held weakly (it holds this)."""

    __slots__ = ("_base", "_client", "_url")

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)
        self._base: Any = None
        self._url: Any = None

    def url(self) -> Any:
        client = self._client()
        base = client.base_url if client is not None else self._base
        if base is not self._base:
            self._url = base.copy_with(raw_path=base.raw_path.rstrip(b"/") + _ROUTE.encode())
            self._base = base
        return self._url


def _embed_facts(
    predicted: _Predicted, azure: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    model = text_or_none(kwargs.get("model"))
    if model is None:
        return None
    count, texts = input_texts(kwargs.get("input"))
    endpoint, named, server = _resolved_for(predicted.url(), model, azure)
    return EmbedFacts(
        provider=endpoint.provider,
        model=named,
        input_count=count,
        inputs=texts,
        request_params=passed(kwargs, _PARAMS),
        extras=passed(kwargs, _EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=endpoint.billing,
        dtype=vector_type(kwargs.get("encoding_format")) if "encoding_format" in kwargs else None,
    )


def _endpoint_of(url: Any, model: str, azure: bool) -> tuple[Endpoint, str]:
    """The endpoint a request to ``url`` for ``model`` calls, and the call's model (an Azure
    deployment the URL names). Only OpenAI-shaped endpoints qualify: another vendor's name on
    the host or model, answering on ``/embeddings``, answers in OpenAI's shape."""
    body = {"model": model}
    path = request_path(url)
    found = recognise(url, body, {})
    if found is None or not _openai_shaped(found):
        found = OPENAI_EMBEDDINGS
    if azure and found.vendor is not Vendor.AZURE:
        found = AZURE_EMBEDDINGS if _ANY_PREFIX.route_model(path) else AZURE_V1_EMBEDDINGS
    named = request_model(found, body, path)
    if named is None and found is AZURE_EMBEDDINGS:
        named = _ANY_PREFIX.route_model(path)
    return found, named or model


def _openai_shaped(endpoint: Endpoint) -> bool:
    return (
        endpoint.operation == "embeddings"
        and endpoint.suffix == _ROUTE
        and endpoint.vectors is VectorLayout.BY_INDEX
        and endpoint.items_key == "input"
    )


def _resolve(request: Any) -> None:
    """An attempt of an ``embeddings.create`` call is about to leave: read it by the endpoint
    its URL names (the vendor, and the model an Azure URL names)."""
    call = current_call()
    if call is None:
        return
    spec = call.spec
    facts = call.facts
    if not isinstance(spec, _EmbeddingsSpec) or not isinstance(facts, EmbedFacts):
        return
    try:
        if not call.owns(request):
            return
        endpoint, facts.model, server = _resolved_for(request.url, facts.model, spec.azure)
        facts.provider = endpoint.provider
        facts.billing = endpoint.billing
        facts.server_address, facts.server_port = server
        call.spec = spec.for_endpoint(endpoint)
    except Exception as exc:
        logged(exc)


def _watch_requests(client: Any, installation: Installation) -> None:
    """Have the SDK's own per-attempt request callback (``_prepare_request``, which it calls
    with each request it has built, right before sending it) tell ``_resolve`` of it."""
    name = "_prepare_request"
    held = vars(client).get(name)
    kind = type(client)
    target = weakref.ref(client)  # the client holds this: no reference cycle

    def prepare(request: Any) -> Any:
        if held is not None:
            return held(request)
        return getattr(kind, name)(target(), request)

    if installation.is_async:

        async def prepare_async(request: Any) -> None:
            await prepare(request)
            _resolve(request)

        installation.replace(client, name, prepare_async)
        return

    def prepare_sync(request: Any) -> None:
        prepare(request)
        _resolve(request)

    installation.replace(client, name, prepare_sync)


def _width(result: Any) -> int | None:
    return len(result.data[0].embedding) or None
