"""Run a callback when a module is imported, without importing it now.

The process-wide switch must cover libraries that are slow to import (``sentence_transformers``
brings in torch): importing one only to patch it would cost a process that never uses it
seconds at start-up. So a module already imported is handed over at once; otherwise a finder
placed first on ``sys.meta_path`` waits for its import and hands it over once its code ran.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from spanledger.recording.call import logged

__all__ = ["Waiting", "when_imported"]


class Waiting:
    """A callback waiting for one module's import; ``undo`` stops the wait."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback
        self._finding = threading.local()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The spec the other finders give ``name``, with a loader that calls back after the
        module's code ran; ``None`` for every other module (the import goes on as usual)."""
        if fullname != self.name or getattr(self._finding, "on", False):
            return None
        self._finding.on = True
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec: ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.on = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Calling(spec.loader, self)
        return spec

    def fire(self, module: ModuleType) -> None:
        """The module is ready: stop waiting and hand it over (a failure is logged)."""
        self.undo()
        try:
            self.callback(module)
        except Exception as exc:
            logged(exc)

    def undo(self) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)


class _Calling(Loader):
    """A loader that runs the module as its own loader would, then fires the wait."""

    def __init__(self, loader: Any, waiting: Waiting) -> None:
        self._loader = loader
        self._waiting = waiting

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._waiting.fire(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> Waiting | None:
    """Call ``callback(module)`` now if ``name`` is imported (``None`` is returned), else once
    it is (the returned wait's ``undo`` cancels that)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return None
    waiting = Waiting(name, callback)
    sys.meta_path.insert(0, waiting)
    return waiting
