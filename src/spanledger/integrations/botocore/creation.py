"""The process-wide switch for botocore: every Bedrock client made after it records.

botocore gives each client its own copy of the session's event emitter when the client is made,
and records nothing on classes, so there is no method to patch: the switch hooks client creation
instead (``botocore.client.ClientCreator.create_client``, which ``boto3.client``,
``boto3.Session().client`` and a botocore session's ``create_client`` all go through) and
instruments each new sync ``bedrock-runtime`` / ``bedrock-agent-runtime`` client as
``instrument(client)`` would; every other client is handed back untouched. Clients made before
the switch are not reached: instrument those with ``instrument(client)``. The hook never raises
into the caller: a client it cannot instrument is handed back as botocore made it (logged by
type).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from botocore.client import ClientCreator  # type: ignore[import-untyped]

from spanledger.integrations.botocore.client import serves
from spanledger.recording.call import logged

__all__ = ["CreationHook", "hook"]

_MISSING = object()


class CreationHook:
    """``ClientCreator.create_client`` replaced by a wrapper handing each Bedrock client it
    makes to ``adopt``; ``undo`` puts botocore's back (or, when something patched over ours
    since, leaves theirs and turns ours into a pass-through)."""

    def __init__(self, adopt: Callable[[Any], None]) -> None:
        self.on = True
        self._replaced = vars(ClientCreator).get("create_client", _MISSING)
        original = ClientCreator.create_client
        switch = self

        @wraps(original)
        def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(self, *args, **kwargs)
            if switch.on:
                try:
                    if serves(client):
                        adopt(client)
                except Exception as exc:
                    logged(exc)
            return client

        self.wrapper = create_client
        ClientCreator.create_client = create_client

    def undo(self) -> None:
        self.on = False
        if vars(ClientCreator).get("create_client") is not self.wrapper:
            return
        if self._replaced is _MISSING:
            del ClientCreator.create_client
        else:
            ClientCreator.create_client = self._replaced


def hook(adopt: Callable[[Any], None]) -> CreationHook:
    """Start handing every Bedrock client botocore makes to ``adopt``."""
    return CreationHook(adopt)
