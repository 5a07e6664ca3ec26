"""httpx event hooks (and a ``send`` wrapper) that report an SDK's HTTP attempts to the call
being recorded.

They are added to the SDK's own httpx (or httpx2) client and do nothing unless a recorded
call is running in the current context and the request is to that call's endpoint (or a
redirect hop of it). Bodies are always read by the client: a 2xx body's decoded JSON is
captured when the SDK asks for it, and an error's event goes out when the client reads or
drops the error body.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

from spanledger import _forksafe
from spanledger.capture.sdk_calls import SdkCall, current_call
from spanledger.recording.call import logged

__all__ = ["add_hooks", "remove_hooks"]

_lock = _forksafe.module_lock(globals(), "_lock")
_users: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_replaced: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_ours: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _on_request(request: Any) -> None:
    call = current_call()
    if call is not None and call.owns(request):
        call.attempt_sent(request)


async def _on_request_async(request: Any) -> None:
    _on_request(request)


def _on_response(response: Any) -> None:
    call = current_call()
    if call is not None and call.request is not None and response.request is call.request:
        _settle(call, response, is_async=False)


async def _on_response_async(response: Any) -> None:
    call = current_call()
    if call is not None and call.request is not None and response.request is call.request:
        _settle(call, response, is_async=True)


def _settle(call: SdkCall, response: Any, *, is_async: bool) -> None:
    """A 2xx is held for the SDK to decode; an error waits for its body; a redirect hop
    leaves the attempt open for the request that follows it."""
    try:
        status = response.status_code
        if 200 <= status < 300:
            call.attempt_answered(response)
            _capture_json(response, call)
        elif 300 <= status < 400:
            call.attempt_redirected(response)
        else:
            call.attempt_errored(response)
            _settle_when_read(response, call, is_async=is_async)
    except Exception as exc:
        logged(exc)


def _settle_when_read(response: Any, call: SdkCall, *, is_async: bool) -> None:
    """End the failed attempt when the client reads the error body or closes the response.

    Reading the body is left to the client: a body that breaks off mid-read must fail in the
    client's own read, exactly as it would without the hooks.
    """
    attributes = vars(response)
    reading = False  # a read closes the response itself before the body is at hand
    if is_async:
        aread, aclose = response.aread, response.aclose

        async def read_async() -> Any:
            nonlocal reading
            reading = True
            try:
                return await aread()
            finally:
                call.error_body_settled(response)

        async def close_async() -> Any:
            if not reading:
                call.error_body_settled(response)
            return await aclose()

        attributes["aread"], attributes["aclose"] = read_async, close_async
        return
    read, close = response.read, response.close

    def read_sync() -> Any:
        nonlocal reading
        reading = True
        try:
            return read()
        finally:
            call.error_body_settled(response)

    def close_sync() -> Any:
        if not reading:
            call.error_body_settled(response)
        return close()

    attributes["read"], attributes["close"] = read_sync, close_sync


def _capture_json(response: Any, call: SdkCall) -> None:
    """Let the SDK's own ``response.json()`` hand the decoded body to ``call`` as well."""
    decode = response.json

    def json(**kwargs: Any) -> Any:
        payload = decode(**kwargs)
        if call.answer is response:
            call.answer_decoded(payload)
        return payload

    vars(response)["json"] = json


def _current_send(client: Any) -> Any:
    """What the client's ``send`` would be without ours: someone else's instance wrapper from
    before ours, else the class's method as it is now (a class patched later is honoured)."""
    replaced = _replaced.get(client)
    return replaced if replaced is not None else type(client).send.__get__(client)


def _sending(client: Any) -> Any:
    """A ``send`` for ``client`` that tells the open attempt when the HTTP layer raised for it
    (a transport failure, too many redirects), at once: an SDK that retries never lets it
    reach us. The client is held weakly, so the wrapper on it is no reference cycle."""
    target = weakref.ref(client)

    def send_recorded(request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return _current_send(target())(request, *args, **kwargs)
        except BaseException as exc:
            call = current_call()
            if call is not None:
                call.send_raised(exc)
            raise

    return send_recorded


def _sending_async(client: Any) -> Any:
    """The coroutine twin of ``_sending``."""
    target = weakref.ref(client)

    async def send_recorded(request: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await _current_send(target())(request, *args, **kwargs)
        except BaseException as exc:
            call = current_call()
            if call is not None:
                call.send_raised(exc)
            raise

    return send_recorded


def add_hooks(client: Any, *, is_async: bool) -> None:
    """Add the hooks to an httpx-like client once, however many SDK clients share it."""
    with _lock:
        count = _users.get(client, 0)
        _users[client] = count + 1
        if count:
            return
        hooks = client.event_hooks
        hooks["request"].append(_on_request_async if is_async else _on_request)
        hooks["response"].append(_on_response_async if is_async else _on_response)
        attributes = vars(client)
        replaced = attributes.get("send")  # someone else's wrapper, if any
        if replaced is not None:
            _replaced[client] = replaced
        ours = _sending_async(client) if is_async else _sending(client)
        _ours[client] = ours
        attributes["send"] = ours


def remove_hooks(client: Any) -> None:
    """Drop one user of the hooks; the last one takes them off the client."""
    with _lock:
        count = _users.get(client, 0)
        if count > 1:
            _users[client] = count - 1
            return
        _users.pop(client, None)
        if count == 0:
            return
        attributes = vars(client)
        ours = _ours.pop(client, None)
        if ours is not None and attributes.get("send") is ours:
            replaced = _replaced.pop(client, None)
            if replaced is None:
                del attributes["send"]
            else:
                attributes["send"] = replaced
        # else a wrapper put on top of ours keeps calling ours, which only passes through
        hooks = client.event_hooks
        for stage, hook in (
            ("request", _on_request),
            ("request", _on_request_async),
            ("response", _on_response),
            ("response", _on_response_async),
        ):
            with contextlib.suppress(ValueError):
                hooks[stage].remove(hook)
