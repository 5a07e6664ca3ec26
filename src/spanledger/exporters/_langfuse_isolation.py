"""A Langfuse client of spanledger's own, which the langfuse SDK shares with no other client.

The SDK keeps one set of resources (tracer provider, span processor, API clients, background
threads) per public key per process, in ``LangfuseResourceManager._instances``. A
``Langfuse(public_key=...)`` for a key already there silently gets the resources the first one
built, whatever ``tracer_provider`` it was given; and a client built later for a key spanledger
used would get spanledger's. Either way one client's observations leave through the other's
tracer provider.

Here the client is built, under the SDK's registry lock, with a public key the registry cannot
match (the same text, hashed by identity: the SDK's authentication, headers and span filter
read the real key), and whatever the SDK filed for it is taken out of the registry before the
lock is released. No lookup of the key, before or after, finds spanledger's resources, and
spanledger's construction never finds anyone else's. The SDK's other registry readers
(``get_client``, the media helpers) take the same lock, so none of them sees the entry either.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langfuse import Langfuse
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["OwnClient", "own_client"]


class _UnlistedKey(str):
    """A public key equal to the real one as text, but hashed by identity: a registry lookup by
    the text never finds what the SDK filed under this object, nor the reverse."""

    __slots__ = ()
    __hash__ = object.__hash__


@dataclass(frozen=True)
class OwnClient:
    """The client built, and why it may share its resources with another client (``None``
    when it shares them with none)."""

    client: Langfuse
    not_isolated: str | None


def own_client(*, public_key: str, tracer_provider: TracerProvider, **options: Any) -> OwnClient:
    """``Langfuse(public_key=..., tracer_provider=..., **options)``, isolated from every other
    client of the process when the installed SDK allows it; otherwise built the SDK's usual
    way, with the reason it may be shared."""
    from langfuse import Langfuse

    registry = _registry()
    if registry is None:
        client = Langfuse(public_key=public_key, tracer_provider=tracer_provider, **options)
        return OwnClient(client, f"{_sdk()} keeps no client registry spanledger can stay out of")
    instances, lock = registry
    with lock:
        listed_before = list(instances.values())
        client = Langfuse(
            public_key=_UnlistedKey(public_key), tracer_provider=tracer_provider, **options
        )
        resources = getattr(client, "_resources", None)
        if any(resources is listed for listed in listed_before):
            return OwnClient(client, f"{_sdk()} handed back the client it keeps for this key")
        for key, listed in list(instances.items()):
            if listed is resources:
                del instances[key]
    provider = getattr(resources, "tracer_provider", None)
    if provider is not None and provider is not tracer_provider:
        return OwnClient(client, f"{_sdk()} put the client on a tracer provider of its choosing")
    return OwnClient(client, None)


def _registry() -> tuple[dict[Any, Any], AbstractContextManager[Any]] | None:
    """The SDK's per-key registry and its lock, when the installed SDK keeps them where this
    module knows to look."""
    try:
        from langfuse._client.resource_manager import LangfuseResourceManager
    except ImportError:
        return None
    instances = getattr(LangfuseResourceManager, "_instances", None)
    lock = getattr(LangfuseResourceManager, "_lock", None)
    if not isinstance(instances, dict) or not isinstance(lock, AbstractContextManager):
        return None
    return instances, lock


def _sdk() -> str:
    """The installed SDK, named with its version, for the reason a client is not isolated."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"langfuse {version('langfuse')}"
    except PackageNotFoundError:
        return "the langfuse SDK"
