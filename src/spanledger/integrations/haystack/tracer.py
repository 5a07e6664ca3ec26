"""spanledger's Haystack tracer: it stands in front of the tracer the application enabled, hands
it every span, tag and content tag exactly as Haystack gives them, and reads the components'
inputs and outputs for the request on the side.

Haystack keeps one tracer (``haystack.tracing.tracer.actual_tracer``). Ours wraps the one enabled
before it (Haystack 2.x's auto-enabled OpenTelemetry or Datadog tracer, a ``LoggingTracer``, a
connector's, or none) and forwards to it. Content tags are read whatever Haystack's content flag
says, and forwarded through the wrapped span's own ``set_content_tag``, which applies that flag
as it would without us: the application's tracer never receives content it did not ask for.
Reading never raises into Haystack (a failure is logged by type), and a span of no interest
costs one wrapper object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from haystack.tracing.tracer import NullSpan, Span, Tracer

from spanledger.attribution import current_request
from spanledger.integrations.haystack.components import Component
from spanledger.integrations.haystack.runs import ComponentReader, Run
from spanledger.recording.call import logged

__all__ = ["LedgerSpan", "LedgerTracer"]

PIPELINE_RUNS = frozenset({"haystack.pipeline.run", "haystack.async_pipeline.run"})
"""A pipeline run's span: 3.x names sync and async runs alike; 2.x's ``AsyncPipeline`` names
its own."""
COMPONENT_RUN = "haystack.component.run"
_READ = PIPELINE_RUNS | {COMPONENT_RUN}

_RUN: ContextVar[Run | None] = ContextVar("spanledger_haystack_run", default=None)
_ENTERING: ContextVar[bool] = ContextVar("spanledger_haystack_entering", default=False)


class LedgerSpan(Span):
    """The wrapped tracer's span, forwarded to; a component's inputs and outputs are read on the
    side."""

    def __init__(self, inner: Span, run: Run | None, reader: ComponentReader | None) -> None:
        self.inner = inner
        self.run = run
        self.reader = reader

    def set_tag(self, key: str, value: Any) -> None:
        self.inner.set_tag(key, value)

    def set_tags(self, tags: dict[str, Any]) -> None:
        self.inner.set_tags(tags)

    def set_content_tag(self, key: str, value: Any) -> None:
        self.inner.set_content_tag(key, value)
        if self.reader is not None:
            try:
                self.reader.heard(key, value)
            except Exception as exc:
                logged(exc)

    def raw_span(self) -> Any:
        return self.inner.raw_span()

    def get_correlation_data_for_logs(self) -> dict[str, Any]:
        return self.inner.get_correlation_data_for_logs()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class LedgerTracer(Tracer):
    """Forwards to ``wrapped`` (the tracer enabled before it) and reads pipeline and component
    runs for the request while ``on``."""

    def __init__(self, wrapped: Tracer) -> None:
        self.wrapped = wrapped
        self.on = True

    @contextlib.contextmanager
    def trace(
        self,
        operation_name: str,
        tags: dict[str, Any] | None = None,
        parent_span: Span | None = None,
    ) -> Iterator[Span]:
        parent = parent_span.inner if isinstance(parent_span, LedgerSpan) else parent_span
        if _ENTERING.get():  # the wrapped tracer calls back into ours: stop the loop here
            yield NullSpan()
            return
        entering = _ENTERING.set(True)
        try:
            forwarded = self.wrapped.trace(operation_name, tags=tags, parent_span=parent)
            inner = forwarded.__enter__()
        finally:
            _ENTERING.reset(entering)
        with contextlib.ExitStack() as stack:
            stack.push(forwarded)
            span = self._span(inner, operation_name, tags, parent_span, stack)
            yield span

    def _span(
        self,
        inner: Span,
        operation_name: str,
        tags: dict[str, Any] | None,
        parent_span: Span | None,
        stack: contextlib.ExitStack,
    ) -> Span:
        """Our span over ``inner`` when the operation is read; ``inner`` itself otherwise."""
        if not self.on or operation_name not in _READ:
            return inner
        try:
            outer = parent_span.run if isinstance(parent_span, LedgerSpan) else None
            run = _RUN.get() or outer
            if operation_name in PIPELINE_RUNS:
                scope = current_request() or (run.scope if run is not None else None)
                started = Run(scope) if scope is not None else Run.of_its_own(tags)
                stack.callback(_finish, started, _RUN.set(started))
                return LedgerSpan(inner, started, None)
            scope = current_request() if run is None else run.scope
            if scope is None:  # no request to feed: nothing is read
                return inner
            component = Component.of(tags)
            if component is None:
                return inner
            if run is None:
                run = Run(scope, deferring=False)
            return LedgerSpan(inner, run, ComponentReader(run, component))
        except Exception as exc:
            logged(exc)
            return inner

    def current_span(self) -> Span | None:
        return self.wrapped.current_span()


def _finish(run: Run, token: Any) -> None:
    """A pipeline run ended: its answers taken, its own request closed; never raises."""
    try:
        run.finish()
    except Exception as exc:
        logged(exc)
    finally:
        with contextlib.suppress(ValueError):  # ended in another context than it started
            _RUN.reset(token)
