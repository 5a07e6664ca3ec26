"""``google.genai.Client``: ``models.embed_content`` and ``aio.models.embed_content``, on the
Gemini API (``gcp.gemini``) and on Vertex AI (``gcp.vertex_ai``).

The SDK talks through httpx, httpx2, google-auth's session or, for async calls, aiohttp, and
drops what it does not model from its typed result (a top-level ``usageMetadata``). So each
attempt is recorded one level under all of them, at the API client's own
``_request_once`` / ``_async_request_once``, which tenacity calls once per attempt with the
request as it will be sent: its URL says which endpoint the SDK chose (``:batchEmbedContents``,
``:predict``, ``:embedContent``), its body gives the facts by that endpoint's declaration, and
the raw text it returns is the body the figures are read from, as the SDK decodes it
(``google.genai.models``' ``json.loads`` hands the decoded body on, so it is parsed once). On
aiohttp, a connection error the SDK retries by itself inside one such call is an attempt of
its own: the session it sends through reports each request. An error status arrives as the
SDK's ``APIError``, re-raised unchanged; its event is categorised by the status. A body that
fails to read (one that does not decode by its ``Content-Encoding``) never reaches the SDK as
a response: its status is heard as it arrives (a response hook on the SDK's httpx client, the
aiohttp session's answer).

``instrument(genai.Client)`` instruments its ``models`` and ``aio.models``, which the
process-wide switch also reaches one by one (they do not know their client).
"""

from __future__ import annotations

import contextlib
import json
import weakref
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from google.genai import errors as genai_errors
from google.genai import models as genai_models
from google.genai.client import Client
from google.genai.models import AsyncModels, Models

from spanledger import _forksafe
from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import (
    Arrival,
    MethodSpec,
    SdkCall,
    current_call,
    listening,
    note_arrival,
)
from spanledger.errors import error_for_status
from spanledger.recording.call import logged
from spanledger.recording.facts import (
    EmbedFacts,
    input_texts,
    request_facts,
    server_of,
    text_or_none,
)
from spanledger.wire.endpoints import (
    GEMINI_EMBED_CONTENT,
    GEMINI_EMBEDDINGS,
    VERTEX_BATCH_EMBED_CONTENTS,
    VERTEX_EMBED_CONTENT,
    VERTEX_EMBEDDINGS,
    Endpoint,
)
from spanledger.wire.http import parsed_url

__all__ = ["install"]

_ROUTES: dict[str, dict[str, Endpoint]] = {
    GEMINI_EMBEDDINGS.provider: {
        ":batchEmbedContents": GEMINI_EMBEDDINGS,
        ":embedContent": GEMINI_EMBED_CONTENT,
    },
    VERTEX_EMBEDDINGS.provider: {
        ":predict": VERTEX_EMBEDDINGS,
        ":embedContent": VERTEX_EMBED_CONTENT,
        ":batchEmbedContents": VERTEX_BATCH_EMBED_CONTENTS,
    },
}
"""Which endpoint a request is, by the backend and how its URL's path ends."""


def install(client: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to a ``google.genai.Client`` (its sync and async models).

    Anything else is refused with a ``TypeError``.
    """
    if isinstance(client, Client):
        for models in (client.models, client.aio.models):
            installation.include(models)
        return
    if isinstance(client, AsyncModels):
        installation.is_async = True
    elif not isinstance(client, Models):
        raise TypeError(
            f"spanledger.instrument supports google.genai.Client, not {type(client).__qualname__}"
        )
    api_client = client._api_client
    installation.wrap(client, "embed_content", _Calls(api_client).spec)
    _seams.acquire(api_client)
    installation.on_release(_seams.release, api_client)


class _Calls:
    """How one API client's ``embed_content`` calls are recorded: the facts its arguments
    give, and a spec per endpoint the SDK may send them to (the call takes the one its
    request's URL names)."""

    __slots__ = ("model_prefixes", "provider", "server", "spec", "variants")

    def __init__(self, api_client: Any) -> None:
        self.provider = (VERTEX_EMBEDDINGS if api_client.vertexai else GEMINI_EMBEDDINGS).provider
        self.server = server_of(api_client._http_options.base_url or "")
        routes = _ROUTES[self.provider]
        first = next(iter(routes.values()))
        self.spec = MethodSpec(facts=self, endpoint=first, shape=_width, route=":")
        self.variants = {
            endpoint.name: self.spec if endpoint is first else replace(self.spec, endpoint=endpoint)
            for endpoint in routes.values()
        }

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> EmbedFacts | None:
        """The call as its arguments name it; read again from the request at each attempt."""
        model = text_or_none(kwargs.get("model"))
        if model is None:
            return None
        count, texts = input_texts(kwargs.get("contents"))
        if count == 0 and kwargs.get("contents") is not None:
            count, texts = 1, None  # one content object
        return EmbedFacts(
            provider=self.provider,
            model=model.rsplit("/", 1)[-1],  # "models/x", "publishers/google/models/x": x
            input_count=count,
            inputs=texts,
            server_address=self.server[0],
            server_port=self.server[1],
            billing=GEMINI_EMBEDDINGS.billing,  # every Google embedding route bills tokens
        )


def _attempt_endpoint(call: SdkCall, http_request: Any) -> Endpoint | None:
    """The endpoint ``http_request`` is, when it is an attempt of ``call`` (a Google
    ``embed_content`` call)."""
    calls = call.spec.facts
    if type(calls) is not _Calls:
        return None
    url = http_request.url
    if type(url) is not str:
        return None
    path = url.partition("?")[0]
    for ending, endpoint in _ROUTES[calls.provider].items():
        if path.endswith(ending):
            return endpoint
    return None


def _opening(call: SdkCall, endpoint: Endpoint, http_request: Any) -> None:
    """Read the attempt's facts from the request as it will be sent, by its endpoint."""
    try:
        calls = call.spec.facts
        assert type(calls) is _Calls
        call.spec = calls.variants[endpoint.name]
        body = http_request.data
        if type(body) is dict:
            facts = request_facts(endpoint, body, parsed_url(http_request.url))
            facts.model = call.facts.model  # as announced: the route's own spelling of it
            call.facts = facts
    except Exception as exc:
        logged(exc)
    call.attempt_sent(None)


class _Answer:
    """A 2xx attempt's raw body, as the SDK holds it (text); bytes only when asked."""

    __slots__ = ("text",)
    status_code = 200

    def __init__(self, text: str) -> None:
        self.text = text

    @property
    def content(self) -> bytes:
        return self.text.encode("utf-8", "surrogatepass")


def _answered(call: SdkCall, response: Any) -> None:
    try:
        stream = response.response_stream
        text = stream[0] if type(stream) is list and stream else ""
        call.attempt_answered(_Answer(text if type(text) is str else ""))
    except Exception as exc:
        logged(exc)


def _hear(response: Any) -> None:
    """A response hook on the SDK's httpx client: the status an attempt's answer arrived
    with, before the client reads its body (a body that does not decode fails that read,
    and the SDK never gets the response)."""
    note_arrival(response.status_code, response.headers)


async def _hear_async(response: Any) -> None:
    _hear(response)


def _attempt_raised(call: SdkCall, exc: BaseException, arrival: Arrival) -> None:
    """The attempt ended in an exception: the SDK's ``APIError`` by its status; an answer
    whose body could not be read by the status it arrived with; anything else by what it is
    (a transport failure, a cancellation)."""
    if not isinstance(exc, genai_errors.APIError) and call.answer_unread(arrival, exc):
        return
    if isinstance(exc, genai_errors.APIError) and type(exc.code) is int:
        try:
            response = exc.response
            response = getattr(response, "_response", response)  # google-auth's aiohttp wrap
            headers = getattr(response, "headers", None)
            error = error_for_status(
                exc.code, headers if headers is not None else {}, _raw(response)
            )
        except Exception as failure:
            logged(failure)
            return
        call.attempt_failed(error)
        return
    call.attempt_raised(exc)


def _raw(response: object) -> bytes | None:
    """The error body the client read, when it did (httpx's ``content``, aiohttp's)."""
    for name in ("content", "_body"):
        with contextlib.suppress(Exception):
            body = getattr(response, name, None)
            if isinstance(body, bytes):
                return body
    return None


class _AiohttpAttempt:
    """The open attempt of a call on aiohttp, and how many requests it has sent."""

    __slots__ = ("call", "requests")

    def __init__(self, call: SdkCall) -> None:
        self.call = call
        self.requests = 0


_on_aiohttp: ContextVar[_AiohttpAttempt | None] = ContextVar(
    "spanledger_google_aiohttp_attempt", default=None
)


class _RecordedSession:
    """The SDK's aiohttp session, inside a recorded attempt: each ``request`` after the
    attempt's first is the SDK retrying by itself, so a new attempt."""

    __slots__ = ("_attempt", "_session")

    def __init__(self, session: Any, attempt: _AiohttpAttempt) -> None:
        self._session = session
        self._attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        attempt = self._attempt
        call = attempt.call
        attempt.requests += 1
        if attempt.requests > 1:
            call.attempt_sent(None)
        try:
            response = await self._session.request(*args, **kwargs)
        except BaseException as exc:
            call.attempt_raised(exc)
            raise
        note_arrival(getattr(response, "status", None), getattr(response, "headers", None))
        return response


def _sync_attempts(api_client: Any) -> Any:
    target = weakref.ref(api_client)

    def _request_once(http_request: Any, *args: Any, **kwargs: Any) -> Any:
        original = _class_method(target(), "_request_once")
        call = current_call()
        endpoint = _attempt_endpoint(call, http_request) if call is not None else None
        if call is None or endpoint is None:
            return original(http_request, *args, **kwargs)
        _opening(call, endpoint, http_request)
        with listening() as arrival:
            try:
                response = original(http_request, *args, **kwargs)
            except BaseException as exc:
                _attempt_raised(call, exc, arrival)
                raise
        _answered(call, response)
        return response

    return _request_once


def _async_attempts(api_client: Any) -> Any:
    target = weakref.ref(api_client)

    async def _async_request_once(http_request: Any, *args: Any, **kwargs: Any) -> Any:
        original = _class_method(target(), "_async_request_once")
        call = current_call()
        endpoint = _attempt_endpoint(call, http_request) if call is not None else None
        if call is None or endpoint is None:
            return await original(http_request, *args, **kwargs)
        _opening(call, endpoint, http_request)
        token = _on_aiohttp.set(_AiohttpAttempt(call))
        try:
            with listening() as arrival:
                try:
                    response = await original(http_request, *args, **kwargs)
                except BaseException as exc:
                    _attempt_raised(call, exc, arrival)
                    raise
        finally:
            _on_aiohttp.reset(token)
        _answered(call, response)
        return response

    return _async_request_once


def _sessions(api_client: Any) -> Any:
    target = weakref.ref(api_client)

    async def _get_aiohttp_session(*args: Any, **kwargs: Any) -> Any:
        session = await _class_method(target(), "_get_aiohttp_session")(*args, **kwargs)
        attempt = _on_aiohttp.get()
        if attempt is None or attempt.call is not current_call():
            return session
        return _RecordedSession(session, attempt)

    return _get_aiohttp_session


def _class_method(instance: Any, name: str) -> Any:
    """``instance``'s method as its class has it now (a class patched later is honoured)."""
    return getattr(type(instance), name).__get__(instance)


class _DecodingJson:
    """``google.genai.models``' ``json`` while a Google client is instrumented: the module
    itself, with a ``loads`` that hands the 2xx body the SDK decodes to the call recording
    it, so the body is parsed once."""

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)

    @staticmethod
    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        payload = json.loads(text, *args, **kwargs)
        call = current_call()
        if call is not None:
            answer = call.answer
            if type(answer) is _Answer and answer.text is text:
                call.answer_decoded(payload)
        return payload


_decoding_json = _DecodingJson()
_ATTEMPTS = (
    ("_request_once", _sync_attempts),
    ("_async_request_once", _async_attempts),
    ("_get_aiohttp_session", _sessions),
)


class _Seams:
    """The attempt seams on each instrumented API client (shared by its sync and async
    models), and the SDK's ``json`` while any is in place."""

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self._users: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._placed: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()

    def acquire(self, api_client: Any) -> None:
        with self._lock:
            count = self._users.get(api_client, 0)
            self._users[api_client] = count + 1
            if count:
                return
            attributes = vars(api_client)
            placed = {name: make(api_client) for name, make in _ATTEMPTS}
            attributes.update(placed)
            self._placed[api_client] = placed
            for http, hook in _hooked(api_client):
                http.event_hooks["response"].append(hook)
            if getattr(genai_models, "json", None) is json:
                setattr(genai_models, "json", _decoding_json)  # noqa: B010 (not exported)

    def release(self, api_client: Any) -> None:
        with self._lock:
            count = self._users.get(api_client, 0)
            if count > 1:
                self._users[api_client] = count - 1
                return
            self._users.pop(api_client, None)
            if count == 0:
                return
            attributes = vars(api_client)
            for name, ours in self._placed.pop(api_client, {}).items():
                if attributes.get(name) is ours:
                    del attributes[name]
            for http, hook in _hooked(api_client):
                with contextlib.suppress(ValueError):
                    http.event_hooks["response"].remove(hook)
            if not self._users and getattr(genai_models, "json", None) is _decoding_json:
                setattr(genai_models, "json", json)  # noqa: B010


_seams = _Seams()


def _hooked(api_client: Any) -> list[tuple[Any, Any]]:
    """The API client's httpx (or httpx2) clients, each with the status hook it takes."""
    found = []
    for name, hook in (("_httpx_client", _hear), ("_async_httpx_client", _hear_async)):
        http = getattr(api_client, name, None)
        if isinstance(getattr(http, "event_hooks", None), dict):
            found.append((http, hook))
    return found


def _width(result: Any) -> int | None:
    embeddings = result.embeddings
    vector = embeddings[0].values if embeddings else None
    return len(vector) if vector else None
