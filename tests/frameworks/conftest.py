"""Shared by the framework suites: the stand-in, the recorded-and-private check, the token rule."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from spanledger.testing import StandIn
from tests.frameworks.privacy import Recording


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def recording(
    standin: StandIn, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> Recording:
    """Framework work recorded and checked private; what is private is the test module's
    ``PRIVATE`` (its inputs' sentinel and its keys)."""
    return Recording(standin, caplog, request.module.PRIVATE)


def tokens(text: str) -> int:
    """The stand-in's token count for one text."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))
