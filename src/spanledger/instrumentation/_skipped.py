"""Libraries spanledger leaves alone, and the one warning each gets per process.

spanledger joins applications that already run, whatever releases they have installed. A
release outside the ranges its tests cover, or one whose classes no longer have what an
integration patches, is never a reason to fail the application: the library is left unpatched
and a warning names the package, the installed release and the tested ranges, once per process
(``instrument()`` may be called again and again). The messages name libraries and classes only,
never anything a call carried.
"""

from __future__ import annotations

import contextlib

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.capture.declaration import Integration
from spanledger.capture.local import when_patching_fails
from spanledger.integrations import INTEGRATIONS

__all__ = ["not_installed", "not_patched", "refused_client", "untested"]

_log = get_logger("spanledger.instrumentation")
_warned: set[tuple[str, ...]] = set()
_warned_lock = _forksafe.module_lock(globals(), "_warned_lock")
_HTTP = "instrument(http=True) still records its HTTP calls to the vendors spanledger knows"


def untested(integration: Integration, version: str) -> str:
    """Warn once that ``version`` of the library lies outside the tested ranges; the sentence."""
    reason = (
        f"{integration.distribution} {version} is outside the versions spanledger's tests "
        f"cover ({integration.tested_versions()}): the process-wide switch leaves it unpatched "
        f"({_HTTP}), and instrument(client) records one of its clients only when the client "
        "has the shape spanledger knows"
    )
    _warn_once(
        ("untested", integration.distribution, version),
        "untested_version",
        package=integration.distribution,
        version=version,
        tested=integration.tested_versions(),
        reason=reason,
    )
    return reason


def not_patched(integration: Integration, version: str | None, what: str) -> str:
    """Warn once that the library could not be patched (``what`` says why, naming classes and
    exception types only); the sentence."""
    release = f"{integration.distribution} {version or '(version unknown)'}"
    reason = (
        f"spanledger could not patch {release} ({what}); it is left unpatched and the rest is "
        f"switched on ({_HTTP}); spanledger's tests cover {integration.distribution} "
        f"{integration.tested_versions()}"
    )
    _warn_once(
        ("not_patched", integration.distribution, version or ""),
        "library_not_patched",
        package=integration.distribution,
        version=version,
        tested=integration.tested_versions(),
        reason=reason,
    )
    return reason


def not_installed(integration: Integration) -> str:
    """Warn once that a library named to the switch is not installed; the sentence."""
    reason = (
        f"instrument(sdks=[...]) names {integration.name!r}, but {integration.distribution} is "
        "not installed: there is nothing of it to switch on"
    )
    _warn_once(
        ("not_installed", integration.distribution),
        "library_not_installed",
        package=integration.distribution,
        reason=reason,
    )
    return reason


def refused_client(integration: Integration, version: str, kind: str) -> str:
    """Why ``instrument(client)`` refuses a client of an untested release whose shape is not
    the one spanledger knows."""
    return (
        f"spanledger.instrument cannot record this {kind}: {integration.distribution} {version} "
        f"is installed, outside the versions spanledger's tests cover "
        f"({integration.tested_versions()}), and its client is not shaped as spanledger knows "
        "it; the client is left untouched"
    )


def _warn_once(key: tuple[str, ...], event: str, **fields: object) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    with contextlib.suppress(Exception):
        _log.warning(event, **fields)


def _forget_warnings() -> None:
    """Start the warn-once bookkeeping afresh (for tests)."""
    with _warned_lock:
        _warned.clear()


def _import_failed(module: str, exc: BaseException) -> None:
    """An in-process library's ``module``, imported after the switch, could not be patched."""
    for integration in INTEGRATIONS:
        if integration.covers(module):
            not_patched(integration, integration.installed_version(), type(exc).__name__)


when_patching_fails(_import_failed)
