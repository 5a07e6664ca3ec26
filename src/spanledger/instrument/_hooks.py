"""httpx event hooks that report an SDK's HTTP attempts to the call being recorded.

They are added to the SDK's own httpx (or httpx2) client and do nothing unless a recorded
call is running in the current context and the request is to that call's endpoint. An error
body is read in the hook, which is the read the client would make right after it anyway; a
2xx body is left to the client, and its decoded JSON is captured when the SDK asks for it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

from spanledger.instrument._capture import SdkCall, current_call
from spanledger.instrument._recording import logged
from spanledger.providers._http import error_for_status

__all__ = ["add_hooks", "remove_hooks"]

_lock = threading.Lock()
_users: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _on_request(request: Any) -> None:
    call = current_call()
    if call is not None and call.owns(request.url.path):
        call.attempt_sent(request)


async def _on_request_async(request: Any) -> None:
    _on_request(request)


def _on_response(response: Any) -> None:
    call = current_call()
    if call is None or response.request is not call.request or call.request is None:
        return
    if not 200 <= response.status_code < 400:
        response.read()
    _settle(call, response)


async def _on_response_async(response: Any) -> None:
    call = current_call()
    if call is None or response.request is not call.request or call.request is None:
        return
    if not 200 <= response.status_code < 400:
        await response.aread()
    _settle(call, response)


def _settle(call: SdkCall, response: Any) -> None:
    try:
        status = response.status_code
        if 200 <= status < 300:
            call.attempt_answered(response)
            _capture_json(response, call)
        elif 300 <= status < 400:
            call.attempt_redirected()
        else:
            call.attempt_failed(error_for_status(status, response.headers, response.content))
    except Exception as exc:
        logged(exc)


def _capture_json(response: Any, call: SdkCall) -> None:
    """Let the SDK's own ``response.json()`` hand the decoded body to ``call`` as well."""
    decode = response.json

    def json(**kwargs: Any) -> Any:
        payload = decode(**kwargs)
        if call.answer is response:
            call.answer_decoded(payload)
        return payload

    vars(response)["json"] = json


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
        hooks = client.event_hooks
        for stage, hook in (
            ("request", _on_request),
            ("request", _on_request_async),
            ("response", _on_response),
            ("response", _on_response_async),
        ):
            with contextlib.suppress(ValueError):
                hooks[stage].remove(hook)
