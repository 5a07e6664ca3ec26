"""The opt-in for HTTP that other code sends: httpx's (and, when installed, httpx2's) default
transports and ``requests``' ``HTTPAdapter`` record the known vendors' embedding and rerank
requests, whoever made the client.

This reaches what no SDK switch can: a library that talks to a vendor with its own ``requests``
session (Jina through LangChain-community and LlamaIndex) or a fresh ``httpx.Client`` per call
(Haystack's Jina components, LiteLLM's handlers). A request is looked at only when it is a POST
to an embedding or rerank route, and recorded only when its URL and body are a vendor's (see
``spanledger.capture.vendors``); a POST to a chat route made inside an open request is read for
the request's context and records nothing (``spanledger.capture.chat``; the SDKs' own clients
included, since they send through these transports); every other request goes to the original
method untouched. A request made inside a call already being recorded (an instrumented SDK, a
recording transport) is passed through, so each call is recorded once.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from spanledger import _forksafe
from spanledger.capture.chat import (
    ChatRead,
    asend_read,
    chat_read_for,
    might_be_chat_call,
    reading,
    send_read,
)
from spanledger.capture.http import (
    asend_recorded,
    might_be_vendor_call,
    requests_headers,
    send_recorded,
    watch_for,
)
from spanledger.capture.patching import ClassPatch, patch_class
from spanledger.recording.call import logged
from spanledger.wire.endpoints import Vendor

__all__ = ["http_switched_on", "switch_http_off", "switch_http_on"]

_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)


class _State:
    def __init__(self) -> None:
        self.vendors: dict[str, Vendor] | None = None  # ``None``: switched off
        self.undo: list[ClassPatch] = []


_state = _State()


def http_switched_on() -> bool:
    return _state.vendors is not None


def switch_http_on(vendors: Mapping[str, Vendor]) -> None:
    """Patch httpx's default transports and, when it is installed, ``requests``' adapter.
    On already: only the vendor map is replaced."""
    with _lock:
        if _state.vendors is not None:
            _state.vendors = dict(vendors)
            return
        _state.vendors = dict(vendors)
        _replace(httpx.HTTPTransport, "handle_request", _httpx_sync)
        _replace(httpx.AsyncHTTPTransport, "handle_async_request", _httpx_async)
        try:
            import httpx2
        except ImportError:
            pass
        else:
            _replace(httpx2.HTTPTransport, "handle_request", _httpx2_sync)
            _replace(httpx2.AsyncHTTPTransport, "handle_async_request", _httpx2_async)
        try:
            from requests.adapters import HTTPAdapter
        except ImportError:
            return
        _replace(HTTPAdapter, "send", _requests_send)


def switch_http_off() -> None:
    """Put every patched method back (one another library has wrapped since stays under its
    wrapper, passing every request through)."""
    with _lock:
        _state.vendors = None
        for patch in reversed(_state.undo):
            patch.undo()
        _state.undo.clear()


def _replace(owner: type, name: str, make: Callable[[ClassPatch], object]) -> None:
    _state.undo.append(patch_class(owner, name, make))


def _vendors(patch: ClassPatch) -> Mapping[str, Vendor] | None:
    """The vendors a patched method records for; ``None``: pass the request through."""
    return _state.vendors if patch.on else None


def _httpx_sync(patch: ClassPatch) -> Any:
    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        vendors = _vendors(patch)
        send: Callable[[httpx.Request], httpx.Response] = patch.beneath(self)
        if vendors is None:
            return send(request)
        method, path = request.method, request.url.path
        if might_be_vendor_call(method, path):
            return send_recorded(send, request, vendors)
        if might_be_chat_call(method, path):
            return send_read(send, request)
        return send(request)

    return handle_request


def _httpx_async(patch: ClassPatch) -> Any:
    async def handle_async_request(
        self: httpx.AsyncHTTPTransport, request: httpx.Request
    ) -> httpx.Response:
        vendors = _vendors(patch)
        send: Callable[[httpx.Request], Awaitable[httpx.Response]] = patch.beneath(self)
        if vendors is None:
            return await send(request)
        method, path = request.method, request.url.path
        if might_be_vendor_call(method, path):
            return await asend_recorded(send, request, vendors)
        if might_be_chat_call(method, path):
            return await asend_read(send, request)
        return await send(request)

    return handle_async_request


def _httpx2_sync(patch: ClassPatch) -> Any:
    """httpx2's transport: the same recording, with httpx2's own types (its classes are not
    httpx's), the body read whole and handed on as a fresh httpx2 response."""

    def handle_request(self: Any, request: Any) -> Any:
        vendors = _vendors(patch)
        send = patch.beneath(self)
        if vendors is None:
            return send(request)
        if might_be_chat_call(request.method, request.url.path):
            return _httpx2_chat(send, request)
        if not might_be_vendor_call(request.method, request.url.path):
            return send(request)
        watch = _httpx2_watch(request, vendors)
        if watch is None:
            return send(request)
        try:
            response = send(request)
            stream = response.stream
            try:
                raw = b"".join(stream)
            finally:
                stream.close()
        except BaseException as exc:
            watch.raised(exc)
            raise
        return _httpx2_answered(watch, response, raw, request)

    return handle_request


def _httpx2_async(patch: ClassPatch) -> Any:
    async def handle_async_request(self: Any, request: Any) -> Any:
        vendors = _vendors(patch)
        send = patch.beneath(self)
        if vendors is None:
            return await send(request)
        if might_be_chat_call(request.method, request.url.path):
            return await _httpx2_achat(send, request)
        if not might_be_vendor_call(request.method, request.url.path):
            return await send(request)
        watch = _httpx2_watch(request, vendors)
        if watch is None:
            return await send(request)
        try:
            response = await send(request)
            stream = response.stream
            try:
                raw = b"".join([chunk async for chunk in stream])
            finally:
                await stream.aclose()
        except BaseException as exc:
            watch.raised(exc)
            raise
        return _httpx2_answered(watch, response, raw, request)

    return handle_async_request


def _httpx2_chat(send: Callable[[Any], Any], request: Any) -> Any:
    """httpx2's chat call read for the open request's context, as ``send_read`` reads
    httpx's."""
    read = _httpx2_read(request)
    if read is None:
        return send(request)
    with reading():
        response = send(request)
        if not read.arrived(response.status_code, response.headers.get("content-type")):
            return response
        body = _httpx2_already_read(response)
        if body is not None:
            read.answered_read(body)
            return response
        stream = response.stream
        try:
            raw = b"".join(stream)
        finally:
            stream.close()
    return _httpx2_read_answer(read, response, raw, request)


async def _httpx2_achat(send: Callable[[Any], Awaitable[Any]], request: Any) -> Any:
    """The coroutine twin of ``_httpx2_chat``."""
    read = _httpx2_read(request)
    if read is None:
        return await send(request)
    with reading():
        response = await send(request)
        if not read.arrived(response.status_code, response.headers.get("content-type")):
            return response
        body = _httpx2_already_read(response)
        if body is not None:
            read.answered_read(body)
            return response
        stream = response.stream
        try:
            raw = b"".join([chunk async for chunk in stream])
        finally:
            await stream.aclose()
    return _httpx2_read_answer(read, response, raw, request)


def _httpx2_read(request: Any) -> ChatRead | None:
    try:
        url = httpx.URL(str(request.url))
    except Exception as exc:
        logged(exc)
        return None
    return chat_read_for(url, lambda: _httpx2_body(request))


def _httpx2_already_read(response: Any) -> bytes | None:
    """The body of an httpx2 response its maker already read, else ``None``."""
    import httpx2

    try:
        content: bytes = response.content
        return content
    except httpx2.ResponseNotRead:
        return None


def _httpx2_read_answer(read: ChatRead, response: Any, raw: bytes, request: Any) -> Any:
    """Read the whole answer; hand the caller an httpx2 response of the same status, headers
    and raw bytes."""
    import httpx2

    read.answered(response.status_code, httpx.Headers(response.headers.multi_items()), raw)
    return httpx2.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx2.ByteStream(raw),
        extensions=response.extensions,
        request=request,
    )


def _httpx2_watch(request: Any, vendors: Mapping[str, Vendor]) -> Any:
    try:
        return watch_for(httpx.URL(str(request.url)), lambda: _httpx2_body(request), vendors)
    except Exception as exc:
        logged(exc)
        return None


def _httpx2_body(request: Any) -> bytes:
    """The request's body when it is in memory (a 307/308 resend's stream unread: read from
    its in-memory stream); any other stream is not ours to consume."""
    import httpx2

    try:
        content: bytes = request.content
        return content
    except httpx2.RequestNotRead:
        stream = request.stream
        if not isinstance(stream, httpx2.ByteStream):
            raise
        return b"".join(stream)


def _httpx2_answered(watch: Any, response: Any, raw: bytes, request: Any) -> Any:
    """Record the outcome; hand the caller an httpx2 response of the same status, headers and
    raw bytes."""
    import httpx2

    watch.settled(response.status_code, httpx.Headers(response.headers.multi_items()), raw)
    return httpx2.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx2.ByteStream(raw),
        extensions=response.extensions,
        request=request,
    )


def _requests_send(patch: ClassPatch) -> Any:
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        vendors = _vendors(patch)
        original = patch.beneath(self)
        if vendors is None:
            return original(request, *args, **kwargs)
        address = request.url.partition("?")[0]
        if might_be_chat_call(request.method, address):
            return _requests_chat(original, request, args, kwargs)
        if not might_be_vendor_call(request.method, address):
            return original(request, *args, **kwargs)
        try:
            watch = watch_for(httpx.URL(request.url), lambda: _body(request), vendors)
        except Exception as exc:
            logged(exc)
            watch = None
        if watch is None:
            return original(request, *args, **kwargs)
        try:
            response = original(request, *args, **kwargs)
            raw = response.content  # read once; the caller reads the same bytes from it
        except BaseException as exc:
            watch.raised(exc)
            raise
        watch.settled_requests(response, raw)
        return response

    return send


def _requests_chat(
    original: Callable[..., Any], request: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A ``requests`` chat call read for the open request's context; a streamed one (the
    caller's ``stream=True``, or a stream the server sends) is left unread."""
    try:
        read = chat_read_for(httpx.URL(request.url), lambda: _body(request))
    except Exception as exc:
        logged(exc)
        read = None
    if read is None:
        return original(request, *args, **kwargs)
    with reading():
        response = original(request, *args, **kwargs)
        streamed = bool(kwargs.get("stream", args[0] if args else False))
        if not read.arrived(
            response.status_code, response.headers.get("content-type"), streamed=streamed
        ):
            return response
        raw = response.content  # read once; the caller reads the same bytes from it
    try:
        headers = requests_headers(response)
    except Exception as exc:
        logged(exc)
        return response
    read.answered(response.status_code, headers, raw if isinstance(raw, bytes) else b"")
    return response


def _body(request: Any) -> bytes | str:
    """A prepared request's body, when it is in memory (a streamed upload is not read)."""
    body = request.body
    if isinstance(body, bytes | str):
        return body
    raise TypeError("the request body is not in memory")
