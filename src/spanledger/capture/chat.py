"""Chat requests seen in flight, read for the open request's context: what the prompt rendered
and what the answer cited, with no framework and no event.

A POST to a chat route (``spanledger.wire.chat``) made while a request is open is read in
process: its prompt parts and documents are matched against the frames the request served, and
its answer's text, the documents the provider's citations name and the input tokens it reports
go to the request's context. Outside a request a chat call is passed on untouched and unread.
A whole answer is read and handed on as a fresh response with the same status, headers and
raw bytes (one its maker already read is handed on itself), as ``capture.http`` does for the
calls it records. A streamed answer (``stream: true``, a streaming route, ``text/event-stream``)
is left unread: its prompt counts as rendered, its answer is not read. Only a 2xx answer is a
model call that answered; anything else passes on as it came. Nothing here raises into the
caller: a failure of its own is logged by type and the call goes on.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import httpx

from spanledger.attribution.context import ContextCapture
from spanledger.attribution.scope import current_request
from spanledger.capture.http import aread_whole, read_whole, request_body
from spanledger.recording.call import logged
from spanledger.wire.chat import CHAT_ENDINGS, ChatPrompt, ChatWire, chat_wire_for, documents_named
from spanledger.wire.http import decoded_body
from spanledger.wire.request import request_path

__all__ = [
    "ChatRead",
    "asend_read",
    "chat_read_for",
    "might_be_chat_call",
    "reading",
    "send_read",
]

_reading: ContextVar[bool] = ContextVar("spanledger_chat_read", default=False)
"""Set while a chat request is read: a transport under it passes the request on unread."""

_EVENT_STREAM = "text/event-stream"


def might_be_chat_call(method: str | None, path: str) -> bool:
    """The cheap first test: only a POST to a chat route is looked at."""
    return method == "POST" and path.rstrip("/").endswith(CHAT_ENDINGS)


class ChatRead:
    """One chat request read for its request's context: its prompt, read before it is sent,
    and its answer when one arrives."""

    __slots__ = ("context", "model", "prompt", "streamed", "wire")

    def __init__(
        self,
        context: ContextCapture,
        wire: ChatWire,
        prompt: ChatPrompt,
        model: str | None,
        streamed: bool,
    ) -> None:
        self.context = context
        self.wire = wire
        self.prompt = prompt
        self.model = model
        self.streamed = streamed

    def arrived(self, status: int, content_type: str | None, *, streamed: bool = False) -> bool:
        """The answer's status and type arrived: whether to read its body whole. A streamed
        2xx answer renders the prompt here and is left unread (``streamed``: the caller
        streams it); an answer that is not 2xx is no model call that answered."""
        if not 200 <= status < 300:
            return False
        if self.streamed or streamed or _EVENT_STREAM in (content_type or "").lower():
            self._guarded(None)
            return False
        return True

    def answered(self, status: int, headers: httpx.Headers, raw: bytes) -> None:
        """The whole answer: ``raw`` as sent, decoded by the encoding ``headers`` declare."""
        try:
            body = decoded_body(status, headers, raw)
        except Exception as exc:
            logged(exc)
            return
        self._guarded(body)

    def answered_read(self, body: bytes) -> None:
        """The whole answer, already decoded by whoever read it first."""
        self._guarded(body)

    def _guarded(self, body: bytes | None) -> None:
        try:
            self._settle(body)
        except Exception as exc:
            logged(exc)

    def _settle(self, body: bytes | None) -> None:
        """The model read the prompt; with a ``body``, this is what it answered."""
        prompt = self.prompt
        call = self.context.prompted([*prompt.parts, *(text for text, _ in prompt.documents)])
        if body is None:
            return
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return  # the caller's own read fails too: the call answered nothing readable
        answer = self.wire.answer(payload)
        self.context.answered(
            call,
            answer.text,
            cited=documents_named(prompt.documents, answer),
            input_tokens=answer.input_tokens,
            provider=self.wire.provider,
            model=answer.model or self.model,
        )


def chat_read_for(url: httpx.URL, body_of: Callable[[], bytes | str]) -> ChatRead | None:
    """A read of the POST to ``url`` whose body ``body_of`` gives, when it is a chat call made
    inside an open request and no outer transport reads it already; ``None`` otherwise (the
    body is then never read)."""
    if _reading.get():
        return None
    scope = current_request()
    if scope is None:
        return None
    try:
        path = request_path(url)
        wire = chat_wire_for(path)
        if wire is None:
            return None
        body = json.loads(body_of())
        if type(body) is not dict:
            return None
        prompt = wire.prompt(body)
        streamed = wire.streamed or body.get("stream") is True
        return ChatRead(
            scope.context, wire, prompt, prompt.model or wire.route_model(path), streamed
        )
    except Exception as exc:
        logged(exc)
        return None


@contextmanager
def reading() -> Iterator[None]:
    """Mark the current context as reading a chat request while its answer arrives."""
    token = _reading.set(True)
    try:
        yield
    finally:
        _reading.reset(token)


def send_read(
    send: Callable[[httpx.Request], httpx.Response], request: httpx.Request
) -> httpx.Response:
    """``send(request)``, read for the open request's context when it is a chat call."""
    read = _read_for(request)
    if read is None:
        return send(request)
    with reading():
        response = send(request)
        if not read.arrived(response.status_code, response.headers.get("content-type")):
            return response
        body, raw = read_whole(response)
    return _handed_on(read, response, body, raw, request)


async def asend_read(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]], request: httpx.Request
) -> httpx.Response:
    """The coroutine twin of ``send_read``."""
    read = _read_for(request)
    if read is None:
        return await send(request)
    with reading():
        response = await send(request)
        if not read.arrived(response.status_code, response.headers.get("content-type")):
            return response
        body, raw = await aread_whole(response)
    return _handed_on(read, response, body, raw, request)


def _read_for(request: httpx.Request) -> ChatRead | None:
    if not might_be_chat_call(request.method, request.url.path):
        return None
    return chat_read_for(request.url, lambda: request_body(request))


def _handed_on(
    read: ChatRead,
    response: httpx.Response,
    body: bytes | None,
    raw: bytes,
    request: httpx.Request,
) -> httpx.Response:
    """Read the answer; hand the caller a response its maker already read as it was made,
    else a fresh one with the same status, headers and raw bytes."""
    if body is not None:
        read.answered_read(body)
        return response
    read.answered(response.status_code, response.headers, raw)
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx.ByteStream(raw),
        extensions=response.extensions,
        request=request,
    )
