"""Locks that a forked child gets fresh, and callbacks that reset per-process state there.

``os.fork()`` copies a lock in whatever state it was in. A lock held by another thread at that
moment stays held forever in the child, where that thread does not exist, so the child's first
use of it hangs. Objects that guard their state with a lock (and processes that hold buffers or
queues) register here; in the child every registered lock is replaced by a new one before any
of its code runs, and every registered reset runs. Nothing on the call path changes: the lock
attributes are plain ``threading`` locks.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["after_fork_in_child", "lock", "module_lock", "renew_in_child", "rlock"]

_LockFactory = Callable[[], Any]
_renewed: dict[int, tuple[weakref.ref[object], dict[str, _LockFactory]]] = {}
"""Owners by ``id`` (an owner need not be hashable), each held weakly."""
_resets: list[weakref.WeakMethod[Callable[[], None]] | Callable[[], None]] = []
_module_locks: list[tuple[dict[str, Any], str, _LockFactory]] = []
_registry_lock = threading.Lock()


def renew_in_child(owner: object, attribute: str, factory: _LockFactory = threading.Lock) -> None:
    """In a forked child, set ``owner.<attribute>`` to ``factory()`` (a fresh lock)."""
    key = id(owner)
    with _registry_lock:
        entry = _renewed.get(key)
        if entry is None or entry[0]() is not owner:
            entry = _renewed[key] = (weakref.ref(owner, _forget(key)), {})
        entry[1][attribute] = factory


def _forget(key: int) -> Callable[[weakref.ref[object]], None]:
    def forget(ref: weakref.ref[object]) -> None:
        entry = _renewed.get(key)
        if entry is not None and entry[0] is ref:
            del _renewed[key]

    return forget


def lock(owner: object, attribute: str) -> threading.Lock:
    """A new lock for ``owner.<attribute>``, renewed in forked children."""
    renew_in_child(owner, attribute, threading.Lock)
    return threading.Lock()


def rlock(owner: object, attribute: str) -> threading.RLock:
    """A new re-entrant lock for ``owner.<attribute>``, renewed in forked children."""
    renew_in_child(owner, attribute, threading.RLock)
    return threading.RLock()


def module_lock(
    namespace: dict[str, Any], name: str, factory: _LockFactory = threading.Lock
) -> Any:
    """A module-level lock (``namespace`` is the module's ``globals()``), renewed in children."""
    with _registry_lock:
        _module_locks.append((namespace, name, factory))
    return factory()


def after_fork_in_child(reset: Callable[[], None]) -> None:
    """Run ``reset`` in every forked child, after the locks are renewed. A bound method is held
    weakly (its object may go away); a plain function is held for the life of the process."""
    held: weakref.WeakMethod[Callable[[], None]] | Callable[[], None]
    held = weakref.WeakMethod(reset) if hasattr(reset, "__self__") else reset
    with _registry_lock:
        _resets.append(held)


def _in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for namespace, name, factory in _module_locks:
        namespace[name] = factory()
    for ref, attributes in list(_renewed.values()):
        owner = ref()
        if owner is None:
            continue
        for attribute, factory in attributes.items():
            with contextlib.suppress(Exception):  # nothing better can be done in a child
                object.__setattr__(owner, attribute, factory())
    alive: list[weakref.WeakMethod[Callable[[], None]] | Callable[[], None]] = []
    for held in _resets:
        reset = held() if isinstance(held, weakref.WeakMethod) else held
        if reset is None:
            continue
        alive.append(held)
        with contextlib.suppress(Exception):
            reset()
    _resets[:] = alive


os.register_at_fork(after_in_child=_in_child)
