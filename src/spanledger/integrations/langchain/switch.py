"""The process-wide switch for LangChain: spanledger's handler joins every run through
langchain-core's own configure hook, with no callback passed by the application.

langchain-core keeps its configure hooks for the life of the process (there is no way to take
one back), so the handler is registered once, when the program imports the module that holds
the hooks (``langchain_core.tracers.context``, which langchain-core itself imports only when a
first run is configured), and switched on and off from then on. Switched off, it asks LangChain
to skip every event. Nothing here imports LangChain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from types import ModuleType
from typing import TYPE_CHECKING, Any

from spanledger.capture.imports import Waiting, when_imported

if TYPE_CHECKING:
    from spanledger.integrations.langchain.handler import LedgerCallbackHandler

__all__ = ["HOOKS", "HandlerSwitch", "handler", "hook"]

HOOKS = "langchain_core.tracers.context"
"""The module that holds langchain-core's configure hooks."""

_lock = threading.Lock()
_handler: LedgerCallbackHandler | None = None
_on = False


class HandlerSwitch:
    """The handler switched on (now, or once LangChain's hooks are imported); ``undo`` turns it
    off."""

    def __init__(self) -> None:
        self.failure: str | None = None
        """Why the handler could not be registered (the exception's type); ``None``: it is, or
        LangChain was not imported yet."""
        self._waiting: Waiting | None = None

    def undo(self) -> None:
        global _on
        with _lock:
            _on = False
            if self._waiting is not None:
                self._waiting.undo()
            if _handler is not None:
                _handler.on = False
                _handler.runs.drop()


def hook(adopt: Callable[[Any], None]) -> HandlerSwitch:
    """Switch the handler on (LangChain's runs carry no client to adopt)."""
    global _on
    switched = HandlerSwitch()
    with _lock:
        _on = True

    def register(module: ModuleType) -> None:
        try:
            _register(module)
        except Exception as exc:  # the import hook or the switch logs it
            switched.failure = type(exc).__name__
            raise

    switched._waiting = when_imported(HOOKS, register)
    return switched


def _register(module: ModuleType) -> None:
    """Register the handler with LangChain's configure hooks, once per process, and switch it
    on while the switch is."""
    global _handler
    with _lock:
        if _handler is None:
            from spanledger.integrations.langchain.handler import LedgerCallbackHandler

            made = LedgerCallbackHandler()
            variable: ContextVar[LedgerCallbackHandler | None] = ContextVar(
                "spanledger_langchain", default=made
            )
            module.register_configure_hook(variable, True)
            _handler = made
        _handler.on = _on


def handler() -> LedgerCallbackHandler | None:
    """The registered handler (``None``: LangChain's hooks were never imported while the
    switch was on)."""
    return _handler
