"""``instrument`` / ``uninstrument``: wrap a supported SDK client's methods, and undo it.

What was changed is kept on the client itself, so a client that is dropped takes its record
with it. Wrapping sets instance attributes and adds hooks to the SDK's own httpx client; the
SDK's classes are never touched, except Voyage's requestor (see ``voyage_client``). Undoing
takes each change back, and so does dropping the client, for what outlives it.

A dropped client is released by the garbage collector, which can run in the middle of any code,
including code that holds the very locks a release takes. So the collector only queues the
release, and the queue is worked off by the next ``instrument`` or ``uninstrument``. The queue
holds what it releases weakly: an httpx client that was dropped too is not kept alive by it.
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, overload

from spanledger import _forksafe
from spanledger.instrumentation import _everywhere
from spanledger.instrumentation._capture import MethodSpec, Switch, wrap_async, wrap_sync
from spanledger.instrumentation._everywhere import ClassMethod, SdkSupport
from spanledger.instrumentation._hooks import add_hooks, remove_hooks
from spanledger.instrumentation._http_everywhere import (
    http_switched_on,
    switch_http_off,
    switch_http_on,
)
from spanledger.instrumentation._routes import checked_vendors
from spanledger.recording.call import logged

__all__ = ["Installation", "instrument", "instrumented_sdks", "is_instrumented", "uninstrument"]

C = TypeVar("C")

_RECORD = "_spanledger_instrumentation"


def _mistral_client(resource: Any) -> Any:
    """The ``Mistral`` client an ``Embeddings`` resource belongs to (the resource itself when
    it was made on its own)."""
    parent = getattr(resource, "parent_ref", None)
    return parent if type(parent).__name__ == "Mistral" else resource


_INTEGRATIONS = {
    # the SDK's module (or a package of it: ``google.genai``), and the integration that wraps
    # its clients
    "openai": "spanledger.instrumentation.openai_client",
    "cohere": "spanledger.instrumentation.cohere_client",
    "voyageai": "spanledger.instrumentation.voyage_client",
    "botocore": "spanledger.instrumentation.bedrock_client",
    "google.genai": "spanledger.instrumentation.google_client",
    "mistralai": "spanledger.instrumentation.mistral_client",
    "ollama": "spanledger.instrumentation.ollama_client",
    "vertexai": "spanledger.instrumentation.vertexai_model",
    "sentence_transformers": "spanledger.instrumentation.sentence_transformers_model",
    "flashrank": "spanledger.instrumentation.flashrank_ranker",
}
_SUPPORT = {
    "openai": SdkSupport(
        "openai",
        (((3, 57), (4,)),),
        (
            ClassMethod(
                "openai.resources.embeddings", "Embeddings", "create", False, lambda r: r._client
            ),
            ClassMethod(
                "openai.resources.embeddings",
                "AsyncEmbeddings",
                "create",
                True,
                lambda r: r._client,
            ),
        ),
    ),
    "cohere": SdkSupport(
        "cohere",
        (((5, 21), (6,)), ((7, 3), (8,))),
        (
            ClassMethod("cohere", "ClientV2", "embed", False),
            ClassMethod("cohere", "ClientV2", "rerank", False),
            ClassMethod("cohere", "AsyncClientV2", "embed", True),
            ClassMethod("cohere", "AsyncClientV2", "rerank", True),
            ClassMethod("cohere", "Client", "embed", False),
            ClassMethod("cohere", "Client", "rerank", False),
            ClassMethod("cohere", "AsyncClient", "embed", True),
            ClassMethod("cohere", "AsyncClient", "rerank", True),
        ),
    ),
    "voyageai": SdkSupport(
        "voyageai",
        (((0, 5), (0, 6)),),
        (
            ClassMethod("voyageai.client", "Client", "embed", False),
            ClassMethod("voyageai.client", "Client", "rerank", False),
            ClassMethod("voyageai.client_async", "AsyncClient", "embed", True),
            ClassMethod("voyageai.client_async", "AsyncClient", "rerank", True),
        ),
    ),
    "botocore": SdkSupport(
        "botocore",
        (((1, 43), (2,)),),
        (),
        creation="spanledger.instrumentation._botocore_everywhere",
    ),
    "google.genai": SdkSupport(
        "google-genai",
        (((2, 30), (3,)),),
        (
            ClassMethod("google.genai.models", "Models", "embed_content", False),
            ClassMethod("google.genai.models", "AsyncModels", "embed_content", True),
        ),
    ),
    "mistralai": SdkSupport(
        "mistralai",
        (((3, 7), (4,)),),
        (
            ClassMethod(
                "mistralai.client.embeddings", "Embeddings", "create", False, _mistral_client
            ),
            ClassMethod(
                "mistralai.client.embeddings", "Embeddings", "create_async", True, _mistral_client
            ),
        ),
    ),
    "ollama": SdkSupport(
        "ollama",
        (((0, 6), (0, 7)),),
        (
            ClassMethod("ollama._client", "Client", "embed", False),
            ClassMethod("ollama._client", "Client", "embeddings", False),
            ClassMethod("ollama._client", "AsyncClient", "embed", True),
            ClassMethod("ollama._client", "AsyncClient", "embeddings", True),
        ),
        creation="spanledger.instrumentation.ollama_client",  # re-binds ``ollama.embed``
    ),
    "vertexai": SdkSupport(
        "google-cloud-aiplatform",
        (((2, 7), (3,)),),
        (
            ClassMethod(
                "vertexai.language_models._language_models",
                "_TextEmbeddingModel",
                "get_embeddings",
                False,
            ),
            ClassMethod(
                "vertexai.language_models._language_models",
                "_TextEmbeddingModel",
                "get_embeddings_async",
                True,
            ),
        ),
    ),
    # in-process models: their classes are patched once the library is imported (not before)
    "sentence_transformers": SdkSupport(
        "sentence-transformers",
        (((6, 2), (7,)),),
        (),
        creation="spanledger.instrumentation.sentence_transformers_model",
    ),
    "flashrank": SdkSupport(
        "flashrank",
        (((0, 2, 10), (0, 3)),),
        (),
        creation="spanledger.instrumentation.flashrank_ranker",
    ),
}
"""What the process-wide switch patches per SDK, and the versions the tests cover."""

_MISSING = object()
_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)
_released: deque[tuple[Callable[..., Any], tuple[weakref.ref[Any], ...]]] = deque()


def _release_later(release: Callable[..., Any], *targets: weakref.ref[Any]) -> None:
    """Queue a release; run by the collector too, so it takes no lock (``append`` is atomic)."""
    _released.append((release, targets))


def _run_released() -> None:
    """Run the queued releases, oldest first. A release whose target was collected meanwhile
    is skipped (what it would take back went with it); one that fails is logged."""
    while True:
        try:
            release, targets = _released.popleft()
        except IndexError:
            return
        args = [target() for target in targets]
        if any(arg is None for arg in args):
            continue
        try:
            release(*args)
        except Exception as exc:
            logged(exc)


class Installation:
    """The changes made to one client, and how to take each back. An integration sets
    ``is_async`` before it wraps anything."""

    def __init__(self, client: object) -> None:
        self.switch = Switch()
        self.is_async = False
        self._client = weakref.ref(client)
        self._patched: list[tuple[object, str, object, object]] = []
        self._undo: list[Callable[[], Any]] = []

    def wrap(self, owner: object, name: str, spec: MethodSpec) -> None:
        """Shadow ``owner.name`` with a recorded version, as an instance attribute. A method
        the instance takes from its class is looked up on the class at each call, so whatever
        patches the class later (another instrumentation, the process-wide switch) still runs
        under ours."""
        original = getattr(owner, name)
        if name not in vars(owner):
            original = _from_class(owner, name, original)
        if self.is_async:
            wrapped: object = wrap_async(original, spec, self.switch)
        else:
            wrapped = wrap_sync(original, spec, self.switch)
        self.replace(owner, name, wrapped)

    def replace(self, owner: object, name: str, value: object) -> None:
        """Set ``owner.name`` to ``value`` as an instance attribute, until ``undo``, which puts
        back what the instance held (or nothing, when it took ``name`` from its class)."""
        attributes = vars(owner)
        self._patched.append((owner, name, value, attributes.get(name, _MISSING)))
        attributes[name] = value

    def hook(self, http_client: object) -> None:
        """Report the attempts ``http_client`` makes, until ``undo`` or the client is dropped."""
        add_hooks(http_client, is_async=self.is_async)
        self.on_release(remove_hooks, http_client)

    def on_release(self, release: Callable[..., Any], *args: object) -> None:
        """Run ``release(*args)`` on ``uninstrument``, or once the client has been garbage
        collected (at the next ``instrument`` or ``uninstrument``). ``args`` are held weakly."""
        client = self._client()
        if client is not None:
            targets = tuple(weakref.ref(arg) for arg in args)
            self._undo.append(weakref.finalize(client, _release_later, release, *targets))

    def undo(self) -> None:
        self.switch.on = False
        for owner, name, value, held in reversed(self._patched):
            attributes = vars(owner)
            if attributes.get(name) is not value:
                continue  # replaced again since: leave it
            if held is _MISSING:
                del attributes[name]
            else:
                attributes[name] = held
        for release in reversed(self._undo):
            release()
        _run_released()


def _from_class(owner: object, name: str, current: Callable[..., Any]) -> Callable[..., Any]:
    """``owner.name`` as the class holds it at call time, bound to ``owner``."""
    kind = type(owner)

    @functools.wraps(current)
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(kind, name).__get__(owner, kind)(*args, **kwargs)

    return call


class Integration(Protocol):
    def install(self, client: Any, installation: Installation) -> None: ...


@overload
def instrument(client: C, *, sdks: None = None, http: bool = False, vendors: None = None) -> C: ...
@overload
def instrument(
    client: None = None,
    *,
    sdks: Iterable[str] | None = None,
    http: bool = False,
    vendors: Mapping[str, str] | None = None,
) -> None: ...
def instrument(
    client: Any = None,
    *,
    sdks: Iterable[str] | None = None,
    http: bool = False,
    vendors: Mapping[str, str] | None = None,
) -> Any:
    """Make ``client`` record every embedding and rerank call; returns the same client.

    Supported: ``openai.OpenAI`` / ``AsyncOpenAI`` (and ``AzureOpenAI`` / ``AsyncAzureOpenAI``),
    ``cohere.ClientV2`` / ``AsyncClientV2``, ``cohere.Client`` / ``AsyncClient`` (v1),
    ``voyageai.Client`` / ``AsyncClient``, boto3 ``bedrock-runtime`` and
    ``bedrock-agent-runtime`` clients, ``google.genai.Client``, ``mistralai`` ``Mistral``,
    ``ollama.Client`` / ``AsyncClient`` and ``vertexai`` ``TextEmbeddingModel``; and models
    that run in this process: ``sentence_transformers`` ``SentenceTransformer`` /
    ``CrossEncoder`` and ``flashrank`` ``Ranker``.
    Instrumenting a client twice changes nothing.

    With no client, the process-wide switch: every client of the named SDKs (``"openai"``,
    ``"cohere"``, ``"voyageai"``, ``"botocore"``, ``"google.genai"``, ``"mistralai"``,
    ``"ollama"``, ``"vertexai"``, ``"sentence_transformers"``, ``"flashrank"``; default: each
    of them that is installed, imported now, except the in-process libraries, which are
    patched when the program imports them)
    records, clients made before the switch and after it (Bedrock: clients made after it).
    An SDK version the tests do not cover is refused with a ``RuntimeError`` naming it and
    the range, before anything changes.
    ``uninstrument()`` with no client switches it off. Both modes together record a call once.

    ``http=True`` also records the vendors' embedding and rerank requests that other code sends
    through ``requests`` or httpx's default transports (a framework's own session, a fresh
    ``httpx.Client`` per call); ``vendors`` maps a host or URL prefix to a vendor name where
    the host says nothing (a proxy, a gateway, a self-hosted TEI).
    """
    if client is None:
        checked = checked_vendors(vendors)
        _everywhere.switch_on(_SUPPORT, sdks, instrument, is_instrumented)
        if http:
            switch_http_on(checked)
        elif vendors is not None:
            raise TypeError("vendors names hosts for http=True: pass http=True with it")
        return None
    if sdks is not None or http or vendors is not None:
        raise TypeError(
            "sdks, http and vendors are for the process-wide switch: pass no client with them"
        )
    with _lock:
        _run_released()
        if is_instrumented(client):
            return client
        integration = _integration(client)
        installation = Installation(client)
        try:
            integration.install(client, installation)
        except BaseException:
            installation.undo()
            raise
        vars(client)[_RECORD] = installation
    return client


@overload
def uninstrument(client: C) -> C: ...
@overload
def uninstrument(client: None = None) -> None: ...
def uninstrument(client: Any = None) -> Any:
    """Undo ``instrument``; a client that is not instrumented is returned unchanged. With no
    client, switch the process-wide mode off: the SDKs' methods are put back and the clients
    it instrumented are uninstrumented (clients instrumented by hand stay so)."""
    if client is None:
        _everywhere.switch_off(uninstrument)
        switch_http_off()
        return None
    with _lock:
        installation = vars(client).pop(_RECORD, None) if hasattr(client, "__dict__") else None
        if isinstance(installation, Installation):
            installation.undo()
        _run_released()
    return client


def instrumented_sdks() -> tuple[str, ...]:
    """The SDKs the process-wide switch is on for (empty when it is off); ``"http"`` last when
    other code's HTTP is recorded too."""
    return _everywhere.switched_on() + (("http",) if http_switched_on() else ())


def is_instrumented(client: object) -> bool:
    """Whether ``instrument`` is in effect on ``client``."""
    return isinstance(getattr(client, "__dict__", {}).get(_RECORD), Installation)


def _integration(client: object) -> Integration:
    for klass in type(client).__mro__:
        name = klass.__module__
        for prefix in sorted(_INTEGRATIONS, key=len, reverse=True):
            if name == prefix or name.startswith(prefix + "."):
                module: Integration = importlib.import_module(_INTEGRATIONS[prefix])
                return module
    raise TypeError(
        "spanledger.instrument supports openai.OpenAI/AsyncOpenAI (Azure's too), "
        "cohere.ClientV2/AsyncClientV2, cohere.Client/AsyncClient, voyageai.Client/AsyncClient, "
        "boto3 bedrock-runtime and bedrock-agent-runtime clients, google.genai.Client, "
        "mistralai Mistral, ollama.Client/AsyncClient, vertexai TextEmbeddingModel, "
        "sentence_transformers SentenceTransformer/CrossEncoder and flashrank Ranker, "
        f"not {type(client).__qualname__}"
    )
