"""``ollama.Client`` / ``AsyncClient``: ``embed`` and the legacy ``embeddings``, recorded as
``ollama``.

Both post through the client's own httpx client (``client._client``), whose hooks see each
HTTP attempt; ``embed``'s figure (``prompt_eval_count``) is read from the JSON the SDK decodes
from the raw body, and the legacy route reports none (usage ``None``). The SDK's keyword
arguments are its request body's keys, so the call's facts are read from them by the wire
declaration, as a request body would be. The module-level ``ollama.embed`` is a method of a
client made at import: the process-wide switch re-binds it (and ``ollama.embeddings``) while
it is on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import ollama

from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec
from spanledger.recording.facts import CallFacts, request_facts, text_or_none
from spanledger.wire.endpoints import OLLAMA_EMBED, OLLAMA_LEGACY_EMBEDDINGS, Endpoint

__all__ = ["hook", "install"]

_EMBED_ARGS = ("model", "input", "truncate", "options", "keep_alive", "dimensions")
_LEGACY_ARGS = ("model", "prompt", "options", "keep_alive")


def install(client: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to an ``ollama.Client`` or ``AsyncClient``.

    Anything else is refused with a ``TypeError``.
    """
    if isinstance(client, ollama.AsyncClient):
        installation.is_async = True
    elif not isinstance(client, ollama.Client):
        raise TypeError(
            "spanledger.instrument supports ollama.Client and AsyncClient, "
            f"not {type(client).__qualname__}"
        )
    http_client = client._client
    base = http_client.base_url
    for name, endpoint, names in (
        ("embed", OLLAMA_EMBED, _EMBED_ARGS),
        ("embeddings", OLLAMA_LEGACY_EMBEDDINGS, _LEGACY_ARGS),
    ):
        spec = MethodSpec(
            facts=partial(_facts, endpoint, names, base.join(endpoint.route)),
            endpoint=endpoint,
            shape=_width,
            route=endpoint.route,
        )
        installation.wrap(client, name, spec)
    installation.hook(http_client)


def _facts(
    endpoint: Endpoint,
    names: tuple[str, ...],
    url: httpx.URL,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> CallFacts | None:
    """The call's arguments are its body's keys (``None`` ones are left out, as the SDK
    leaves them out): read by the endpoint's declaration."""
    named = dict(zip(names, args, strict=False))
    named.update(kwargs)
    body = {key: _plain(value) for key, value in named.items() if value is not None}
    if text_or_none(body.get("model")) is None:
        return None
    return request_facts(endpoint, body, url)


def _plain(value: Any) -> Any:
    """An SDK model (``ollama.Options``) as the dict it is sent as."""
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else value


def _width(result: Any) -> int | None:
    embeddings = getattr(result, "embeddings", None)
    vector = embeddings[0] if embeddings else getattr(result, "embedding", None)
    return len(vector) if vector else None


_MODULE_METHODS = ("embed", "embeddings")
"""The module-level functions that are methods of ``ollama``'s default client."""


class _Rebound:
    """``ollama.embed`` / ``ollama.embeddings`` bound again through the (patched) class,
    while the switch is on; ``undo`` puts the SDK's own back, unless replaced since."""

    def __init__(self) -> None:
        self._changed: list[tuple[str, object, object]] = []
        for name in _MODULE_METHODS:
            current = getattr(ollama, name, None)
            owner = getattr(current, "__self__", None)
            if not isinstance(owner, ollama.Client | ollama.AsyncClient):
                continue  # replaced by someone: not the default client's method
            rebound = getattr(owner, name)
            setattr(ollama, name, rebound)
            self._changed.append((name, current, rebound))

    def undo(self) -> None:
        for name, original, rebound in reversed(self._changed):
            if getattr(ollama, name, None) is rebound:
                setattr(ollama, name, original)
        self._changed.clear()


def hook(adopt: Callable[[Any], None]) -> _Rebound:
    """For the process-wide switch, once the classes are patched: the module-level
    ``ollama.embed`` (a method of a client made at import, bound before the patch) goes
    through the patched class too. Clients are adopted at their first call, not here."""
    return _Rebound()
