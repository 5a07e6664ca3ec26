"""Shared by the framework suites: the stand-in, a sink that keeps events, the token rule."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from spanledger import Event
from spanledger.testing import StandIn


class Kept:
    """A sink keeping every event it is handed."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


def tokens(text: str) -> int:
    """The stand-in's token count for one text."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))
