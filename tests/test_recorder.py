"""The recorder: the processor pipeline, sink fan-out and isolation, the current recorder, the
call-scope hook, and the request scopes built on it."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from structlog.testing import capture_logs

import spanledger
from spanledger import (
    CallStarted,
    EmbeddingEvent,
    EmbeddingUsage,
    Recorder,
    current_request,
    get_recorder,
    request,
    set_default_recorder,
    use,
)
from spanledger.attribution import RequestScope
from spanledger.events import Event
from spanledger.recorder import (
    CallScope,
    Processor,
    current_scope,
    enter_scope,
    exit_scope,
)

SENTINEL = "SENTINEL-7f3a"
STARTED_AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def make_embedding_event(**overrides: Any) -> EmbeddingEvent:
    fields: dict[str, Any] = {
        "call_id": "call-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
        "latency_ms": 5.0,
        "input_count": 2,
        "usage": EmbeddingUsage(input_tokens=10),
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def make_call_started(**overrides: Any) -> CallStarted:
    fields: dict[str, Any] = {
        "call_id": "call-1",
        "operation": "embeddings",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
    }
    fields.update(overrides)
    return CallStarted(**fields)


class ListSink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


class Boom:
    """A sink whose emit always fails, with a secret in the message."""

    def __init__(self, exc_type: type[Exception] = RuntimeError) -> None:
        self.exc_type = exc_type
        self.calls = 0

    def emit(self, event: Event) -> None:
        self.calls += 1
        raise self.exc_type(f"failed writing {SENTINEL}")


class LifecycleSink(ListSink):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0
        self.shutdowns = 0

    def flush(self) -> None:
        self.flushes += 1

    def shutdown(self) -> None:
        self.shutdowns += 1


class FlushOnlySink(ListSink):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


class BadFlushSink(ListSink):
    def flush(self) -> None:
        raise OSError(f"disk full {SENTINEL}")

    def shutdown(self) -> None:
        raise OSError(f"cannot close {SENTINEL}")


class StartSink(ListSink):
    def __init__(self) -> None:
        super().__init__()
        self.started: list[CallStarted] = []

    def call_started(self, started: CallStarted) -> None:
        self.started.append(started)


class BadStartSink(ListSink):
    def call_started(self, started: CallStarted) -> None:
        raise RuntimeError(f"span exporter down {SENTINEL}")


def sink_failed_logs(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == "sink_failed"]


@pytest.fixture(autouse=True)
def _no_default_recorder() -> Iterator[None]:
    set_default_recorder(None)
    yield
    set_default_recorder(None)


# --- fan-out and isolation --------------------------------------------------------------


def test_sinks_that_heard_the_start_end_first_in_reverse_then_the_others() -> None:
    heard: list[str] = []

    class StartAware:
        def __init__(self, name: str) -> None:
            self.name = name

        def call_started(self, started: spanledger.CallStarted) -> None:
            heard.append(f"start {self.name}")

        def emit(self, event: Event) -> None:
            heard.append(f"end {self.name}")

    recorder = Recorder(
        [
            lambda event: heard.append("plain 1"),
            StartAware("a"),
            lambda event: heard.append("plain 2"),
            StartAware("b"),
        ]
    )
    event = make_embedding_event()
    recorder.call_started(
        spanledger.CallStarted(
            call_id=event.call_id,
            operation="embeddings",
            provider=event.provider,
            model=event.model,
            started_at=event.started_at,
        )
    )
    recorder.emit(event)

    assert heard == ["start a", "start b", "end b", "end a", "plain 1", "plain 2"]


def test_recorder_delivers_to_object_and_callable_sinks() -> None:
    obj = ListSink()
    received: list[Event] = []
    recorder = Recorder(sinks=[obj, received.append])
    event = make_embedding_event()
    recorder.emit(event)
    assert obj.events == [event]
    assert received == [event]
    assert recorder.sinks[0] is obj
    stats = recorder.stats
    assert [s.delivered for s in stats.values()] == [1, 1]
    names = list(stats)
    assert names[0] == "0:ListSink"
    assert names[1].startswith("1:")


def test_recorder_refuses_a_sink_that_cannot_receive() -> None:
    with pytest.raises(TypeError):
        Recorder(sinks=[cast(Any, object())])


def test_failing_sink_is_isolated_and_counted() -> None:
    before, after = ListSink(), ListSink()
    boom = Boom()
    recorder = Recorder(sinks=[before, boom, after])
    events = [make_embedding_event(call_id=f"c{i}") for i in range(3)]
    for event in events:
        recorder.emit(event)  # must not raise
    assert before.events == events
    assert after.events == events
    assert boom.calls == 3
    stats = recorder.stats
    assert set(stats) == {"0:ListSink", "1:Boom", "2:ListSink"}
    assert stats["1:Boom"].failed == 3
    assert stats["1:Boom"].delivered == 0
    assert stats["1:Boom"].failures_by_type == {"RuntimeError": 3}
    assert stats["0:ListSink"].delivered == 3
    assert stats["2:ListSink"].failed == 0


def test_failing_callable_sink_is_isolated() -> None:
    def broken(event: Event) -> None:
        raise ValueError(SENTINEL)

    good = ListSink()
    recorder = Recorder(sinks=[broken, good])
    recorder.emit(make_embedding_event())
    assert len(good.events) == 1
    failed = [s for name, s in recorder.stats.items() if name.startswith("0:")]
    assert [s.failed for s in failed] == [1]


def test_stats_is_a_snapshot() -> None:
    recorder = Recorder(sinks=[Boom()])
    snapshot = recorder.stats
    snapshot["0:Boom"].failed = 99
    snapshot["0:Boom"].failures_by_type["X"] = 1
    recorder.emit(make_embedding_event())
    assert recorder.stats["0:Boom"].failed == 1
    assert recorder.stats["0:Boom"].failures_by_type == {"RuntimeError": 1}


def test_sink_failure_logged_once_per_sink_and_error_type_without_message() -> None:
    boom = Boom()
    other = Boom(KeyError)
    recorder = Recorder(sinks=[boom, other])
    with capture_logs() as logs:
        for _ in range(10):
            recorder.emit(make_embedding_event())
    warnings = sink_failed_logs(logs)
    assert len(warnings) == 2
    assert {(w["sink"], w["error_type"]) for w in warnings} == {
        ("0:Boom", "RuntimeError"),
        ("1:Boom", "KeyError"),
    }
    assert all(w["log_level"] == "warning" for w in warnings)
    assert all(w["stage"] == "emit" for w in warnings)
    assert SENTINEL not in repr(logs)
    assert recorder.stats["0:Boom"].failed == 10


def test_new_error_type_from_same_sink_is_logged_again() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.n = 0

        def emit(self, event: Event) -> None:
            self.n += 1
            if self.n % 2:
                raise RuntimeError(SENTINEL)
            raise TimeoutError(SENTINEL)

    recorder = Recorder(sinks=[Flaky()])
    with capture_logs() as logs:
        for _ in range(6):
            recorder.emit(make_embedding_event())
    warnings = sink_failed_logs(logs)
    assert sorted(w["error_type"] for w in warnings) == ["RuntimeError", "TimeoutError"]
    assert recorder.stats["0:Flaky"].failures_by_type == {"RuntimeError": 3, "TimeoutError": 3}
    assert SENTINEL not in repr(logs)


def test_flush_and_shutdown_reach_sinks_that_have_them() -> None:
    lifecycle, flush_only, plain = LifecycleSink(), FlushOnlySink(), ListSink()
    recorder = Recorder(sinks=[lifecycle, flush_only, plain])
    recorder.flush()
    assert (lifecycle.flushes, lifecycle.shutdowns, flush_only.flushes) == (1, 0, 1)
    recorder.shutdown()
    assert lifecycle.shutdowns == 1
    assert flush_only.flushes == 2  # a sink without shutdown() is at least flushed
    assert all(s.failed == 0 for s in recorder.stats.values())


def test_recorder_context_manager_shuts_down() -> None:
    sink = LifecycleSink()
    with Recorder(sinks=[sink]) as recorder:
        recorder.emit(make_embedding_event())
    assert sink.shutdowns == 1
    assert len(sink.events) == 1


def test_failing_flush_and_shutdown_are_isolated() -> None:
    bad, good = BadFlushSink(), LifecycleSink()
    recorder = Recorder(sinks=[bad, good])
    with capture_logs() as logs:
        recorder.flush()
        recorder.flush()
        recorder.shutdown()
    assert good.flushes == 2
    assert good.shutdowns == 1
    stats = recorder.stats["0:BadFlushSink"]
    assert stats.failed == 3
    assert stats.failures_by_type == {"OSError": 3}
    warnings = sink_failed_logs(logs)
    assert len(warnings) == 1
    assert warnings[0]["stage"] == "flush"
    assert SENTINEL not in repr(logs)


def test_call_started_reaches_start_aware_sinks_and_failures_are_isolated() -> None:
    plain, bad, good = ListSink(), BadStartSink(), StartSink()
    recorder = Recorder(sinks=[plain, bad, good])
    started = make_call_started()
    with capture_logs() as logs:
        recorder.call_started(started)  # must not raise
    assert good.started == [started]
    assert plain.events == []
    assert recorder.stats["1:BadStartSink"].failed == 1
    warnings = sink_failed_logs(logs)
    assert [(w["sink"], w["stage"]) for w in warnings] == [("1:BadStartSink", "call_started")]
    assert SENTINEL not in repr(logs)


# --- the current recorder ---------------------------------------------------------------


def test_get_recorder_is_a_noop_when_none_is_set() -> None:
    def probe() -> Recorder:
        return get_recorder()

    recorder = contextvars.Context().run(probe)
    assert recorder.sinks == ()
    assert recorder.active is False
    recorder.emit(make_embedding_event())  # goes nowhere, raises nothing
    recorder.call_started(make_call_started())
    recorder.flush()
    assert recorder.stats == {}


def test_noop_recorder_is_active_inside_a_request_scope() -> None:
    def probe() -> tuple[bool, list[Event]]:
        recorder = get_recorder()
        event = make_embedding_event()
        with request("turn-1") as scope:
            active = recorder.active
            recorder.emit(event)
        return active, scope.events

    active, events = contextvars.Context().run(probe)
    assert active is True
    assert len(events) == 1


def test_recorder_with_sinks_is_active() -> None:
    assert Recorder(sinks=[ListSink()]).active is True
    assert Recorder().active is False


def test_use_sets_the_current_recorder() -> None:
    recorder = Recorder()

    def probe() -> bool:
        spanledger.use(recorder)
        return spanledger.get_recorder() is recorder

    assert contextvars.copy_context().run(probe) is True
    assert get_recorder() is not recorder


def test_use_as_context_manager_restores_previous_nested() -> None:
    outer, inner = Recorder(), Recorder()
    original = get_recorder()
    with use(outer) as entered:
        assert entered is outer
        assert get_recorder() is outer
        with use(inner):
            assert get_recorder() is inner
        assert get_recorder() is outer
    assert get_recorder() is original


def test_use_restores_previous_on_exception() -> None:
    recorder = Recorder()
    original = get_recorder()
    with pytest.raises(KeyError), use(recorder):
        raise KeyError("x")
    assert get_recorder() is original


def test_set_default_recorder_is_the_process_fallback() -> None:
    default, local = Recorder(), Recorder()
    set_default_recorder(default)
    assert contextvars.Context().run(get_recorder) is default
    with use(local):
        assert get_recorder() is local
    assert get_recorder() is default

    seen: list[Recorder] = []
    thread = threading.Thread(target=lambda: seen.append(get_recorder()))
    thread.start()
    thread.join()
    assert seen == [default]

    set_default_recorder(None)
    assert contextvars.Context().run(get_recorder) is not default
    assert contextvars.Context().run(get_recorder).sinks == ()


async def test_current_recorder_is_visible_in_asyncio_tasks() -> None:
    recorder = Recorder()

    async def probe() -> Recorder:
        await asyncio.sleep(0)
        return get_recorder()

    with use(recorder):
        tasks = [asyncio.create_task(probe()) for _ in range(5)]
        results = await asyncio.gather(*tasks)
    assert all(r is recorder for r in results)
    assert get_recorder() is not recorder


async def test_use_inside_one_task_does_not_leak_into_another() -> None:
    shared, private = Recorder(), Recorder()
    switched = asyncio.Event()

    async def switcher() -> Recorder:
        with use(private):
            switched.set()
            await asyncio.sleep(0.01)
            return get_recorder()

    async def watcher() -> Recorder:
        await switched.wait()
        return get_recorder()

    with use(shared):
        a, b = await asyncio.gather(asyncio.create_task(switcher()), watcher())
    assert a is private
    assert b is shared


def test_current_recorder_is_visible_in_threads_with_copied_context() -> None:
    recorder = Recorder()
    seen: list[Recorder] = []
    with use(recorder):
        context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(lambda: seen.append(get_recorder()),))
    thread.start()
    thread.join()
    assert seen == [recorder]


# --- request scopes ---------------------------------------------------------------------


def test_request_scope_collects_events_emitted_inside() -> None:
    sink = ListSink()
    recorder = Recorder(sinks=[sink])
    before = make_embedding_event(call_id="before")
    inside = make_embedding_event(call_id="inside")
    after = make_embedding_event(call_id="after")
    recorder.emit(before)
    with spanledger.request("turn-42") as scope:
        assert scope.request_id == "turn-42"
        assert current_request() is scope
        recorder.emit(inside)
    recorder.emit(after)
    assert current_request() is None
    assert scope.events == [inside]
    assert sink.events == [before, inside, after]


def test_request_scope_events_is_a_copy() -> None:
    recorder = Recorder()
    with request("turn-1") as scope:
        recorder.emit(make_embedding_event())
        events = scope.events
        events.clear()
        assert len(scope.events) == 1
    assert "events=1" in repr(scope)


def test_request_scope_requires_an_id() -> None:
    with pytest.raises(ValueError, match="request_id"), request(""):
        pass
    assert current_request() is None


def test_nested_request_scopes_route_to_the_innermost() -> None:
    recorder = Recorder()
    first, second, third = (make_embedding_event(call_id=c) for c in ("1", "2", "3"))
    with request("outer") as outer:
        recorder.emit(first)
        with request("inner") as inner:
            assert current_request() is inner
            recorder.emit(second)
        assert current_request() is outer
        recorder.emit(third)
    assert inner.events == [second]
    assert outer.events == [first, third]


async def test_request_scopes_are_isolated_across_concurrent_tasks() -> None:
    recorder = Recorder()

    async def serve(n: int) -> tuple[str, list[str]]:
        with request(f"turn-{n}") as scope:
            for j in range(5):
                await asyncio.sleep(0)
                assert current_request() is scope
                recorder.emit(make_embedding_event(call_id=f"{n}-{j}"))
        return scope.request_id, [e.call_id for e in scope.events]

    results = await asyncio.gather(*(serve(n) for n in range(8)))
    for n, (request_id, call_ids) in enumerate(results):
        assert request_id == f"turn-{n}"
        assert call_ids == [f"{n}-{j}" for j in range(5)]
    assert current_request() is None


def test_request_scope_is_thread_safe_with_copied_context() -> None:
    recorder = Recorder()
    event = make_embedding_event()

    def burst() -> None:
        for _ in range(200):
            recorder.emit(event)

    with request("turn-threads") as scope:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(burst,)) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(scope.events) == 800


# --- processors -----------------------------------------------------------------------------


class Tag:
    """A processor that appends its name to the event's model, to show order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[Event] = []

    def process(self, event: Event) -> Event:
        self.seen.append(event)
        return event.model_copy(update={"model": event.model + self.name})


class Raises:
    """A processor that always raises, with a secret in the message."""

    def __init__(self, exc_type: type[Exception] = RuntimeError) -> None:
        self.exc_type = exc_type

    def process(self, event: Event) -> Event:
        raise self.exc_type(f"processing {SENTINEL}")


def processor_failed_logs(
    logs: list[MutableMapping[str, Any]],
) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry.get("event") == "processor_failed"]


def test_processors_run_in_order_before_every_sink_and_the_scope() -> None:
    sink = ListSink()
    first, second = Tag("a"), Tag("b")
    recorder = Recorder([sink], processors=[first, second])
    assert recorder.processors == (first, second)
    with request("turn") as scope:
        recorder.emit(make_embedding_event(model="m-"))
    (delivered,) = sink.events
    assert delivered.model == "m-ab"
    assert scope.events == [delivered]
    assert second.seen[0].model == "m-a"


def test_without_processors_sinks_get_the_very_event_emitted() -> None:
    sink = ListSink()
    event = make_embedding_event()
    Recorder([sink]).emit(event)
    assert sink.events[0] is event


def test_a_failing_processor_is_skipped_counted_and_logged_once_per_error_type() -> None:
    sink = ListSink()
    after = Tag("z")
    recorder = Recorder([sink], processors=[Raises(), Raises(KeyError), after])
    with capture_logs() as logs:
        for _ in range(5):
            recorder.emit(make_embedding_event(model="m-"))
    assert [event.model for event in sink.events] == ["m-z"] * 5  # the event went on
    assert [event.model for event in after.seen] == ["m-"] * 5
    assert recorder.stats["0:ListSink"].delivered == 5
    stats = recorder.processor_stats
    assert stats["0:Raises"].failures_by_type == {"RuntimeError": 5}
    assert stats["1:Raises"].failures_by_type == {"KeyError": 5}
    assert stats["2:Tag"].failed == 0
    warnings = processor_failed_logs(logs)
    assert {(w["processor"], w["error_type"]) for w in warnings} == {
        ("0:Raises", "RuntimeError"),
        ("1:Raises", "KeyError"),
    }
    assert len(warnings) == 2
    assert SENTINEL not in repr(logs)
    assert recorder.pricing_failures == 0  # none of them prices


def test_a_processor_that_returns_no_event_is_isolated() -> None:
    class Forgets:
        def process(self, event: Event) -> Event:
            return cast(Event, None)

    sink = ListSink()
    event = make_embedding_event()
    recorder = Recorder([sink], processors=[Forgets()])
    recorder.emit(event)
    assert sink.events == [event]
    assert recorder.processor_stats["0:Forgets"].failures_by_type == {"TypeError": 1}


def test_processor_stats_is_a_snapshot() -> None:
    recorder = Recorder(processors=[Raises()])
    recorder.emit(make_embedding_event())
    snapshot = recorder.processor_stats
    recorder.emit(make_embedding_event())
    assert snapshot["0:Raises"].failed == 1
    assert recorder.processor_stats["0:Raises"].failed == 2


def test_recorder_refuses_a_processor_that_cannot_process() -> None:
    with pytest.raises(TypeError, match="process"):
        Recorder(processors=[cast(Processor, object())])


# --- the call-scope hook --------------------------------------------------------------------


class Collector:
    """The smallest call scope: an id and a list."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.events: list[Event] = []

    def add(self, event: Event) -> None:
        self.events.append(event)


def test_any_call_scope_receives_the_events_emitted_while_it_is_open() -> None:
    recorder = Recorder()
    scope: CallScope = Collector("job-7")
    assert not recorder.active
    token = enter_scope(scope)
    try:
        assert current_scope() is scope
        assert recorder.active
        assert spanledger.current_request() is None  # open, but not a request scope
        recorder.emit(make_embedding_event())
    finally:
        exit_scope(token)
    assert current_scope() is None
    recorder.emit(make_embedding_event())
    assert len(cast(Collector, scope).events) == 1


def test_exit_scope_restores_the_enclosing_scope() -> None:
    with request("outer") as outer:
        token = enter_scope(Collector("inner"))
        exit_scope(token)
        assert current_scope() is outer
        assert current_request() is outer


def test_current_scope_is_the_context_variables_own_get() -> None:
    """Every recorded call reads it: no wrapper frame on the hot path."""
    assert isinstance(getattr(current_scope, "__self__", None), contextvars.ContextVar)


def test_a_scope_that_raises_never_fails_the_call() -> None:
    class Broken(Collector):
        def add(self, event: Event) -> None:
            raise RuntimeError(SENTINEL)

    sink = ListSink()
    recorder = Recorder([sink])
    token = enter_scope(Broken("b"))
    try:
        with capture_logs() as logs:
            recorder.emit(make_embedding_event())
            recorder.emit(make_embedding_event())
    finally:
        exit_scope(token)
    assert len(sink.events) == 2
    assert [entry["error_type"] for entry in logs if entry["event"] == "scope_failed"] == [
        "RuntimeError"
    ]
    assert SENTINEL not in repr(logs)


def test_request_scopes_live_with_attribution() -> None:
    assert spanledger.RequestScope is RequestScope
    assert spanledger.request is spanledger.attribution.request
    assert spanledger.current_request is spanledger.attribution.current_request
    with request("r") as scope:
        assert isinstance(scope, RequestScope)
