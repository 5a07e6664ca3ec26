"""``mistralai.client.Mistral``: ``embeddings.create`` / ``create_async``, recorded as
``mistral_ai``.

The SDK sends through its own ``httpx2`` clients (``sdk_configuration.client`` and
``.async_client``), whose hooks see each HTTP attempt, a retry its ``RetryConfig`` makes
included; ``usage.prompt_tokens`` is read from the raw body the SDK decodes, never from its
typed result: Speakeasy decodes the body's text with ``pydantic_core.from_json``, which hands
the decoded body on while a Mistral client is instrumented, so the body is parsed once. The
call's facts are read from the request body the arguments make (the SDK
sends ``inputs`` as ``input``), by the wire declaration.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from mistralai.client import Mistral
from mistralai.client.embeddings import Embeddings
from mistralai.client.types import UNSET
from mistralai.client.utils import serializers

from spanledger import _forksafe
from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec, current_call
from spanledger.recording.facts import CallFacts, given, request_facts, text_or_none
from spanledger.wire.endpoints import MISTRAL_EMBEDDINGS
from spanledger.wire.http import parsed_url

__all__ = ["install"]

_BODY_KEYS = {
    "model": "model",
    "inputs": "input",
    "output_dimension": "output_dimension",
    "output_dtype": "output_dtype",
    "encoding_format": "encoding_format",
    "metadata": "metadata",
}
"""The method's arguments the SDK sends, by the body key it sends each as; the others
(``retries``, ``server_url``, ``timeout_ms``, ``http_headers``) shape the HTTP call only."""


def install(client: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to a ``mistralai`` client or its ``embeddings`` resource.

    Anything else is refused with a ``TypeError``.
    """
    if isinstance(client, Mistral):
        resource = client.embeddings
    elif isinstance(client, Embeddings):
        resource = client
    else:
        raise TypeError(
            "spanledger.instrument supports mistralai.client.Mistral, "
            f"not {type(client).__qualname__}"
        )
    configuration = resource.sdk_configuration
    spec = MethodSpec(
        facts=lambda args, kwargs: _facts(configuration, kwargs),
        endpoint=MISTRAL_EMBEDDINGS,
        shape=_width,
        route="/embeddings",
    )
    http_clients = (configuration.client, configuration.async_client)
    for is_async, name, http_client in (
        (False, "create", http_clients[0]),
        (True, "create_async", http_clients[1]),
    ):
        installation.is_async = is_async
        installation.wrap(resource, name, spec)
        if http_client is not None:
            installation.hook(http_client)
    _decoding.acquire()
    installation.on_release(_decoding.release)


def _facts(configuration: Any, kwargs: dict[str, Any]) -> CallFacts | None:
    body = {
        key: kwargs[name]
        for name, key in _BODY_KEYS.items()
        if given(kwargs.get(name)) and kwargs[name] is not UNSET
    }
    if text_or_none(body.get("model")) is None:
        return None
    server = kwargs.get("server_url")
    if not isinstance(server, str) or not server:
        server = configuration.get_server_details()[0]
    url = parsed_url(server.rstrip("/") + "/v1/embeddings")
    return request_facts(MISTRAL_EMBEDDINGS, body, url)


def _width(result: Any) -> int | None:
    vector = result.data[0].embedding
    return len(vector) if vector else None


def _from_json(data: Any, *args: Any, **kwargs: Any) -> Any:
    """``pydantic_core.from_json``, handing the 2xx body an instrumented call's SDK decodes
    (the very text of its response) to that call."""
    payload = pydantic_core.from_json(data, *args, **kwargs)
    call = current_call()
    if call is not None:
        answer = call.answer
        if answer is not None and vars(answer).get("_text") is data:
            call.answer_decoded(payload)
    return payload


_NAME = "from_json"  # what Speakeasy's serializers decode bodies with (not exported)


class _Decoding:
    """``serializers.from_json`` is ours while any Mistral client is instrumented."""

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self._users = 0

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1 and getattr(serializers, _NAME, None) is pydantic_core.from_json:
                setattr(serializers, _NAME, _from_json)

    def release(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0 and getattr(serializers, _NAME, None) is _from_json:
                setattr(serializers, _NAME, pydantic_core.from_json)


_decoding = _Decoding()
