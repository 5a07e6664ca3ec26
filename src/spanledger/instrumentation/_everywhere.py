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

An SDK version outside the range the tests cover is refused before anything is patched. A
client the switch cannot instrument (a version drift, a subclass it does not know) is passed
through untouched and the reason logged by type: the switch never raises into a caller.
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
from spanledger.recording.call import logged

__all__ = ["installed", "switch_off", "switch_on", "switched_on"]


class _State:
    def __init__(self) -> None:
        self.on: dict[str, list[Undoable]] = {}
        self.adopted: weakref.WeakSet[Any] = weakref.WeakSet()
        self.taken: weakref.WeakSet[Any] = weakref.WeakSet()
        self.names: dict[type, set[str]] = {}


_TAKEN = "_spanledger_switch_recordings"
"""Where an adopted client's instance keeps how its class-patched methods record."""


_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)
_state = _State()


def switched_on() -> tuple[str, ...]:
    """The SDKs the process-wide switch is on for."""
    return tuple(_state.on)


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
    """Patch every named SDK (default: every supported SDK that is installed), or none: the
    versions are all checked before anything changes. Already on: no change."""
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
        todo = [name for name in wanted if name not in _state.on]
        refusals = [reason for name in todo if (reason := supports[name].refusal())]
        if refusals:
            raise RuntimeError("; ".join(refusals))
        for name in todo:
            integration = supports[name]
            changes: list[Undoable] = [
                _patch(method, instrument, is_instrumented) for method in integration.methods
            ]
            creation = integration.creation_hook()
            if creation is not None:
                changes.append(creation.hook(partial(_adopt, name, instrument)))
            _state.on[name] = changes


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
    for client in adopted:
        try:
            uninstrument(client)
        except Exception as exc:
            logged(exc)


def _adopt(name: str, instrument: Callable[[Any], Any], client: Any) -> None:
    """Instrument a client a creation hook saw being made, while ``name`` is switched on;
    ``switch_off`` uninstruments it."""
    with _lock:
        if name in _state.on:
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
