"""The callback handler langchain-core adds to every run while the switch is on: a retriever's
documents are served to the run's request, each model call's prompt is matched against them,
and its answer read for what it cited.

The outermost retriever run of a tree serves its documents as selected; a retriever run inside
another (the base retriever of a ``ContextualCompressionRetriever``, the retrievers of an
ensemble) serves candidates, and the outer one's documents then mark the selection among them
(a reranker's copies are the same frames: identity goes by content where ids are dropped). A
model call made inside a retriever run (a compressor's filter, a query rewriter) is part of
retrieval, not an answer, and is left out.

It never raises into LangChain: a failure of its own is logged once by type and the run goes
on. Switched off, it asks LangChain to skip every event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from langchain_core.callbacks.base import BaseCallbackHandler

from spanledger.integrations.langchain import reading
from spanledger.integrations.langchain.runs import FollowedRun, RunKind, RunsInFlight
from spanledger.recording.call import logged

__all__ = ["LedgerCallbackHandler"]


class LedgerCallbackHandler(BaseCallbackHandler):
    """spanledger's LangChain callback handler: one per process, switched on and off."""

    run_inline = True
    """Async runs call it in the run's own task (not in an executor's copy of the context),
    so what a start makes current is current for the run."""

    def __init__(self) -> None:
        self.on = False
        self.runs = RunsInFlight()
        self._failed: set[type[BaseException]] = set()

    @property
    def ignore_llm(self) -> bool:
        return not self.on

    @property
    def ignore_chat_model(self) -> bool:
        return not self.on

    @property
    def ignore_chain(self) -> bool:
        return not self.on

    @property
    def ignore_retriever(self) -> bool:
        return not self.on

    @property
    def ignore_agent(self) -> bool:
        return not self.on  # LangChain's tool events go by this one too

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    # Runs that only carry the tree: chains and tools.

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._guarded(self._started, run_id, parent_run_id, RunKind.CHAIN, kwargs.get("name"))

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name")
        self._guarded(self._started, run_id, parent_run_id, RunKind.CHAIN, name)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    # Retrievers: served and selected.

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._guarded(self._started, run_id, parent_run_id, RunKind.RETRIEVER, kwargs.get("name"))

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self._retrieved, run_id, documents)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    # Models: rendered and cited.

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._guarded(self._prompted, run_id, parent_run_id, messages, metadata, kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._guarded(self._prompted, run_id, parent_run_id, prompts, metadata, kwargs)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self._answered, run_id, response)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._guarded(self.runs.ended, run_id)

    # What each event does.

    def _started(
        self, run_id: UUID, parent_run_id: UUID | None, kind: RunKind, name: object
    ) -> FollowedRun | None:
        return self.runs.started(run_id, parent_run_id, kind, name)

    def _retrieved(self, run_id: UUID, documents: Any) -> None:
        run = self.runs.get(run_id)
        try:
            found = reading.passages(documents) if run is not None else None
            if run is not None and found:
                run.root.scope.context.served(
                    found, provider_id=run.name, selected=not run.within_retriever
                )
        finally:
            self.runs.ended(run_id)

    def _prompted(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        messages: Any,
        metadata: Any,
        kwargs: dict[str, Any],
    ) -> None:
        run = self.runs.started(run_id, parent_run_id, RunKind.MODEL, kwargs.get("name"))
        if run is None or run.within_retriever:
            return
        params = kwargs.get("invocation_params")
        run.prompt = reading.prompt(messages, params)
        run.metadata, run.invocation_params = metadata, params
        run.call = run.root.scope.context.prompted(run.prompt.parts)

    def _answered(self, run_id: UUID, response: Any) -> None:
        run = self.runs.get(run_id)
        try:
            if run is not None and run.call is not None:
                found = reading.answer(response, run.prompt)
                provider, model = reading.who(run.metadata, run.invocation_params)
                run.root.scope.context.answered(
                    run.call,
                    found.text,
                    cited=found.cited,
                    input_tokens=found.input_tokens,
                    provider=provider,
                    model=model,
                )
        finally:
            self.runs.ended(run_id)

    def _guarded(self, work: Callable[..., object], *args: Any) -> None:
        """Run ``work``; a failure is logged once per exception type, never raised (LangChain
        would log its message, which may quote the run's text)."""
        try:
            work(*args)
        except Exception as exc:
            if type(exc) not in self._failed:
                self._failed.add(type(exc))
                logged(exc)
