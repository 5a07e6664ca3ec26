"""The process-wide switch for LlamaIndex: spanledger's handlers on its root dispatcher.

LlamaIndex announces every retrieval, rerank and model call on one root instrumentation
dispatcher, so there is nothing to patch and no client to instrument: the switch adds one event
handler and one span handler there once ``llama_index.core`` is imported (at once when it
already is; never importing it, which takes a second), and ``undo`` turns them off and takes
them away. Switching on again adds the same two handlers again, never a second pair.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from spanledger.capture.imports import Waiting, when_imported
from spanledger.recording.call import logged

__all__ = ["DispatcherHook", "hook"]

_MODULE = "llama_index.core"
_HANDLERS = f"{__package__}.handlers"


class DispatcherHook:
    """spanledger's handlers on LlamaIndex's root dispatcher, from its import until ``undo``.
    ``failure`` names what was raised when they could not be added."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self._on = True
        self._added = False
        self._waiting: Waiting | None = when_imported(_MODULE, self._imported)

    def _imported(self, module: ModuleType) -> None:
        if not self._on:
            return
        try:
            importlib.import_module(_HANDLERS).register()
            self._added = True
        except Exception as exc:
            self.failure = type(exc).__name__
            logged(exc)

    def undo(self) -> None:
        self._on = False
        if self._waiting is not None:
            self._waiting.undo()
        if self._added:
            self._added = False
            importlib.import_module(_HANDLERS).unregister()


def hook(adopt: Callable[[Any], None]) -> DispatcherHook:
    """Put spanledger's handlers on LlamaIndex's root dispatcher once it is imported (the
    handlers adopt no object: ``adopt`` is not called)."""
    return DispatcherHook()
