"""Request scopes: the calls made while serving one request, and the frames it served.

``request(request_id)`` opens a ``RequestScope`` through the recorder's call-scope hook, so
every call inside carries the ``request_id`` and the recorder hands the scope its events; the
scope's frame tracker follows the retrieved passages, and ``report()`` joins the two into the
request's attribution and bill. Request-aware sinks hear the scope open and close: the OTel
exporter opens the request's span there, so the request is one trace. Work handed to another
thread keeps the request (and its span) when wrapped with ``carry``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from os import PathLike
from typing import ParamSpec, TypeVar

from spanledger import _forksafe
from spanledger.attribution.bill import RequestReport
from spanledger.attribution.context import ContextCapture
from spanledger.attribution.frames import ServedFrame
from spanledger.attribution.tracker import FrameTracker, Ranked
from spanledger.events import Event, ScoredDocument
from spanledger.ledger import Pricer, PriceTable, as_pricer
from spanledger.outcomes import RerankOutcome
from spanledger.recorder import current_scope, enter_scope, exit_scope, get_recorder

__all__ = ["OpenRequest", "RequestScope", "carry", "current_request", "open_request", "request"]

P = ParamSpec("P")
R = TypeVar("R")


class RequestScope:
    """The calls made while serving one request, joined by ``request_id``, and the frames
    (retrieved passages) the request served, rendered into its prompt and got cited for."""

    def __init__(self, request_id: str) -> None:
        if not request_id:
            raise ValueError("request_id must be a non-empty string")
        self.request_id = request_id
        self._events: list[Event] = []
        self._outcomes: list[RerankOutcome] = []
        self._lock = _forksafe.lock(self, "_lock")
        self.frames = FrameTracker()
        self.context = ContextCapture(self.frames)
        """What the request's model calls saw and cited, as integrations capture it."""
        self._reported = False
        self.select = self.frames.select
        self.render = self.frames.render
        self.cite = self.frames.cite
        self.cite_from_text = self.frames.cite_from_text
        self.reject = self.frames.reject

    def serve(
        self,
        source: Ranked | Sequence[ScoredDocument] | Sequence[str] | Sequence[object],
        documents: Sequence[str] | None = None,
        *,
        provider_id: str,
        ids: Sequence[str] | None = None,
        selected: bool = True,
    ) -> list[ServedFrame]:
        """Serve frames by hand (``FrameTracker.serve``). A request served by hand is
        attributed by hand: what its rerank calls were given is not served again."""
        self.context.served_by_hand()
        return self.frames.serve(
            source, documents, provider_id=provider_id, ids=ids, selected=selected
        )

    def report(
        self,
        *,
        prices: Pricer | PriceTable | str | PathLike[str] | None = None,
        budget_requested: int | None = None,
        emit: bool = True,
    ) -> RequestReport:
        """The request's attribution joined to its bill. Events already priced by the
        recorder keep their cost lines; ``prices`` prices the others. With ``emit`` the summary
        goes to the current recorder's sinks (event log, span attributes, metrics, Langfuse).
        The context the model calls read is priced at the input rates of the table of
        ``prices``, else of the recorder's own."""
        self.context.settle()
        pricer = as_pricer(prices, warn=False) if prices is not None else None
        report = RequestReport.build(
            self.request_id,
            self.frames.report(budget_requested=budget_requested),
            self.events,
            pricer,
            outcomes=self.outcomes,
            capture=self.context,
            rates=_table_of(pricer if pricer is not None else get_recorder().ledger),
        )
        if emit:
            self._reported = True
            get_recorder().record_attribution(report.record())
        return report

    def closing(self) -> None:
        """The request ends: forget the texts captured for matching and, when its context was
        captured by itself (no ``report()`` was asked for), emit its report."""
        self.context.settle()
        self.context.close()
        if self.context.captured and not self._reported:
            self.report()

    @property
    def events(self) -> list[Event]:
        """The events emitted inside this scope, in emission order (a copy)."""
        with self._lock:
            return list(self._events)

    @property
    def outcomes(self) -> list[RerankOutcome]:
        """The outcomes of the rerank chains run inside this scope, in order (a copy)."""
        with self._lock:
            return list(self._outcomes)

    def add_outcome(self, outcome: RerankOutcome) -> None:
        """Keep a rerank chain's outcome (the chain calls this)."""
        with self._lock:
            self._outcomes.append(outcome)

    def add(self, event: Event) -> None:
        """Keep an event emitted inside the scope (the recorder calls this)."""
        with self._lock:
            self._events.append(event)

    def __repr__(self) -> str:
        return f"RequestScope(request_id={self.request_id!r}, events={len(self._events)})"


def _table_of(pricer: Pricer | None) -> PriceTable | None:
    """The price table a pricer reads its rates from (a ``Ledger``'s), if it has one."""
    table = getattr(pricer, "prices", None)
    return table if isinstance(table, PriceTable) else None


def current_request() -> RequestScope | None:
    """The innermost open call scope, when it is a request scope."""
    scope = current_scope()
    return scope if isinstance(scope, RequestScope) else None


@contextmanager
def request(request_id: str) -> Iterator[RequestScope]:
    """Open a request scope: calls inside carry ``request_id`` and are kept on the scope, and
    the current recorder's request-aware sinks open what they keep around it (a span)."""
    opened = open_request(request_id)
    try:
        yield opened.scope
    finally:
        opened.close()


class OpenRequest:
    """A request scope opened where no ``with`` block can hold it: a framework's top-level run
    opens one when it starts and closes it when it ends (on any thread)."""

    def __init__(self, request_id: str) -> None:
        self.scope = RequestScope(request_id)
        self._recorder = get_recorder()
        self._opened = self._recorder.request_started(request_id)
        self._token = enter_scope(self.scope)
        self._closed = False

    def close(self) -> None:
        """End the request: its report (when its context was captured), its span. Closing
        twice does nothing; closing from another context than the one that opened it leaves
        that context's scope to the code that set it."""
        if self._closed:
            return
        self._closed = True
        try:
            self.scope.closing()
        finally:
            with contextlib.suppress(ValueError):  # closed from another context
                exit_scope(self._token)
            self._recorder.request_ended(self._opened)


def open_request(request_id: str) -> OpenRequest:
    """Open a request scope in the current context until ``close()``: the same as entering
    ``request(request_id)``, for code that hears a run start and end in separate callbacks."""
    return OpenRequest(request_id)


def carry(function: Callable[P, R]) -> Callable[P, R]:
    """Wrap ``function`` to run in another thread as part of the current request.

    Each run sees the request scope, the recorder and the trace context that were current
    where ``carry`` was called (threads, unlike asyncio tasks, start with none of them)::

        with spanledger.request("turn-7"):
            pool.submit(spanledger.carry(embed_batch), batch)
    """
    captured = contextvars.copy_context()

    def carried(*args: P.args, **kwargs: P.kwargs) -> R:
        return captured.copy().run(function, *args, **kwargs)

    return carried
