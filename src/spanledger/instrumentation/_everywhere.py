"""The process-wide switch: every client of the supported SDKs records, old and new.

Each SDK's client classes get their embedding and rerank methods replaced by a wrapper that,
on a client's first call, instruments that client as ``instrument(client)`` would (its hooks,
its instance-level wrappers), then takes the instance-level wrappers back off and keeps how
they record: every call of that client then goes through the class and is recorded there,
around the SDK's method, inside whatever patched the class later. The wrapper calls what the
class held, or the inherited method as the base classes hold it at that moment, bound as Python
binds it (``spanledger.capture.patching``): another library's wrapper, on the class or a base
class, before or after, still runs. A client instrumented by hand keeps its own wrappers, which
record outermost; the class wrapper under them only passes the call through. Undoing puts the
SDK's methods back (a wrapper another library has wrapped since stays, passing calls through)
and uninstruments the clients the switch instrumented.

A library is patched whole or not at all. One outside the versions the tests cover, one whose
classes lack a declared method, or one whose import or patching raises is left unpatched with
one warning (``_skipped``) while the rest is switched on: the switch never fails the
application over a library's version. A client the switch cannot instrument (a version drift, a
subclass it does not know) is passed through untouched and the reason logged by type: the
switch never raises into a caller.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from functools import partial, wraps
from typing import Any

from spanledger import _forksafe
from spanledger.capture.declaration import ClassMethod, Integration, Undoable
from spanledger.capture.patching import ClassPatch, patch_class
from spanledger.capture.sdk_calls import (
    RECORDING,
    MethodSpec,
    Switch,
    record_async,
    record_sync,
)
from spanledger.instrumentation import _skipped
from spanledger.recording.call import logged

__all__ = ["failures", "installed", "switch_off", "switch_on", "switched_on"]


class _State:
    def __init__(self) -> None:
        self.on: dict[str, list[Undoable]] = {}
        self.adopted: weakref.WeakSet[Any] = weakref.WeakSet()
        self.taken: weakref.WeakSet[Any] = weakref.WeakSet()
        self.names: dict[type, set[str]] = {}
        self.failed: dict[str, str] = {}
        """Libraries the switch tried and could not patch, with the sentence why."""


_TAKEN = "_spanledger_switch_recordings"
"""Where an adopted client's instance keeps how its class-patched methods record."""


_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)
_state = _State()


def switched_on() -> tuple[str, ...]:
    """The SDKs the process-wide switch is on for."""
    return tuple(_state.on)


def failures() -> dict[str, str]:
    """Why each library the switch could not patch was left alone, by name: at switch-on, or
    (an in-process library) when the program imported it."""
    with _lock:
        found = dict(_state.failed)
        for name, changes in _state.on.items():
            for change in changes:
                failure = getattr(change, "failure", None)
                if isinstance(failure, str):
                    found[name] = f"its classes could not be patched on import ({failure})"
        return found


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here; a dotted name whose parent package is missing
    (``google.genai`` with no ``google``) is simply not installed."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def switch_on(
    supports: Mapping[str, Integration],
    sdks: Iterable[str] | None,
    instrument: Callable[[Any], Any],
    is_instrumented: Callable[[Any], bool],
) -> None:
    """Patch every named SDK (default: every supported SDK that is installed); each library is
    patched whole or left alone with a warning (``_switch_on_one``). Already on: no change."""
    if isinstance(sdks, str):
        raise TypeError(f"sdks takes a list of SDK names, not the string {sdks!r}")
    if sdks is None:
        wanted = [name for name in supports if installed(name)]
    else:
        wanted = list(dict.fromkeys(sdks))
        unknown = [name for name in wanted if name not in supports]
        if unknown:
            raise ValueError(
                f"spanledger.instrument() knows no SDK named {', '.join(map(repr, unknown))}; "
                f"it knows {', '.join(sorted(supports))}"
            )
    with _lock:
        for name in wanted:
            if name not in _state.on:
                _switch_on_one(supports[name], instrument, is_instrumented, named=sdks is not None)


def _switch_on_one(
    integration: Integration,
    instrument: Callable[[Any], Any],
    is_instrumented: Callable[[Any], bool],
    *,
    named: bool,
) -> None:
    """Patch one library whole, or leave it alone with a warning: not installed (when it was
    ``named``), a release outside the tested ranges, a declared method its classes lack, or
    anything raised while importing or patching it (what was patched by then is undone)."""
    name = integration.name
    _state.failed.pop(name, None)
    version = integration.installed_version()
    if version is None:
        if named:
            _skipped.not_installed(integration)
        return
    if not integration.tests(version):
        _skipped.untested(integration, version)
        return
    missing = integration.missing_methods()
    if missing:
        _state.failed[name] = _skipped.not_patched(
            integration, version, f"{', '.join(missing)} not found"
        )
        return
    changes: list[Undoable] = []
    try:
        for method in integration.methods:
            changes.append(_patch(method, instrument, is_instrumented))
        creation = integration.creation_hook()
        if creation is not None:
            changes.append(creation.hook(partial(_adopt, name, instrument, is_instrumented)))
            failure = getattr(changes[-1], "failure", None)  # an in-process library, imported
            if isinstance(failure, str):
                raise _NotPatched(failure)
    except Exception as exc:
        for change in reversed(changes):
            try:
                change.undo()
            except Exception as undoing:
                logged(undoing)
        what = str(exc) if isinstance(exc, _NotPatched) else type(exc).__name__
        _state.failed[name] = _skipped.not_patched(integration, version, what)
        return
    _state.on[name] = changes


class _NotPatched(Exception):
    """A creation hook ran, but the library's classes could not be patched (the type of what
    was raised)."""


def switch_off(uninstrument: Callable[[Any], Any]) -> None:
    """Put every SDK's methods back and uninstrument the clients the switch instrumented."""
    with _lock:
        patches = [patch for name in list(_state.on) for patch in _state.on.pop(name)]
        for patch in reversed(patches):
            patch.undo()
        adopted = list(_state.adopted)
        _state.adopted = weakref.WeakSet()
        for instance in list(_state.taken):
            vars(instance).pop(_TAKEN, None)
        _state.taken = weakref.WeakSet()
        _state.names.clear()
        _state.failed.clear()
    for client in adopted:
        try:
            uninstrument(client)
        except Exception as exc:
            logged(exc)


def _adopt(
    name: str,
    instrument: Callable[[Any], Any],
    is_instrumented: Callable[[Any], bool],
    client: Any,
) -> None:
    """Instrument a client a creation hook saw being made (or making its first call), while
    ``name`` is switched on; ``switch_off`` uninstruments it. One instrumented by hand stays
    the user's."""
    with _lock:
        if name in _state.on and not is_instrumented(client):
            instrument(client)
            _state.adopted.add(client)


def _patch(
    method: ClassMethod,
    instrument: Callable[[Any], Any],
    is_instrumented: Callable[[Any], bool],
) -> ClassPatch:
    owner = getattr(importlib.import_module(method.module), method.owner)
    name = method.name
    patch = patch_class(owner, name, partial(_wrapper, method, instrument, is_instrumented))
    _state.names.setdefault(owner, set()).add(name)
    return patch


def _wrapper(
    method: ClassMethod,
    instrument: Callable[[Any], Any],
    is_instrumented: Callable[[Any], bool],
    patch: ClassPatch,
) -> Callable[..., Any]:
    """The class wrapper of ``method``: it calls what ``patch`` stands on, looked up and bound
    at each call, so a wrapper another library put on the class or a base class since runs."""
    name = method.name

    def recording(instance: Any) -> tuple[MethodSpec, Switch] | None:
        """How the instance's client records this method, instrumenting the client on its
        first call; ``None``: call the SDK's method unrecorded (switched off, or a client
        that cannot be instrumented)."""
        if not patch.on:
            return None
        try:
            taken = vars(instance).get(_TAKEN)
            client = method.client_of(instance)
            if taken is None or not is_instrumented(client):  # new, or uninstrumented since
                with _lock:
                    if not patch.on:
                        return None  # switched off meanwhile
                    if not is_instrumented(client):
                        instrument(client)
                        _state.adopted.add(client)
                        taken = _take_over(instance)
                    else:  # another thread's first call adopted it while this one waited
                        taken = vars(instance).get(_TAKEN)
            if taken is None:  # instrumented by hand: its own wrapper records, outermost
                found = getattr(vars(instance).get(name), RECORDING, None)
            else:
                found = taken.get(name)
            return found if isinstance(found, tuple) else None
        except Exception as exc:
            logged(exc)
            return None

    # The call is recorded here, around what the class stood on, inside whatever patched the
    # class after the switch (an adopted client keeps no wrapper of its own, so every call
    # takes the same path). Inside a call already recorded (by a client instrumented by hand)
    # this only passes through.
    current = getattr(patch.owner, name)
    if method.is_async:

        @wraps(current)
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            how = recording(self)
            beneath = patch.beneath(self)
            if how is None:
                return await beneath(*args, **kwargs)
            return await record_async(beneath, *how, args, kwargs)

        return wrapper

    @wraps(current)
    def sync_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        how = recording(self)
        beneath = patch.beneath(self)
        if how is None:
            return beneath(*args, **kwargs)
        return record_sync(beneath, *how, args, kwargs)

    return sync_wrapper


def _take_over(instance: Any) -> dict[str, tuple[MethodSpec, Switch]]:
    """Move the wrappers ``instrument`` just put on ``instance`` for the methods the switch
    patches into one record on it: its calls then go through the class, every one alike."""
    taken: dict[str, tuple[MethodSpec, Switch]] = {}
    attributes = vars(instance)
    for owner, names in _state.names.items():
        if not isinstance(instance, owner):
            continue
        for name in names:
            found = getattr(attributes.get(name), RECORDING, None)
            if isinstance(found, tuple):
                taken[name] = found
                del attributes[name]
    attributes[_TAKEN] = taken
    _state.taken.add(instance)
    return taken
