"""Shared fixtures of the end-to-end tests against real backends.

A backend that is not installed skips its tests, except where ``SPANLEDGER_REQUIRE_E2E=1``
(as in CI): there a missing backend fails them, so a green run can't silently test nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NoReturn

import pytest

from .phoenix_backend import PhoenixServer, PhoenixStartupError, find_phoenix_binary

REQUIRE_E2E_ENV = "SPANLEDGER_REQUIRE_E2E"


def require_backend(reason: str) -> NoReturn:
    """Fail when ``SPANLEDGER_REQUIRE_E2E=1``, else skip: the one way an e2e test is skipped."""
    if os.environ.get(REQUIRE_E2E_ENV) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def phoenix() -> Iterator[PhoenixServer]:
    """One Arize Phoenix server on 127.0.0.1 for the whole session (startup takes seconds)."""
    binary = find_phoenix_binary()
    if binary is None:
        require_backend("Arize Phoenix not installed: run .ci/install-phoenix.sh")
    server = PhoenixServer(binary)
    startup_error: str | None = None
    try:
        server.start()
    except PhoenixStartupError as exc:
        startup_error = str(exc)  # has the server's log tail
    if startup_error is not None:
        pytest.fail(startup_error, pytrace=False)
    try:
        yield server
    finally:
        server.stop()
