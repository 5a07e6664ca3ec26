"""A top-level LlamaIndex run as a request of its own.

With the switch on and no request open, a query engine's ``query`` or a chat engine's ``chat``
that no other span encloses opens a request named after its span
(``llama_index:RetrieverQueryEngine.query:1a2b3c4d``) in the context it runs in, and closes it
when that span ends: concurrent runs (threads, asyncio tasks) each have their own. A streamed
chat is no run: its answer arrives after the call returns (open ``spanledger.request`` around
the call and the stream instead).
"""

from __future__ import annotations

import threading
import uuid

from spanledger.attribution import OpenRequest, RequestScope, open_request

__all__ = ["RUN_METHODS", "Runs", "run_name"]

RUN_METHODS = frozenset({"query", "aquery", "chat", "achat"})
"""The methods whose top-level span is a run. A retriever's ``retrieve`` on its own is none:
it serves what no model call renders, so there is nothing to attribute (inside a query, or
inside ``spanledger.request(...)``, its nodes are served as ever)."""
_UUID = 36


def run_name(span: str) -> str:
    """The request id of the run of ``span``: ``llama_index:<Class>.<method>:<8 hex>``."""
    if len(span) > _UUID + 1 and span[-_UUID - 1] == "-":
        return f"llama_index:{span[: -_UUID - 1]}:{span[-_UUID:][:8]}"
    return f"llama_index:{span}:{uuid.uuid4().hex[:8]}"


def _method(span: str) -> str:
    name = span[: -_UUID - 1] if len(span) > _UUID + 1 else span
    return name.rpartition(".")[2]


class Runs:
    """The requests opened for top-level runs, by their span."""

    def __init__(self, kinds: tuple[type, ...]) -> None:
        self._kinds = kinds
        self._open: dict[str, OpenRequest] = {}
        self._lock = threading.Lock()

    def start(self, span: str, instance: object) -> RequestScope | None:
        """Open a request for ``span`` when it is a run (``None``: it is not)."""
        if _method(span) not in RUN_METHODS or not isinstance(instance, self._kinds):
            return None
        opened = open_request(run_name(span))
        with self._lock:
            self._open[span] = opened
        return opened.scope

    def end(self, span: str) -> OpenRequest | None:
        """The request ``span`` opened, no longer tracked here (``None``: it opened none)."""
        with self._lock:
            return self._open.pop(span, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)
