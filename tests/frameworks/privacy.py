"""The framework suites' one check of a recorded run: recorded, and private.

A framework's work is done bare, then again under the switch with a recorder keeping its events;
the recorded run must give the framework the same result, make one event per HTTP call the
stand-in saw, and leave none of the caller's private text (the inputs' sentinel, the keys) in any
event or any log line. ``tests/older_sdks`` uses it too, from its own venv: it needs only
pytest, spanledger and its stand-in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

import spanledger
from spanledger import Event, Recorder
from spanledger.testing import StandIn


class Kept:
    """A sink keeping every event it is handed."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


def _as_is(result: Any) -> Any:
    return result


class Recording:
    """Framework work against ``standin``, recorded and checked private: no text of
    ``private`` in any event (its JSON or its repr) nor in any line logged during the test,
    spanledger's debug lines included."""

    def __init__(
        self, standin: StandIn, caplog: pytest.LogCaptureFixture, private: Sequence[str]
    ) -> None:
        assert private, "name the texts and keys that must stay private"
        self.standin = standin
        self.private = tuple(private)
        self._caplog = caplog
        caplog.set_level(logging.DEBUG, logger="spanledger")

    @contextmanager
    def switched(self, switch_on: Callable[[], object]) -> Iterator[Kept]:
        """The switch turned on by ``switch_on()`` and a recorder keeping the events, for the
        block; everything is uninstrumented after it."""
        kept = Kept()
        switch_on()
        try:
            with spanledger.use(Recorder([kept])):
                yield kept
        finally:
            spanledger.uninstrument()

    def run(
        self,
        work: Callable[[], Any],
        switch_on: Callable[[], object],
        *,
        comparable: Callable[[Any], Any] = _as_is,
    ) -> tuple[Any, list[Event]]:
        """``work`` bare, then recorded under ``switch_on()``: the recorded result (the bare
        one, as ``comparable`` sees them) and the events it made, one per HTTP call, each
        private."""
        self.standin.reset()
        bare = work()
        assert self.standin.requests, "the framework never reached the stand-in"
        self.standin.reset()
        with self.switched(switch_on) as kept:
            result = work()
        assert comparable(result) == comparable(bare)
        assert len(kept.events) == len(self.standin.requests)
        self.assert_private(kept.events)
        return result, kept.events

    def assert_private(self, events: Sequence[Event]) -> None:
        """No private text in any of ``events`` nor in any line logged so far."""
        for event in events:
            for text in (event.model_dump_json(), repr(event)):
                for private in self.private:
                    assert private not in text
        logged = self._caplog.text
        for private in self.private:
            assert private not in logged
