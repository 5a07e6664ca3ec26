"""``instrument`` / ``uninstrument``: one client, or the process-wide switch, and undoing either.

``instrument(client)`` hands the client to the integration whose library defined its class
(``spanledger.integrations``), which records it through an ``Installation`` kept on the client
itself: a client that is dropped takes its record with it. With no client, the switch turns on
the integrations' class patches and creation hooks (``_everywhere``) and, with ``http=True``,
the capture of other code's HTTP (``_http_everywhere``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, overload

from spanledger import _forksafe
from spanledger.capture.declaration import Integration
from spanledger.capture.installation import Installation, run_released
from spanledger.capture.vendors import checked_vendors
from spanledger.instrumentation import _everywhere, _skipped
from spanledger.instrumentation._http_everywhere import (
    http_switched_on,
    switch_http_off,
    switch_http_on,
)
from spanledger.integrations import INTEGRATIONS

__all__ = ["instrument", "instrumented_sdks", "is_instrumented", "uninstrument"]

C = TypeVar("C")

_RECORD = "_spanledger_instrumentation"
_BY_NAME = {integration.name: integration for integration in INTEGRATIONS}
_BY_PREFIX = sorted(INTEGRATIONS, key=lambda integration: len(integration.name), reverse=True)
_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)


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
    Instrumenting a client twice changes nothing. A client of a release outside the tested
    versions is recorded, with one warning, when it has the shape spanledger knows, and
    refused with a ``TypeError`` naming the release and the tested versions (the client left
    untouched) when it has not.

    With no client, the process-wide switch: every client of the named SDKs (``"openai"``,
    ``"cohere"``, ``"voyageai"``, ``"botocore"``, ``"google.genai"``, ``"mistralai"``,
    ``"ollama"``, ``"vertexai"``, ``"sentence_transformers"``, ``"flashrank"``; default: each
    of them that is installed, imported now, except the in-process libraries, which are
    patched when the program imports them)
    records, clients made before the switch and after it (a Bedrock client made before it from
    its first call on).
    A library the switch cannot take (a release outside the versions the tests cover, a
    class that lacks what it patches, an import that fails) is left unpatched with one
    warning per process, and the rest is switched on: nothing is raised over a library's
    version. ``sdk_status()`` says where each library stands.
    ``uninstrument()`` with no client switches it off. Both modes together record a call once.

    ``http=True`` also records the vendors' embedding and rerank requests that other code sends
    through ``requests`` or httpx's default transports (a framework's own session, a fresh
    ``httpx.Client`` per call); ``vendors`` maps a host or URL prefix to a vendor name where
    the host says nothing (a proxy, a gateway, a self-hosted TEI).
    """
    if client is None:
        checked = checked_vendors(vendors)
        _everywhere.switch_on(_BY_NAME, sdks, instrument, is_instrumented)
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
        run_released()
        if is_instrumented(client):
            return client
        integration = _integration(client)
        version = integration.installed_version()
        if version is not None and not integration.tests(version):
            _install_untested(client, integration, version)
            return client
        installation = Installation(client, instrument, uninstrument)
        try:
            integration.installer().install(client, installation)
        except BaseException:
            installation.undo()
            raise
        vars(client)[_RECORD] = installation
    return client


def _install_untested(client: Any, integration: Integration, version: str) -> None:
    """Record a client of a release the tests do not cover when it has the shape spanledger
    knows (every declared method found, and the integration installs on it), with one
    warning; otherwise refuse it with a ``TypeError``, the client untouched."""
    refusal = _skipped.refused_client(integration, version, type(client).__qualname__)
    if integration.missing_methods():
        raise TypeError(refusal)
    installation = Installation(client, instrument, uninstrument)
    try:
        integration.installer().install(client, installation)
    except Exception as exc:
        installation.undo()
        raise TypeError(refusal) from exc
    except BaseException:
        installation.undo()
        raise
    vars(client)[_RECORD] = installation
    _skipped.untested(integration, version)


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
        run_released()
    return client


def instrumented_sdks() -> tuple[str, ...]:
    """The SDKs the process-wide switch is on for (empty when it is off); ``"http"`` last when
    other code's HTTP is recorded too."""
    return _everywhere.switched_on() + (("http",) if http_switched_on() else ())


def is_instrumented(client: object) -> bool:
    """Whether ``instrument`` is in effect on ``client``."""
    return isinstance(getattr(client, "__dict__", {}).get(_RECORD), Installation)


def _integration(client: object) -> Integration:
    """The integration of the library whose class ``client`` is (or derives from)."""
    for klass in type(client).__mro__:
        for integration in _BY_PREFIX:
            if integration.installs is not None and integration.covers(klass.__module__):
                return integration
    accepted = [integration.accepts for integration in INTEGRATIONS if integration.installs]
    raise TypeError(
        f"spanledger.instrument supports {', '.join(accepted[:-1])} and {accepted[-1]}, "
        f"not {type(client).__qualname__}"
    )
