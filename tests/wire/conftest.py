from __future__ import annotations

from collections.abc import Iterator

import pytest

from spanledger.testing import StandIn


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server
