"""GenAI metrics for the OTel exporter, taken on the call path and recorded in bulk.

A synchronous OTel SDK instrument spends several microseconds on every ``record`` (attribute
cleaning, hashing, locks), and more inside a real call, where its caches are cold: two of them
cost more than the call's span. So a call only appends its figures to a bounded queue, and the
queue is drained into the real instruments when the meter provider collects (through the
callback of an observable instrument that reports nothing: the SDK runs callbacks before it
reads the synchronous aggregations), when the exporter flushes, and a few at a time on the call
path once the queue is full, so memory stays bounded even if nothing ever collects. A reader
therefore sees every call that finished before it collected, exactly as with direct recording.
A drain records each call's histogram values (each one counts in the distribution), but adds a
counter's figures once per label set: their sum, as the exemplar call's own figure with its span
plus the rest with none, so a counter costs one or two records per collection, not one per call,
and its exemplar still points at a real call with that call's figure.

Exporters on one meter share one queue and one set of instruments (the SDK hands them the same
meter and the same instruments anyway); each queue's hook has a name of its own, since the SDK
keeps only the first callback registered under a name. A forked child starts with empty queues:
what the parent queued is the parent's to record.

Recording is defensive, since one bad measurement can break every later export (an integer
beyond signed 64-bit makes the OTLP encoder fail on each collection for good): a figure that is
not a finite number, an integer outside signed 64-bit, or a count that would push a counter's
total beyond it never reaches an instrument; it is counted in ``failures``. The distinct
(operation, provider, model) label sets are bounded (``DEFAULT_LABEL_SETS``): beyond the bound a
call is recorded under the model ``_overflow`` and counted in ``overflows`` and in the
``spanledger.metrics.label_overflow`` counter, so attacker-chosen model names cannot grow memory.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Counter, Histogram, Observation
from opentelemetry.trace import INVALID_SPAN, NonRecordingSpan, SpanContext

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.breakers import STATE_VALUES, live_breakers
from spanledger.costs import CHARGED_STATUSES, NOT_PRICED_STATUSES, CostLine
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
)
from spanledger.exporters import _attribute_names as names
from spanledger.exporters._text import encodable

__all__ = [
    "DEFAULT_LABEL_SETS",
    "DURATION_BUCKETS",
    "EMBEDDING_EVENTS",
    "FAILED_EVENTS",
    "OVERFLOW_LABEL",
    "PENDING_LIMIT",
    "SHARE_BUCKETS",
    "SUCCEEDED_EVENTS",
    "TOKEN_BUCKETS",
    "GenAIMetrics",
    "metrics_for",
]

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip
SHARE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

PENDING_LIMIT = 4096
"""Calls whose figures may wait for a collection; beyond it, calls record on their own path."""

_CALL_PATH_BATCH = 64
"""The most queued calls that one call records on its own path."""

DEFAULT_LABEL_SETS = 1000
"""Distinct (operation, provider, model) label sets one set of instruments records."""

OVERFLOW_LABEL = "_overflow"
"""The model (and, past a few, the provider) label of calls beyond the label-set bound."""

_OVERFLOW_PROVIDERS = 32
"""Distinct providers kept on overflowed calls; beyond, the provider label overflows too."""

_ATTRIBUTE_SETS_KEPT = 4096
"""Metric attribute dicts cached (each distinct label set, error and token type)."""

_INT64_MAX = 2**63 - 1

_log = get_logger("spanledger.exporters.otel")
_hook_numbers = itertools.count(1)
_shared: weakref.WeakKeyDictionary[metrics.Meter, dict[tuple[bool, int], GenAIMetrics]] = (
    weakref.WeakKeyDictionary()
)
_shared_lock = _forksafe.module_lock(globals(), "_shared_lock")


def metrics_for(
    meter: metrics.Meter, *, latest: bool, label_sets: int = DEFAULT_LABEL_SETS
) -> GenAIMetrics:
    """The instruments and queue of ``meter`` (created on first use, then shared)."""
    with _shared_lock:
        try:
            by_settings = _shared.setdefault(meter, {})
        except TypeError:  # a meter that cannot be weakly referenced: nothing to share by
            return GenAIMetrics(meter, latest=latest, label_sets=label_sets)
        found = by_settings.get((latest, label_sets))
        if found is None:
            found = by_settings[(latest, label_sets)] = GenAIMetrics(
                meter, latest=latest, label_sets=label_sets
            )
        return found


def _breaker_states(options: CallbackOptions) -> Iterable[Observation]:
    """Every live circuit breaker's state, by provider and model."""
    for breaker in live_breakers():
        yield Observation(
            STATE_VALUES[breaker.state],
            {
                names.GEN_AI_PROVIDER_NAME: encodable(breaker.provider),
                names.GEN_AI_REQUEST_MODEL: encodable(breaker.model),
            },
        )


def _measurable(value: object) -> bool:
    """Whether ``value`` can reach an instrument: a non-negative integer within signed 64-bit,
    or a finite non-negative float. Anything larger breaks the export of every later collection;
    a negative or non-number one the SDK refuses with a warning on the application's logging."""
    if isinstance(value, int):
        return 0 <= value <= _INT64_MAX
    return isinstance(value, float) and math.isfinite(value) and value >= 0


FAILED_EVENTS = (EmbeddingFailedEvent, RerankFailedEvent)
SUCCEEDED_EVENTS = (EmbeddingEvent, RerankEvent)
EMBEDDING_EVENTS = (EmbeddingEvent, EmbeddingFailedEvent)
"""The event kinds, as tuples for ``isinstance`` (quicker than the union types)."""

_Figures = tuple[
    bool,  # embedding (else rerank)
    str,  # provider
    str,  # model
    str | None,  # error category, on failures
    float,  # latency in milliseconds
    int | None,  # input tokens reported
    int | None,  # search units reported
    CostLine | None,
    SpanContext | None,  # the call's span, so exemplars point at it
    tuple[str, ...],  # usage figures the provider sent that were not counts
    int | None,  # billable characters reported
]


def _figures(event: Event, span: SpanContext | None) -> _Figures:
    """The few fields the metrics need: neither the event nor the span (payload and all) is
    kept, only the span's identity."""
    input_tokens = search_units = characters = None
    error = None
    malformed: tuple[str, ...] = ()
    if isinstance(event, SUCCEEDED_EVENTS):
        malformed = event.malformed_usage
        usage = event.usage
        if usage is not None:
            input_tokens = usage.input_tokens
            if isinstance(usage, RerankUsage):
                search_units = usage.search_units
            else:
                characters = usage.billable_characters
    elif isinstance(event, FAILED_EVENTS):
        error = event.error_category.value
    return (
        isinstance(event, EMBEDDING_EVENTS),
        event.provider,
        event.model,
        error,
        event.latency_ms,
        input_tokens,
        search_units,
        event.cost,
        span,
        malformed,
        characters,
    )


_Plan = tuple[
    str,  # provider label
    str,  # model label
    Histogram,  # duration
    dict[str, Any],  # its attributes (with the error, on failures)
    Histogram,  # tokens
    dict[str, Any],  # its attributes (with the token type)
    dict[str, Any],  # the counters' attributes
]


class GenAIMetrics:
    """The exporter's instruments, and the queue of calls not yet recorded into them."""

    def __init__(
        self, meter: metrics.Meter, *, latest: bool, label_sets: int = DEFAULT_LABEL_SETS
    ) -> None:
        self.latest = latest
        self.label_sets = label_sets
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of GenAI client operations.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens the provider reported for GenAI client operations.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.embedding_duration = self.duration
        self.embedding_tokens = self.tokens
        if latest:
            self.embedding_duration = meter.create_histogram(
                "gen_ai.client.embeddings.duration",
                unit="s",
                description="Duration of GenAI embeddings operations.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            )
            self.embedding_tokens = meter.create_histogram(
                "gen_ai.client.embeddings.operation.input_tokens",
                unit="{token}",
                description="Input tokens the provider billed for embeddings operations.",
                explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            )
        self.search_units = meter.create_counter(
            "spanledger.rerank.search_units",
            unit="{search_unit}",
            description="Search units the provider reported for rerank calls.",
        )
        self.billable_characters = meter.create_counter(
            "spanledger.embedding.billable_characters",
            unit="{character}",
            description="Input characters the provider reported billing for embedding calls.",
        )
        self.cost = meter.create_counter(
            "spanledger.cost",
            unit="1",
            description="Spend on priced and estimated calls, in the price table's currency.",
        )
        self.unpriced = meter.create_counter(
            "spanledger.cost.unpriced",
            unit="{call}",
            description="Calls whose usage could not be priced (unpriced or unmetered).",
        )
        self.malformed_usage = meter.create_counter(
            "spanledger.usage.malformed",
            unit="{figure}",
            description="Usage figures a provider sent that were not counts (left unreported).",
        )
        self.cited_share = meter.create_histogram(
            "spanledger.attribution.cited_token_share",
            unit="1",
            description="Share of rendered context tokens that the answer cited, per request.",
            explicit_bucket_boundaries_advisory=SHARE_BUCKETS,
        )
        self.context_spend = meter.create_counter(
            "spanledger.attribution.context_spend",
            unit="1",
            description=(
                "Spend on context rendered into prompts, as the model calls' input tokens, "
                "by part (cited, unused), in the price table's currency."
            ),
        )
        self.context_unknown = meter.create_counter(
            "spanledger.attribution.context_spend.unknown",
            unit="{request}",
            description="Requests whose context spend is unknown (never counted as zero).",
        )
        self.label_overflow = meter.create_counter(
            "spanledger.metrics.label_overflow",
            unit="{call}",
            description="Calls recorded under the overflow model label (too many label sets).",
        )
        self._chain_totals: dict[str, int] = {}
        """Chains by outcome status in this process, read when the meter collects."""
        self._chain_lock = _forksafe.lock(self, "_chain_lock")
        meter.create_observable_counter(
            "spanledger.rerank_chain.outcomes",
            callbacks=[self._chain_outcomes],
            unit="{chain}",
            description="Rerank chains by outcome status (ok, degraded, aborted, ...).",
        )
        meter.create_observable_gauge(
            "spanledger.breaker.state",
            callbacks=[_breaker_states],
            unit="{state}",
            description="Each circuit breaker's state: 0 closed, 1 open, 2 half-open.",
        )
        self._attribute_cache: dict[tuple[bool, str, str, str | None, bool], dict[str, Any]] = {}
        self._keyed_attributes: dict[tuple[str, ...], dict[str, Any]] = {}
        self._plans: dict[tuple[bool, str, str, str | None], _Plan] = {}
        """Each recorded (operation, provider, model, error)'s plan, within the label bound."""
        self._sums: dict[tuple[int, int], _Sum] = {}
        """Counter figures of the drain in progress, by counter and label set."""
        self._label_sets: set[tuple[bool, str, str]] = set()
        self._overflow_providers: set[str] = set()
        self._counter_totals: dict[tuple[str, bool, str, str], int] = {}
        self._pending: deque[_Figures] = deque()
        self._drain_lock = _forksafe.lock(self, "_drain_lock")
        self.failures = 0
        self.overflows = 0
        self._logged_failures: set[str] = set()
        _forksafe.after_fork_in_child(self.forget_inherited)
        meter.create_observable_gauge(
            f"spanledger.metrics.pending.{next(_hook_numbers)}",
            callbacks=[self._on_collect],
            description="Reports nothing: its callback records queued calls before a collection.",
        )

    def chain_ended(self, status: str) -> None:
        """Count a chain's outcome (a handful of statuses: bounded labels). The count is a
        total read at collection, so a chain pays a dictionary update, not an instrument's
        record."""
        with self._chain_lock:
            self._chain_totals[status] = self._chain_totals.get(status, 0) + 1

    def context_spent(self, record: AttributionRecord) -> None:
        """Count one request's context spend by part, or that it is unknown (a record from
        before the figure was recorded counts as neither)."""
        cited, unused = record.cited_context_spend, record.unused_context_spend
        if cited is None or unused is None:
            if record.unknown_context_spend is not None:
                self.context_unknown.add(1)
            return
        currency = encodable(record.context_currency or "")
        for part, amount in (("cited", cited), ("unused", unused)):
            value = float(amount)
            if value and self._measured(value):
                self.context_spend.add(
                    value, {names.COST_CURRENCY: currency, names.ATTRIBUTION_CONTEXT_PART: part}
                )

    def _chain_outcomes(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._chain_lock:
            totals = list(self._chain_totals.items())
        return [Observation(count, {names.CHAIN_STATUS: status}) for status, count in totals]

    def take(self, event: Event, span: SpanContext | None) -> None:
        """Queue the call's figures; once the queue is full, record a few, unless a collection
        is recording them already (a call never waits for one)."""
        pending = self._pending
        pending.append(_figures(event, span))
        excess = len(pending) - PENDING_LIMIT
        if excess > 0 and self._drain_lock.acquire(blocking=False):
            try:
                self._record_queued(min(excess, _CALL_PATH_BATCH))
            finally:
                self._drain_lock.release()

    def drain(self) -> None:
        """Record the calls queued now (calls that finish meanwhile wait for the next drain,
        so a drain ends even while calls keep coming)."""
        with self._drain_lock:
            self._record_queued(len(self._pending))

    def forget_inherited(self) -> None:
        """In a forked child: drop the parent's queued calls and chain counts (the locks are
        renewed too)."""
        self._pending.clear()
        self._chain_totals.clear()
        self._sums.clear()

    def _record_queued(self, limit: int) -> None:
        """Record up to ``limit`` queued calls (the drain lock held): histograms per call,
        counters once per label set for the whole batch."""
        pop = self._pending.popleft
        try:
            for _ in range(limit):
                try:
                    figures = pop()
                except IndexError:
                    return
                try:
                    self._record(*figures)
                except Exception as exc:
                    self._count_failure(type(exc).__name__)
        finally:
            self._add_sums()

    def _count_failure(self, error_type: str) -> None:
        """Counted, and logged once per error type without its message."""
        self.failures += 1
        if error_type not in self._logged_failures and len(self._logged_failures) < 64:
            self._logged_failures.add(error_type)
            with contextlib.suppress(Exception):
                _log.warning("metric_record_failed", error_type=error_type)

    @property
    def pending(self) -> int:
        """Calls whose figures are queued and not yet recorded."""
        return len(self._pending)

    def _on_collect(self, options: CallbackOptions) -> Iterable[Observation]:
        self.drain()
        return ()

    def _plan(self, embedding: bool, provider: str, model: str, error: str | None) -> _Plan:
        """How a call of this operation, provider, model and error is recorded: its labels, its
        histograms and their attribute dicts. The provider and model labels are as given while
        the label sets stay within bound, else the overflow label (counted on every such call,
        so an overflowed call's plan is never kept)."""
        key = (embedding, provider, model, error)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        provider, model = encodable(provider), encodable(model)
        kept = (embedding, provider, model) in self._label_sets
        if not kept and len(self._label_sets) < self.label_sets:
            self._label_sets.add((embedding, provider, model))
            kept = True
        if not kept:
            self.overflows += 1
            self.label_overflow.add(1)
            if provider not in self._overflow_providers:
                if len(self._overflow_providers) >= _OVERFLOW_PROVIDERS:
                    provider = OVERFLOW_LABEL
                else:
                    self._overflow_providers.add(provider)
            model = OVERFLOW_LABEL
        plan = (
            provider,
            model,
            self.embedding_duration if embedding else self.duration,
            self._attributes(embedding, provider, model, error, False),
            self.embedding_tokens if embedding else self.tokens,
            self._attributes(embedding, provider, model, None, True),
            self._attributes(embedding, provider, model, None, False),
        )
        if kept and len(self._plans) < _ATTRIBUTE_SETS_KEPT:
            self._plans[key] = plan
        return plan

    def _attributes(
        self, embedding: bool, provider: str, model: str, error: str | None, tokens: bool
    ) -> dict[str, Any]:
        """Low-cardinality metric attributes, built once per distinct combination."""
        key = (embedding, provider, model, error, tokens)
        cached = self._attribute_cache.get(key)
        if cached is None:
            operation = "embeddings" if embedding else "rerank"
            cached = {
                names.GEN_AI_OPERATION_NAME: operation,
                names.GEN_AI_PROVIDER_NAME: provider,
                names.GEN_AI_REQUEST_MODEL: model,
            }
            if error is not None:
                cached[names.ERROR_TYPE] = error
            if tokens and not (self.latest and embedding):
                cached[names.GEN_AI_TOKEN_TYPE] = "input"
            if len(self._attribute_cache) < _ATTRIBUTE_SETS_KEPT:
                self._attribute_cache[key] = cached
        return cached

    def _measured(self, value: object) -> bool:
        """Whether ``value`` may be recorded; if not, it is counted as a failure."""
        if _measurable(value):
            return True
        self._count_failure("value_out_of_range")
        return False

    def _counter_total_fits(self, labels: tuple[str, bool, str, str], amount: int) -> bool:
        """Whether adding ``amount`` keeps the total of the counter (named first in
        ``labels``) for its labels within signed 64-bit (the SDK sums without bound; the
        encoder then fails on every export)."""
        total = self._counter_totals.get(labels, 0) + amount
        if total > _INT64_MAX:
            self._count_failure("counter_total_out_of_range")
            return False
        self._counter_totals[labels] = total
        return True

    def _record(
        self,
        embedding: bool,
        provider: str,
        model: str,
        error: str | None,
        latency_ms: float,
        input_tokens: int | None,
        search_units: int | None,
        cost: CostLine | None,
        span: SpanContext | None,
        malformed: tuple[str, ...] = (),
        characters: int | None = None,
    ) -> None:
        """One call: its histograms now (each value counts), its counter figures summed into
        the drain's ``_sums`` (added once per label set when the drain ends)."""
        context = _exemplar_context(span)
        provider, model, duration, timed, tokens, counted, plain = self._plan(
            embedding, provider, model, error
        )
        if self._measured(latency_ms):
            duration.record(latency_ms / 1000.0, timed, context)
        if input_tokens is not None and self._measured(input_tokens):
            tokens.record(input_tokens, counted, context)
        if (
            search_units is not None
            and self._measured(search_units)
            and self._counter_total_fits(("units", embedding, provider, model), search_units)
        ):
            self._sum(self.search_units, search_units, plain, context)
        if (
            characters is not None
            and self._measured(characters)
            and self._counter_total_fits(("characters", embedding, provider, model), characters)
        ):
            self._sum(self.billable_characters, characters, plain, context)
        if cost is not None:
            self._record_cost(provider, model, cost, context)
        for figure in malformed:
            self._sum(
                self.malformed_usage,
                1,
                self._keyed(("malformed", provider, model, figure), _malformed_labels),
                context,
            )

    def _record_cost(self, provider: str, model: str, line: CostLine, context: Context) -> None:
        if line.status in CHARGED_STATUSES and line.amount is not None:
            amount = float(line.amount)
            if not self._measured(amount):
                return
            key: tuple[str, ...] = ("cost", provider, model, line.currency or "", line.status.value)
            self._sum(self.cost, amount, self._keyed(key, _cost_labels), context)
        elif line.status in NOT_PRICED_STATUSES:
            reason = line.code.value if line.code is not None else line.status.value
            key = ("unpriced", provider, model, reason)
            self._sum(self.unpriced, 1, self._keyed(key, _unpriced_labels), context)

    def _keyed(
        self, key: tuple[str, ...], build: Callable[[tuple[str, ...]], dict[str, Any]]
    ) -> dict[str, Any]:
        """The counter attributes for ``key``, built once per distinct key (bounded)."""
        cached = self._keyed_attributes.get(key)
        if cached is None:
            cached = build(key)
            if len(self._keyed_attributes) < _ATTRIBUTE_SETS_KEPT:
                self._keyed_attributes[key] = cached
        return cached

    def _sum(
        self, counter: Counter, amount: float, attributes: dict[str, Any], context: Context
    ) -> None:
        """Add one call's figure to its label set's sum in this drain; the last call with a
        span to point at is the one the exemplar will show."""
        key = (id(counter), id(attributes))
        found = self._sums.get(key)
        if found is None:
            self._sums[key] = _Sum(counter, attributes, amount, context)
            return
        found.total += amount
        if context is not _NO_EXEMPLAR:
            found.exemplar_value, found.exemplar_context = amount, context

    def _add_sums(self) -> None:
        """Hand each label set's summed figures to its counter: the exemplar call's own figure
        with its span, and the rest with none (so the exemplar is a real call's)."""
        sums, self._sums = self._sums, {}
        for summed in sums.values():
            try:
                summed.add()
            except Exception as exc:
                self._count_failure(type(exc).__name__)


class _Sum:
    """A counter's figures for one label set over one drain."""

    __slots__ = ("attributes", "counter", "exemplar_context", "exemplar_value", "total")

    def __init__(
        self, counter: Counter, attributes: dict[str, Any], amount: float, context: Context
    ) -> None:
        self.counter = counter
        self.attributes = attributes
        self.total = amount
        self.exemplar_value = amount
        self.exemplar_context = context

    def add(self) -> None:
        if self.exemplar_context is _NO_EXEMPLAR:
            self.counter.add(self.total, self.attributes, _NO_EXEMPLAR)
            return
        rest = self.total - self.exemplar_value
        if rest:
            self.counter.add(rest, self.attributes, _NO_EXEMPLAR)
        self.counter.add(self.exemplar_value, self.attributes, self.exemplar_context)


_NO_EXEMPLAR = trace.set_span_in_context(INVALID_SPAN)
"""The context of a figure that has no call's span to point at: never the collecting thread's
current span (an empty context would mean that one to the SDK)."""


def _exemplar_context(span: SpanContext | None) -> Context:
    """The context that makes an exemplar point at the call's span (``_NO_EXEMPLAR`` when
    there is no span to point at)."""
    if span is None or not span.is_valid:
        return _NO_EXEMPLAR
    return trace.set_span_in_context(NonRecordingSpan(span), _EMPTY)


_EMPTY = Context()
"""The context an exemplar's span is set in: the collecting thread's current one has nothing
the exemplar needs, and copying it would cost a copy per call."""


def _cost_labels(key: tuple[str, ...]) -> dict[str, Any]:
    _, provider, model, currency, status = key
    return {
        names.GEN_AI_PROVIDER_NAME: provider,
        names.GEN_AI_REQUEST_MODEL: model,
        names.COST_CURRENCY: currency,
        names.COST_STATUS: status,
    }


def _unpriced_labels(key: tuple[str, ...]) -> dict[str, Any]:
    _, provider, model, reason = key
    return {
        names.GEN_AI_PROVIDER_NAME: provider,
        names.GEN_AI_REQUEST_MODEL: model,
        names.COST_REASON: reason,
    }


def _malformed_labels(key: tuple[str, ...]) -> dict[str, Any]:
    _, provider, model, figure = key
    return {
        names.GEN_AI_PROVIDER_NAME: provider,
        names.GEN_AI_REQUEST_MODEL: model,
        names.USAGE_FIGURE: figure,
    }
