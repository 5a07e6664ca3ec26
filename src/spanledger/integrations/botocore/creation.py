"""The process-wide switch for botocore: every Bedrock client records, made before it or after.

botocore gives each client its own class and its own copy of the session's event emitter when
the client is made, so there is no operation method on a shared class to patch. The switch
catches each sync ``bedrock-runtime`` / ``bedrock-agent-runtime`` client instead and hands it,
once, to ``adopt`` (which instruments it as ``instrument(client)`` would):

- as botocore makes it (``botocore.client.ClientCreator.create_client``, which
  ``boto3.client``, ``boto3.Session().client`` and a botocore session's ``create_client`` all
  go through);
- a client made before the switch, at its first call: ``BaseClient._emit_api_params``, which
  every call of every client runs before botocore emits ``before-call``, hands a Bedrock client
  it has not seen to ``adopt``, so that very call is recorded. A call of any other client costs
  one look at its service name. (OpenTelemetry's botocore instrumentation wraps
  ``_make_api_call``, around this one, and is not touched.) That first call is already inside
  its operation method, so an interrupt during that one call is not heard; the client's later
  calls are.

Every other client is handed back untouched, and a client is handed to ``adopt`` once per
switch. A botocore without ``_emit_api_params`` is left unpatched whole (``failure``). The hooks
never raise into the caller: a client they cannot instrument goes on as botocore made it (logged
by type).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import wraps
from types import FunctionType
from typing import Any

from botocore.client import BaseClient, ClientCreator  # type: ignore[import-untyped]

from spanledger.capture.patching import ClassPatch, patch_class
from spanledger.integrations.botocore.client import OPERATIONS, serves
from spanledger.recording.call import logged

__all__ = ["CreationHook", "hook"]

_MISSING = object()
_FIRST_CALL = "_emit_api_params"
"""The ``BaseClient`` method every call runs before ``before-call``."""

_catching: CreationHook | None = None
"""The hook switched on now; the ``_emit_api_params`` wrapper reads it at each call (a wrapper
left under another library's by an earlier switch is switched back on, not made again)."""


class CreationHook:
    """``ClientCreator.create_client`` and ``BaseClient._emit_api_params`` replaced by wrappers
    handing each Bedrock client to ``adopt``, once; ``undo`` puts botocore's back (or, when
    something patched over ours since, leaves theirs and turns ours into a pass-through).
    ``failure``: why botocore's classes could not be patched (nothing is then)."""

    def __init__(self, adopt: Callable[[Any], None]) -> None:
        global _catching
        self.on = True
        self.failure: str | None = None
        self._adopt = adopt
        self._seen: weakref.WeakSet[Any] = weakref.WeakSet()
        self._first_calls: ClassPatch | None = None
        self._replaced = vars(ClientCreator).get("create_client", _MISSING)
        self.wrapper: object = None
        if not callable(vars(BaseClient).get(_FIRST_CALL)):
            self.failure = f"botocore.client.BaseClient.{_FIRST_CALL} not found"
            self.on = False
            return
        original = ClientCreator.create_client
        switch = self

        @wraps(original)
        def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(self, *args, **kwargs)
            if switch.on:
                try:
                    if client.meta.service_model.service_name in OPERATIONS:
                        switch.caught(client)
                except Exception as exc:
                    logged(exc)
            return client

        self._first_calls = patch_class(BaseClient, _FIRST_CALL, _first_calls)
        self.wrapper = create_client
        ClientCreator.create_client = create_client
        _catching = self

    def caught(self, client: Any) -> None:
        """Hand ``client`` of a Bedrock service to ``adopt``, unless it was seen before or it
        is not one ``serves``."""
        if client in self._seen:
            return
        try:
            if serves(client):
                self._adopt(client)
        finally:
            self._seen.add(client)

    def undo(self) -> None:
        global _catching
        self.on = False
        if _catching is self:
            _catching = None
        if self._first_calls is not None:
            self._first_calls.undo()
        if self.wrapper is None or vars(ClientCreator).get("create_client") is not self.wrapper:
            return
        if self._replaced is _MISSING:
            del ClientCreator.create_client
        else:
            ClientCreator.create_client = self._replaced


def _first_calls(patch: ClassPatch) -> Callable[..., Any]:
    """``BaseClient._emit_api_params`` handing a Bedrock client to the hook on now, then
    calling what the class held (a plain function, called as it is; anything else bound as
    attribute access binds it)."""
    held = vars(patch.owner).get(patch.name)
    function = held if isinstance(held, FunctionType) else None

    @wraps(getattr(patch.owner, patch.name))
    def _emit_api_params(self: Any, *args: Any, **kwargs: Any) -> Any:
        catching = _catching
        if patch.on and catching is not None:
            try:
                if self.meta.service_model.service_name in OPERATIONS:
                    catching.caught(self)
            except Exception as exc:
                logged(exc)
        if function is not None:
            return function(self, *args, **kwargs)
        return patch.beneath(self)(*args, **kwargs)

    return _emit_api_params


def hook(adopt: Callable[[Any], None]) -> CreationHook:
    """Start handing every Bedrock client botocore makes, or a client made before makes its
    first call through, to ``adopt``."""
    return CreationHook(adopt)
