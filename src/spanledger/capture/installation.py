"""What ``instrument(client)`` changed on one client, and how to take each change back.

What was changed is kept on the client itself, so a client that is dropped takes its record
with it. An integration wraps the client's methods as instance attributes, adds hooks to the
SDK's own httpx client, and asks for releases to run on undo; the SDK's classes are never
touched (an integration that must patch one says so and takes it back itself).

A dropped client is released by the garbage collector, which can run in the middle of any code,
including code that holds the very locks a release takes. So the collector only queues the
release, and the queue is worked off at the next instrument or uninstrument
(``run_released``). The queue holds what it releases weakly: an httpx client that was dropped
too is not kept alive by it.
"""

from __future__ import annotations

import functools
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from spanledger.capture.http_hooks import add_hooks, remove_hooks
from spanledger.capture.patching import looked_up
from spanledger.capture.sdk_calls import MethodSpec, Switch, wrap_async, wrap_sync
from spanledger.recording.call import logged

__all__ = ["Installation", "run_released"]

_MISSING = object()
_released: deque[tuple[Callable[..., Any], tuple[weakref.ref[Any], ...]]] = deque()


def _release_later(release: Callable[..., Any], *targets: weakref.ref[Any]) -> None:
    """Queue a release; run by the collector too, so it takes no lock (``append`` is atomic)."""
    _released.append((release, targets))


def run_released() -> None:
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
    ``is_async`` before it wraps anything. ``include`` instruments a part of the client that
    records on its own (as ``instrument(part)`` would), taken back with the client."""

    def __init__(
        self,
        client: object,
        include: Callable[[Any], object],
        exclude: Callable[[Any], object],
    ) -> None:
        self.switch = Switch()
        self.is_async = False
        self._client = weakref.ref(client)
        self._include = include
        self._exclude = exclude
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

    def include(self, part: object) -> None:
        """Instrument ``part`` (an object of the client's that records on its own) until the
        client is uninstrumented or dropped."""
        self._include(part)
        self.on_release(self._exclude, part)

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
        run_released()


def _from_class(owner: object, name: str, current: Callable[..., Any]) -> Callable[..., Any]:
    """``owner.name`` as its class holds it at call time, bound as attribute access binds it
    (a staticmethod, a wrapt wrapper and a plain function each as Python would call it)."""
    kind = type(owner)

    @functools.wraps(current)
    def call(*args: Any, **kwargs: Any) -> Any:
        return looked_up(kind, name, owner)(*args, **kwargs)

    return call
