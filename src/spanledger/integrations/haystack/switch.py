"""The process-wide switch for Haystack: once the program imports ``haystack``, spanledger's
tracer is enabled in front of the tracer already enabled, and stays in front until undone.

Haystack holds one tracer, and a later ``enable_tracing`` replaces it: a connector that enables
its own tracer when it is built (Langfuse's does) would silently end the capture. So while the
switch is on, Haystack's tracer holder puts whatever the application enables or disables from
then on behind ours (``actual_tracer`` is ours; the application's is ``actual_tracer.wrapped``);
a tracer that itself wraps ours is left in front. Undoing gives the holder back the
application's current tracer, and ours only forwards from then on wherever it still sits. Nothing
here imports Haystack: the switch waits for the program's own import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from spanledger.capture.imports import when_imported
from spanledger.recording.call import logged

__all__ = ["TracerSwitch", "hook"]


class TracerSwitch:
    """spanledger's tracer in Haystack from the library's import on; ``undo`` takes it out."""

    def __init__(self) -> None:
        self.failure: str | None = None
        """Why the tracer could not be put in place when Haystack was imported (the
        exception's type); ``None``: in place, or Haystack not imported yet."""
        self._lock = threading.Lock()
        self._off = False
        self._tracer: Any = None
        self._holder: Any = None
        self._holder_class: type | None = None
        self._guarded: type | None = None
        self._waiting = when_imported("haystack", self._install)

    def _install(self, module: ModuleType) -> None:
        with self._lock:
            if self._off or self._tracer is not None:
                return
            try:
                from haystack.tracing.tracer import enable_tracing
                from haystack.tracing.tracer import tracer as holder

                from spanledger.integrations.haystack.tracer import LedgerTracer

                ours = LedgerTracer(holder.actual_tracer)
                guarded = _guarded(type(holder), ours)
                enable_tracing(ours)
                try:
                    holder.__class__ = guarded
                except Exception:
                    enable_tracing(ours.wrapped)
                    raise
                self._tracer, self._holder = ours, holder
                self._holder_class, self._guarded = guarded.__base__, guarded
            except Exception as exc:
                self.failure = type(exc).__name__
                logged(exc)

    def undo(self) -> None:
        with self._lock:
            self._off = True
            if self._waiting is not None:
                self._waiting.undo()
            ours, holder = self._tracer, self._holder
            if ours is None:
                return
            ours.on = False
            if type(holder) is self._guarded and self._holder_class is not None:
                holder.__class__ = self._holder_class
            if vars(holder).get("actual_tracer") is ours:
                holder.actual_tracer = ours.wrapped
            self._tracer = self._holder = None


def _guarded(holder_class: type, ours: Any) -> type:
    """Haystack's tracer holder class, with ``actual_tracer`` keeping ``ours`` in front of
    whatever is enabled after it."""

    def get(holder: Any) -> Any:
        return vars(holder)["actual_tracer"]

    def put(holder: Any, tracer: Any) -> None:
        if vars(holder).get("actual_tracer") is ours and ours.on and not _wraps(tracer, ours):
            ours.wrapped = tracer
            return
        vars(holder)["actual_tracer"] = tracer

    attributes: dict[str, Any] = {
        "actual_tracer": property(get, put),
        "__module__": holder_class.__module__,
        "__doc__": holder_class.__doc__,
    }
    return type(holder_class.__name__, (holder_class,), attributes)


def _wraps(tracer: Any, ours: Any) -> bool:
    """Whether ``tracer`` is ours, or holds ours (a tracer that wraps the one enabled before
    it)."""
    if tracer is ours:
        return True
    try:
        return any(value is ours for value in vars(tracer).values())
    except TypeError:  # no __dict__
        return False


def hook(adopt: Callable[[Any], None]) -> TracerSwitch:
    """Put spanledger's tracer in Haystack once it is imported (now, if it is); Haystack makes
    no object to hand to ``adopt``."""
    return TracerSwitch()
