"""What a LlamaIndex pipeline's spans and events mean for the request they run in.

A retriever's nodes are served, as candidates first: the nodes a reranker or any other node
postprocessor hands on are the selection, and nodes nothing judged are selected when a model
call is about to render them (or the top-level run ends). An outer retriever (fusion,
auto-merging) judges what the retrievers inside it returned. Each model call's prompt is
matched when it starts and its answer read when it ends; a call made inside a retriever, a
postprocessor (an LLM reranker) or another model call (a custom LLM's ``chat`` calling its
``complete``) is part of that step, not a call of its own.

The request's state lives beside its scope and goes with it; concurrent requests never share
one. Span ids are LlamaIndex's own (``<Class>.<method>-<uuid>``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spanledger.attribution import FrameId, ModelCall, RequestScope
from spanledger.integrations.llama_index.reading import (
    answer_of,
    cited_texts,
    input_tokens,
    passages,
    prompt_parts,
    provider_and_model,
)

__all__ = [
    "RequestState",
    "candidates",
    "chat_started",
    "chosen",
    "model_ended",
    "model_started",
    "retrieved",
    "selected_so_far",
    "state_of",
]

MAX_SPANS = 4096
"""Spans whose parent one request keeps; a larger request's later spans count as top-level."""
_FALLBACK_PROVIDER = "llama_index"


@dataclass(slots=True)
class _OpenCall:
    call: ModelCall
    provider: str | None
    model: str | None


class RequestState:
    """What the handlers keep about one open request: its span tree, the spans of selection
    steps (retrievers, postprocessors), the model calls awaiting their answer, and the frames
    served that no step has judged yet (each with the span that retrieved it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parents: dict[str, str | None] = {}
        self.steps: set[str] = set()
        self.calls: dict[str | None, _OpenCall] = {}
        self.unjudged: dict[FrameId, str | None] = {}

    def entered(self, span: str, parent: str | None, *, step: bool) -> None:
        with self.lock:
            if len(self.parents) < MAX_SPANS:
                self.parents[span] = parent
                if step:
                    self.steps.add(span)

    def is_root(self, span: str) -> bool:
        """Whether ``span`` is a top-level span of this request."""
        with self.lock:
            return span in self.parents and self.parents[span] is None

    def _ancestors(self, span: str | None) -> list[str]:
        """The spans above ``span``, nearest first; call under the lock."""
        found: list[str] = []
        parent = self.parents.get(span) if span is not None else None
        while parent is not None and len(found) < MAX_SPANS:
            found.append(parent)
            parent = self.parents.get(parent)
        return found

    def inside_a_step(self, span: str | None) -> bool:
        """Whether ``span`` runs inside a selection step or a model call already open."""
        with self.lock:
            return any(
                above in self.steps or above in self.calls for above in self._ancestors(span)
            )

    def judged_by(self, span: str | None) -> None:
        """The frames retrieved inside ``span`` are judged by it (an outer retriever)."""
        if span is None:
            return
        with self.lock:
            for frame, source in list(self.unjudged.items()):
                if source is not None and span in self._ancestors(source):
                    del self.unjudged[frame]

    def judged(self, frames: Sequence[FrameId]) -> None:
        with self.lock:
            for frame in frames:
                self.unjudged.pop(frame, None)

    def wait(self, frames: Sequence[FrameId], span: str | None) -> None:
        with self.lock:
            for frame in frames:
                self.unjudged[frame] = span

    def take_unjudged(self) -> list[FrameId]:
        with self.lock:
            frames = list(self.unjudged)
            self.unjudged.clear()
            return frames


_states: weakref.WeakKeyDictionary[RequestScope, RequestState] = weakref.WeakKeyDictionary()
_states_lock = threading.Lock()


def state_of(scope: RequestScope) -> RequestState:
    """The state kept beside ``scope`` (made on first use; it goes when the scope goes)."""
    state = _states.get(scope)
    if state is None:
        with _states_lock:
            state = _states.setdefault(scope, RequestState())
    return state


def _provider(span: str | None) -> str:
    """The class that served a frame, read from its span id (``VectorIndexRetriever``)."""
    if not span:
        return _FALLBACK_PROVIDER
    name = span.partition(".")[0]
    return name if name.isidentifier() else _FALLBACK_PROVIDER


def retrieved(scope: RequestScope, nodes: object, span: str | None) -> None:
    """A retriever returned ``nodes``: served as candidates, judged by whatever selects from
    them next; what retrievers inside this one returned, this one has judged."""
    state = state_of(scope)
    state.judged_by(span)
    frames = scope.context.served(passages(nodes), provider_id=_provider(span), selected=False)
    state.wait(frames, span)


def candidates(scope: RequestScope, nodes: object, span: str | None) -> None:
    """A reranker or another node postprocessor is handed ``nodes``: it judges them."""
    frames = scope.context.served(passages(nodes), provider_id=_provider(span), selected=False)
    state_of(scope).judged(frames)


def chosen(scope: RequestScope, nodes: object, span: str | None) -> None:
    """A reranker or another node postprocessor handed on ``nodes``: they are selected."""
    frames = scope.context.served(passages(nodes), provider_id=_provider(span), selected=True)
    state_of(scope).judged(frames)


def selected_so_far(scope: RequestScope) -> None:
    """Frames no step judged are the selection: select them."""
    frames = state_of(scope).take_unjudged()
    if frames:
        scope.frames.select_quietly(frames)


def model_started(
    scope: RequestScope,
    span: str | None,
    parts: list[str],
    model_dict: object,
) -> None:
    """A model call starts with a prompt of ``parts``: match it (unless the call belongs to a
    step or to a model call already open), after selecting what nothing judged."""
    state = state_of(scope)
    if state.inside_a_step(span):
        return
    selected_so_far(scope)
    call = scope.context.prompted(parts)
    provider, model = provider_and_model(model_dict)
    with state.lock:
        state.calls[span] = _OpenCall(call, provider, model)


def chat_started(scope: RequestScope, span: str | None, messages: Any, model_dict: object) -> None:
    model_started(scope, span, prompt_parts(messages or ()), model_dict)


def model_ended(scope: RequestScope, span: str | None, response: object, messages: Any) -> None:
    """The model call of ``span`` answered: its text, the provider's citations, its input
    tokens."""
    state = state_of(scope)
    with state.lock:
        opened = state.calls.pop(span, None)
    if opened is None:
        return
    scope.context.answered(
        opened.call,
        answer_of(response),
        cited=cited_texts(response, messages or ()),
        input_tokens=input_tokens(response),
        provider=opened.provider,
        model=opened.model,
    )
