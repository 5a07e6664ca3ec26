"""Which request each LangChain run belongs to.

A run with no parent (a root: one ``invoke`` of a chain, a retriever, a model) joins the
request open where it starts (``spanledger.request(...)``); with none open, a root chain opens
one of its own, named after it, that closes when the root ends or fails, while a root
retriever or model run is not followed (on its own it serves or renders nothing to attribute,
and following it would cost every bare retriever or model call a request). Every run below a
root feeds the same request: runs are followed by their ids, never by where they execute, so
requests running at once (threads, asyncio tasks, LangChain's executors) never mix.

The calls the SDK switch records inside a run join its request only where that request is
current. A request a root opens is opened, and closed, in a context of its own, and made
current only where that cannot outlive the run: for the length of a synchronous run (its end
comes back to the context it started in, and takes it back), and in a context LangChain made
for a step of the run (a sequence step, a parallel branch, a tool's body), which ends with the
step. LangChain ends an async run in a copy of the caller's context, so nothing is made current
in the caller's own context there: it could never be taken back.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from uuid import UUID

from spanledger.attribution import ModelCall, OpenRequest, RequestScope, current_request
from spanledger.integrations.langchain import reading
from spanledger.recorder import current_scope, enter_scope, exit_scope

__all__ = ["MAX_RUNS", "FollowedRun", "RootRequest", "RunKind", "RunsInFlight"]

MAX_RUNS = 100_000
"""Runs followed at once; a root starting past it is not followed (nor anything below it)."""

_NAME = re.compile(r"[^\w.-]+")


class RunKind(Enum):
    """What a run is, as far as the capture cares."""

    CHAIN = "chain"
    RETRIEVER = "retriever"
    MODEL = "model"


@dataclass(eq=False)
class RootRequest:
    """A root run and the runs below it, and the request they feed."""

    scope: RequestScope
    opened: OpenRequest | None = None
    """The request the root opened (``None``: it joined one already open)."""
    context: contextvars.Context | None = None
    """The context that request was opened in, and is closed in."""
    members: list[UUID] = field(default_factory=list)
    """The runs followed under the root, the root first."""


@dataclass(eq=False)
class FollowedRun:
    """One run under a root: its kind, whether it runs inside a retriever run, and what its
    model call (if it is one) was handed."""

    root: RootRequest
    kind: RunKind
    name: str
    within_retriever: bool = False
    token: contextvars.Token[Any] | None = None
    """Set when the run made its request current where it started (a synchronous run)."""
    call: ModelCall | None = None
    prompt: reading.ModelPrompt | None = None
    metadata: Any = None
    invocation_params: Any = None


class RunsInFlight:
    """The runs followed, by run id, from their start to their end."""

    def __init__(self) -> None:
        self._runs: dict[UUID, FollowedRun] = {}
        self.full = 0
        """Roots not followed because ``MAX_RUNS`` runs were in flight."""

    def __len__(self) -> int:
        return len(self._runs)

    def get(self, run_id: UUID) -> FollowedRun | None:
        return self._runs.get(run_id)

    def started(
        self, run_id: UUID, parent_run_id: UUID | None, kind: RunKind, name: object
    ) -> FollowedRun | None:
        """A run started: follow it under its root (a root opens or joins a request).
        ``None``: not followed (a root retriever or model run with no request open, which
        serves or renders nothing another run could attribute; its parent is not followed,
        having started before the switch was on; or ``MAX_RUNS`` are in flight)."""
        if parent_run_id is None:
            if kind is not RunKind.CHAIN and current_request() is None:
                return None  # a retriever or a model run on its own has nothing to attribute
            if len(self._runs) >= MAX_RUNS:
                self.full += 1
                return None
            run = FollowedRun(_root(run_id, name), kind, _named(name))
        else:
            parent = self._runs.get(parent_run_id)
            if parent is None:
                return None
            within = parent.within_retriever or parent.kind is RunKind.RETRIEVER
            run = FollowedRun(parent.root, kind, _named(name), within_retriever=within)
        run.root.members.append(run_id)
        self._runs[run_id] = run
        if parent_run_id is not None or kind is RunKind.RETRIEVER:
            _make_current(run, self._runs)
        return run

    def ended(self, run_id: UUID) -> FollowedRun | None:
        """A run ended (or failed): forget it; a root also closes the request it opened."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return None
        _taken_back(run)
        root = run.root
        if root.members and root.members[0] == run_id:
            for member in root.members[1:]:  # runs whose end LangChain never reported
                self._runs.pop(member, None)
            root.members.clear()
            _close(root)
        return run

    def drop(self) -> None:
        """Forget every run in flight and close the requests their roots opened: the switch
        went off, and their ends will not be heard."""
        dropped, self._runs = self._runs, {}
        roots = {id(run.root): run.root for run in dropped.values()}
        for root in roots.values():
            root.members.clear()
            _close(root)


def _root(run_id: UUID, name: object) -> RootRequest:
    """What a root run feeds: the request open here, else one of its own, opened in a context
    of its own so that closing it never depends on where LangChain reports the end."""
    scope = current_request()
    if scope is not None:
        return RootRequest(scope)
    context = contextvars.copy_context()
    opened = context.run(OpenRequest, f"langchain:{_named(name)}:{run_id.hex[-12:]}")
    return RootRequest(opened.scope, opened, context)


def _close(root: RootRequest) -> None:
    if root.opened is not None and root.context is not None:
        root.context.run(root.opened.close)


@dataclass(frozen=True)
class _Placed:
    """A request this module made current in a context, and the token that takes the context
    back to what was current there before this module made any request current in it."""

    scope: RequestScope
    first: contextvars.Token[Any]


_placed: contextvars.ContextVar[_Placed | None] = contextvars.ContextVar(
    "spanledger_langchain_placed", default=None
)


def _make_current(run: FollowedRun, runs: dict[UUID, FollowedRun]) -> None:
    """Make the run's request current where the run executes, where that cannot outlive it: a
    synchronous run's end comes back to the context it started in (and takes it back there); a
    context LangChain made for a step of the run ends with the step. A root chain or model
    makes nothing current in its caller's context: ``RunnableSequence.batch`` and a model's
    ``generate`` start several roots there one after the other, each a request of its own, and
    their steps make theirs current where they run."""
    scope = run.root.scope
    current = current_scope()
    if current is scope:
        return
    sync = asyncio._get_running_loop() is None
    if not sync and not _made_for(run.root, runs):
        return
    token = enter_scope(scope)
    placed = _placed.get()
    first = placed.first if placed is not None and placed.scope is current else token
    _placed.set(_Placed(scope, first))
    if sync:
        run.token = token


def _taken_back(run: FollowedRun) -> None:
    """Take the context back to what was current before this module made any request current
    in it, unless something else is current there now. Several runs of different requests
    start one after the other in one context (a batch) and end in any order: whichever ends
    first takes the context back, the others find nothing of theirs left."""
    placed = _placed.get()
    if run.token is None or placed is None or placed.scope is not current_scope():
        return
    for token in (placed.first, run.token):
        try:
            exit_scope(token)
        except (ValueError, RuntimeError):  # made in another context, or used already
            continue
        break
    _placed.set(None)


def _made_for(root: RootRequest, runs: dict[UUID, FollowedRun]) -> bool:
    """Whether LangChain made the current context for a step of one of ``root``'s runs: it
    sets the step's config there, whose callbacks name that run as their parent."""
    config = _child_config()
    callbacks = config.get("callbacks") if isinstance(config, dict) else None
    parent = getattr(callbacks, "parent_run_id", None)
    owner = runs.get(parent) if isinstance(parent, UUID) else None
    return owner is not None and owner.root is root


_child_config_var: contextvars.ContextVar[Any] | None = None


def _child_config() -> Any:
    """The config LangChain set for the step running in this context, if any."""
    global _child_config_var
    if _child_config_var is None:
        from langchain_core.runnables.config import var_child_runnable_config

        _child_config_var = var_child_runnable_config
    return _child_config_var.get()


def _named(name: object) -> str:
    """A run's name as a request id or a provider id carries it: word characters, dots and
    dashes, at most 64 of them."""
    text = _NAME.sub("_", name)[:64] if isinstance(name, str) else ""
    return text or "run"
