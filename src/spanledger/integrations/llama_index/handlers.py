"""The two handlers spanledger adds to LlamaIndex's root dispatcher, and adding them once.

The event handler hears retrievals, reranks and each model call's start and end; the span
handler hears every span start and end: a top-level run opens its request (``runs``), a node
postprocessor's ``_postprocess_nodes`` span says what it was handed and what it handed on (the
rerankers and filters that raise no rerank event), and the span tree says which step a model
call belongs to (``pipeline``). Both run inline in LlamaIndex's calls, so each does a dictionary
look-up and a context-variable read before anything else, and neither ever raises into
LlamaIndex: a failure of their own is logged by type and dropped.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.chat_engine.types import BaseChatEngine
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.span import BaseSpan
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index_instrumentation import get_dispatcher

from spanledger.attribution import RequestScope, current_request
from spanledger.integrations.llama_index import pipeline
from spanledger.integrations.llama_index.runs import Runs
from spanledger.recording.call import logged

__all__ = ["EventHandler", "SpanHandler", "register", "registered", "unregister"]

_POSTPROCESS = "._postprocess_nodes-"
"""How a node postprocessor's own span id reads (``SimilarityPostprocessor._postprocess_nodes-``
and a uuid)."""
_STEPS = (BaseRetriever, BaseNodePostprocessor)
"""The selection steps: a model call inside one belongs to it."""


class _Switch:
    on = False


_switch = _Switch()
_runs = Runs((BaseQueryEngine, BaseChatEngine, BaseRetriever))
_lock = threading.Lock()


def _retrieved(scope: RequestScope, event: Any) -> None:
    pipeline.retrieved(scope, event.nodes, event.span_id)


def _rerank_started(scope: RequestScope, event: Any) -> None:
    pipeline.candidates(scope, event.nodes, event.span_id)


def _reranked(scope: RequestScope, event: Any) -> None:
    pipeline.chosen(scope, event.nodes, event.span_id)


def _chat_started(scope: RequestScope, event: Any) -> None:
    pipeline.chat_started(scope, event.span_id, event.messages, event.model_dict)


def _completion_started(scope: RequestScope, event: Any) -> None:
    pipeline.model_started(scope, event.span_id, [event.prompt], event.model_dict)


def _chat_ended(scope: RequestScope, event: Any) -> None:
    pipeline.model_ended(scope, event.span_id, event.response, event.messages)


def _completion_ended(scope: RequestScope, event: Any) -> None:
    pipeline.model_ended(scope, event.span_id, event.response, ())


_READERS: dict[type, Callable[[RequestScope, Any], None]] = {
    RetrievalEndEvent: _retrieved,
    ReRankStartEvent: _rerank_started,
    ReRankEndEvent: _reranked,
    LLMChatStartEvent: _chat_started,
    LLMCompletionStartEvent: _completion_started,
    LLMChatEndEvent: _chat_ended,
    LLMCompletionEndEvent: _completion_ended,
}


class EventHandler(BaseEventHandler):
    """Retrievals, reranks and model calls, read into the open request's context."""

    @classmethod
    def class_name(cls) -> str:
        return "SpanledgerEventHandler"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        read = _READERS.get(type(event))
        if read is None or not _switch.on:
            return
        scope = current_request()
        if scope is None:
            return
        try:
            read(scope, event)
        except Exception as exc:
            logged(exc)


class SpanHandler(BaseSpanHandler[BaseSpan]):
    """Top-level runs as requests, node postprocessors' selections, and the span tree."""

    @classmethod
    def class_name(cls) -> str:
        return "SpanledgerSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not _switch.on:
            return
        try:
            _entered(id_, bound_args, instance, parent_id)
        except Exception as exc:
            logged(exc)

    def span_exit(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            _exited(id_, instance, result, done=True)
        except Exception as exc:
            logged(exc)

    def span_drop(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            _exited(id_, instance, None, done=False)
        except Exception as exc:
            logged(exc)

    def new_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        parent_span_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        return None

    def prepare_to_exit_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        result: Any | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        return None

    def prepare_to_drop_span(
        self,
        id_: str,
        bound_args: inspect.BoundArguments,
        instance: Any | None = None,
        err: BaseException | None = None,
        **kwargs: Any,
    ) -> BaseSpan | None:
        return None


def _is_postprocess(span: str, instance: object) -> bool:
    return _POSTPROCESS in span and isinstance(instance, BaseNodePostprocessor)


def _entered(
    span: str, bound_args: inspect.BoundArguments, instance: object, parent: str | None
) -> None:
    scope = current_request()
    if scope is None:
        if parent is not None:
            return
        scope = _runs.start(span, instance)
        if scope is None:
            return
    state = pipeline.state_of(scope)
    state.entered(span, parent, step=isinstance(instance, _STEPS))
    if _is_postprocess(span, instance):
        pipeline.candidates(scope, bound_args.arguments.get("nodes"), span)


def _exited(span: str, instance: object, result: object, *, done: bool) -> None:
    """A span ended (``done``) or was dropped: a postprocessor's output is its selection, the
    end of a top-level span selects what nothing judged, and a run's request closes."""
    opened = _runs.end(span)
    try:
        scope = opened.scope if opened is not None else current_request()
        if scope is not None and _switch.on:
            if done and _is_postprocess(span, instance):
                pipeline.chosen(scope, result, span)
            if pipeline.state_of(scope).is_root(span):
                pipeline.selected_so_far(scope)
    finally:
        if opened is not None:
            opened.close()
            if not _switch.on:
                _leave_if_idle()


_EVENTS = EventHandler()
_SPANS = SpanHandler()


def registered() -> bool:
    """Whether the handlers are on LlamaIndex's root dispatcher and turned on."""
    dispatcher = get_dispatcher()
    return _switch.on and any(handler is _EVENTS for handler in dispatcher.event_handlers)


def register() -> None:
    """Put the handlers on LlamaIndex's root dispatcher (once) and turn them on."""
    dispatcher = get_dispatcher()
    with _lock:
        if not any(handler is _EVENTS for handler in dispatcher.event_handlers):
            dispatcher.add_event_handler(_EVENTS)
        if not any(handler is _SPANS for handler in dispatcher.span_handlers):
            dispatcher.add_span_handler(_SPANS)
        _switch.on = True


def unregister() -> None:
    """Turn the handlers off and take them off the dispatcher; the span handler stays until the
    last run it opened a request for has ended, to close that request."""
    dispatcher = get_dispatcher()
    with _lock:
        _switch.on = False
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not _EVENTS]
    _leave_if_idle()


def _leave_if_idle() -> None:
    dispatcher = get_dispatcher()
    with _lock:
        if not _switch.on and not len(_runs):
            dispatcher.span_handlers = [h for h in dispatcher.span_handlers if h is not _SPANS]
