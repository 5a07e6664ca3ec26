"""``voyageai.Client`` / ``AsyncClient``: ``embed`` and ``rerank``, recorded as ``voyageai``.

The Voyage SDK talks HTTP through ``requests`` and ``aiohttp`` sessions it creates itself, so
there is no HTTP client to hook. Each HTTP attempt goes through its
``APIRequestor.request`` / ``arequest``, which return the body exactly as ``json.loads`` made
it, before the SDK touches it: that verbatim JSON is where ``usage.total_tokens`` is read. The
requestor class is wrapped while at least one Voyage client is instrumented; outside a recorded
call the wrapper only passes through. The status each answer arrives with is heard before its
body is read (a response hook on the SDK's ``requests`` session, aiohttp's response as the
requestor gets it), so an answer whose body does not decode keeps its status.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

import voyageai
from voyageai.api_resources import api_requestor
from voyageai.api_resources.api_requestor import APIRequestor
from voyageai.client import Client
from voyageai.client_async import AsyncClient

from spanledger import _forksafe
from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec, current_call, listening, note_arrival
from spanledger.recording.facts import (
    EmbedFacts,
    RerankFacts,
    given,
    input_texts,
    passed,
    positive_int,
    server_of,
    text_or_none,
    utf8_length,
)
from spanledger.wire.endpoints import VOYAGE_EMBEDDINGS, VOYAGE_RERANK
from spanledger.wire.read import vector_type

__all__ = ["install"]

Server = tuple[str | None, int | None]
_EMBED_ARGS = ("texts", "model", "input_type", "truncation", "output_dtype", "output_dimension")
_RERANK_ARGS = ("query", "documents", "model", "top_k", "truncation")
_DEFAULT_BASE_URL = "https://api.voyageai.com/v1"


try:
    from voyageai.local.helpers import is_local_model as _is_local_model
except ImportError:  # voyageai 0.3 runs no model in process

    def _is_local_model(model: str) -> bool:
        return False


def install(client: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to a ``voyageai.Client`` or ``AsyncClient``.

    Anything else is refused with a ``TypeError``.
    """
    if isinstance(client, AsyncClient):
        installation.is_async = True
    elif not isinstance(client, Client):
        raise TypeError(
            "spanledger.instrument supports voyageai.Client and AsyncClient, "
            f"not {type(client).__qualname__}"
        )
    server = server_of(client._params.get("base_url") or _DEFAULT_BASE_URL)
    installation.wrap(
        client,
        "embed",
        MethodSpec(
            facts=partial(_embed_facts, server),
            endpoint=VOYAGE_EMBEDDINGS,
            shape=_float_width,
            route="/embeddings",
        ),
    )
    installation.wrap(
        client,
        "rerank",
        MethodSpec(
            facts=partial(_rerank_facts, server),
            endpoint=VOYAGE_RERANK,
            shape=lambda result: len(result.results),
            route="/rerank",
        ),
    )
    _requestor.acquire()
    installation.on_release(_requestor.release)


def _named(names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    named = dict(zip(names, args, strict=False))
    named.update(kwargs)
    return named


def _embed_facts(
    server: Server, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    named = _named(_EMBED_ARGS, args, kwargs)
    model = named.get("model")
    model = text_or_none(voyageai.VOYAGE_EMBED_DEFAULT_MODEL if model is None else model)
    if model is None or _is_local_model(model):
        return None
    count, texts = input_texts(named.get("texts"))
    input_type = text_or_none(named.get("input_type"))
    params: dict[str, Any] = {"input_type": input_type} if input_type else {}
    if given(named.get("output_dimension")):
        params["dimensions"] = named["output_dimension"]
    return EmbedFacts(
        provider=VOYAGE_EMBEDDINGS.provider,
        model=model,
        input_count=count,
        inputs=texts,
        input_type=input_type,
        request_params=params,
        extras=passed(named, ("truncation", "output_dtype")),
        server_address=server[0],
        server_port=server[1],
        billing=VOYAGE_EMBEDDINGS.billing,
        dtype=vector_type(named.get("output_dtype")),
    )


def _rerank_facts(
    server: Server, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> RerankFacts | None:
    named = _named(_RERANK_ARGS, args, kwargs)
    model = text_or_none(named.get("model"))
    if model is None:
        return None
    query = text_or_none(named.get("query"))
    count, documents = input_texts(named.get("documents"))
    return RerankFacts(
        provider=VOYAGE_EMBEDDINGS.provider,
        model=model,
        query_length=utf8_length(query) if query is not None else 0,
        document_count=count,
        query=query,
        documents=documents,
        top_k=positive_int(named.get("top_k")),
        extras=passed(named, ("truncation",)),
        server_address=server[0],
        server_port=server[1],
        billing=VOYAGE_RERANK.billing,
    )


def _float_width(result: Any) -> int | None:
    """The SDK's decoded width, for float vectors only: an integer one may be bit-packed."""
    vector = result.embeddings[0]
    return len(vector) if vector and type(vector[0]) is float else None


class _RequestorWrap:
    """Wraps ``APIRequestor.request`` / ``arequest`` while any Voyage client is instrumented,
    and hears the status each answer arrives with (``_hear``, ``_arriving``): a body that does
    not decode fails inside the HTTP library, and the SDK never gets the response."""

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self._users = 0
        self._originals: dict[str, Callable[..., Any]] = {}
        self._make_session: Callable[[], Any] | None = None

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            self._originals = {
                "request": APIRequestor.request,
                "arequest": APIRequestor.arequest,
            }
            APIRequestor.request = _sync_attempt(APIRequestor.request)  # type: ignore[method-assign]
            APIRequestor.arequest = _async_attempt(APIRequestor.arequest)  # type: ignore[method-assign]
            # where the status is heard (a release without these seams loses only that)
            if hasattr(APIRequestor, "arequest_raw"):
                self._originals["arequest_raw"] = APIRequestor.arequest_raw
                APIRequestor.arequest_raw = _arriving(APIRequestor.arequest_raw)  # type: ignore[method-assign]
            if hasattr(api_requestor, "_make_session"):
                self._make_session = api_requestor._make_session
                api_requestor._make_session = _hearing(api_requestor._make_session)

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            self._users = 0
            for name, original in self._originals.items():
                setattr(APIRequestor, name, original)
            self._originals = {}
            if self._make_session is not None:
                api_requestor._make_session = self._make_session
                self._make_session = None
            _unhook(_thread_session())


def _thread_session() -> Any:
    """The ``requests`` session the SDK keeps for this thread, if it has made one."""
    return getattr(getattr(api_requestor, "_thread_context", None), "session", None)


def _hear(response: Any, *args: Any, **kwargs: Any) -> None:
    """A ``requests`` response hook on the SDK's session: the status an attempt's answer
    arrived with, before the session reads its body (heard only inside a recorded attempt)."""
    note_arrival(response.status_code, response.headers)


def _hook(session: Any) -> None:
    with contextlib.suppress(Exception):
        hooks = session.hooks["response"]
        if _hear not in hooks:
            hooks.append(_hear)


def _unhook(session: Any) -> None:
    with contextlib.suppress(Exception):
        session.hooks["response"].remove(_hear)


def _hearing(make_session: Callable[[], Any]) -> Callable[[], Any]:
    """The SDK's session maker, whose sessions carry ``_hear``."""

    def made() -> Any:
        session = make_session()
        _hook(session)
        return session

    return made


def _arriving(original: Callable[..., Any]) -> Callable[..., Any]:
    """``APIRequestor.arequest_raw``, which returns aiohttp's response before its body is
    read: the status it arrived with is heard there."""

    async def arequest_raw(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        note_arrival(getattr(result, "status", None), getattr(result, "headers", None))
        return result

    return arequest_raw


_requestor = _RequestorWrap()


def _sync_attempt(original: Callable[..., Any]) -> Callable[..., Any]:
    def request(self: Any, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        call = current_call()
        if call is None or type(url) is not str or not call.owns_path(url):
            return original(self, method, url, *args, **kwargs)
        call.attempt_sent(None)
        _hook(_thread_session())  # one made before
        with listening() as arrival:
            try:
                response = original(self, method, url, *args, **kwargs)
            except BaseException as exc:
                if not call.answer_unread(arrival, exc):
                    call.attempt_raised(exc)
                raise
        call.attempt_answered(arrival if arrival.status_code is not None else None)
        call.answer_decoded(response.data)
        return response

    return request


def _async_attempt(original: Callable[..., Any]) -> Callable[..., Any]:
    async def arequest(self: Any, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        call = current_call()
        if call is None or type(url) is not str or not call.owns_path(url):
            return await original(self, method, url, *args, **kwargs)
        call.attempt_sent(None)
        with listening() as arrival:
            try:
                response = await original(self, method, url, *args, **kwargs)
            except BaseException as exc:
                if not call.answer_unread(arrival, exc):
                    call.attempt_raised(exc)
                raise
        call.attempt_answered(arrival if arrival.status_code is not None else None)
        call.answer_decoded(response.data)
        return response

    return arequest
