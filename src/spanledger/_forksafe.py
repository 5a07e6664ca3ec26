"""Locks that a forked child gets fresh, and resets of per-process state that run there.

``os.fork()`` copies a lock in whatever state it was in. A lock held by another thread at that
moment stays held forever in the child, where that thread does not exist, so the child's first
use of it hangs; a buffer or queue copied into the child holds the parent's work, which the
child must not repeat. Objects register their locks and resets here; in every forked child the
locks are replaced by new ones before any of the child's code runs, then the resets run.
Nothing on the call path changes: lock attributes stay plain ``threading`` locks.

Registrations are held weakly and dropped with their object, so making many short-lived
objects does not grow this registry.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["after_fork_in_child", "lock", "module_lock"]

_LockFactory = Callable[[], Any]


class _Entry:
    __slots__ = ("locks", "ref", "resets")

    def __init__(self, ref: weakref.ref[object]) -> None:
        self.ref = ref
        self.locks: dict[str, _LockFactory] = {}
        self.resets: list[str] = []


_owners: dict[int, _Entry] = {}
"""Registered objects by ``id`` (an owner need not be hashable), each held weakly."""
_functions: list[Callable[[], None]] = []
_module_locks: list[tuple[dict[str, Any], str, _LockFactory]] = []
_registry_lock = threading.Lock()


def _entry(owner: object) -> _Entry:
    key = id(owner)
    entry = _owners.get(key)
    if entry is None or entry.ref() is not owner:
        entry = _owners[key] = _Entry(weakref.ref(owner, _forget(key)))
    return entry


def _forget(key: int) -> Callable[[weakref.ref[object]], None]:
    def forget(ref: weakref.ref[object]) -> None:
        entry = _owners.get(key)
        if entry is not None and entry.ref is ref:
            del _owners[key]

    return forget


def _renew_in_child(owner: object, attribute: str, factory: _LockFactory = threading.Lock) -> None:
    """In a forked child, set ``owner.<attribute>`` to ``factory()`` (a fresh lock)."""
    with _registry_lock:
        _entry(owner).locks[attribute] = factory


def lock(owner: object, attribute: str) -> threading.Lock:
    """A new lock for ``owner.<attribute>``, renewed in forked children."""
    _renew_in_child(owner, attribute, threading.Lock)
    return threading.Lock()


def module_lock(
    namespace: dict[str, Any], name: str, factory: _LockFactory = threading.Lock
) -> Any:
    """A module-level lock (``namespace`` is the module's ``globals()``), renewed in children."""
    with _registry_lock:
        _module_locks.append((namespace, name, factory))
    return factory()


def after_fork_in_child(reset: Callable[[], None]) -> None:
    """Run ``reset`` in every forked child, after the locks are renewed. A bound method is
    held weakly, through its object (it runs while the object lives); a plain function runs
    for the life of the process."""
    owner = getattr(reset, "__self__", None)
    with _registry_lock:
        if owner is None:
            _functions.append(reset)
        else:
            _entry(owner).resets.append(reset.__name__)


def _in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for namespace, name, factory in _module_locks:
        namespace[name] = factory()
    owners = [(entry.ref(), entry) for entry in list(_owners.values())]
    for owner, entry in owners:
        if owner is None:
            continue
        for attribute, factory in entry.locks.items():
            with contextlib.suppress(Exception):  # nothing better can be done in a child
                object.__setattr__(owner, attribute, factory())
    for function in _functions:
        with contextlib.suppress(Exception):
            function()
    for owner, entry in owners:
        if owner is None:
            continue
        for name in entry.resets:
            with contextlib.suppress(Exception):
                getattr(owner, name)()


os.register_at_fork(after_in_child=_in_child)
