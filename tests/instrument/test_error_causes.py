"""What a failed SDK call is named after, and whether it may have been billed."""

from __future__ import annotations

import asyncio
import http.client

import aiohttp
import pytest
import requests
import urllib3.exceptions

from spanledger import ErrorCategory
from spanledger.capture.failures import describe
from spanledger.estimates import ABANDONED_ERROR_TYPES


def chained(outer: BaseException, inner: BaseException) -> BaseException:
    """``outer`` raised while handling ``inner``, as the HTTP libraries do."""
    try:
        try:
            raise inner
        except BaseException as caught:
            raise outer from caught
    except BaseException as raised:
        return raised


def requests_failure(reason: BaseException) -> BaseException:
    """``requests``' broad ConnectionError over urllib3's MaxRetryError, as it raises them."""
    retried = urllib3.exceptions.MaxRetryError(None, "/v1/embeddings", reason)  # type: ignore[arg-type]
    return chained(requests.exceptions.ConnectionError(retried), retried)


@pytest.mark.parametrize(
    ("exc", "name", "billed"),
    [
        (
            requests_failure(
                urllib3.exceptions.ProtocolError(
                    "Connection aborted.", http.client.RemoteDisconnected("closed")
                )
            ),
            "ProtocolError",
            True,
        ),
        (
            requests_failure(urllib3.exceptions.NewConnectionError(None, "refused")),  # type: ignore[arg-type]
            "ConnectionError",
            False,
        ),
        (
            chained(requests.exceptions.ConnectionError(), ConnectionResetError()),
            "ConnectionResetError",
            True,
        ),
        (aiohttp.ServerDisconnectedError(), "ServerDisconnectedError", True),
        (
            aiohttp.ClientConnectorError(
                aiohttp.client_reqrep.ConnectionKey("h", 1, False, True, None, None, None),
                OSError(111, "refused"),
            ),
            "ClientConnectorError",
            False,
        ),
        (chained(TimeoutError(), asyncio.CancelledError()), "TimeoutError", False),
    ],
)
def test_a_failure_after_sending_is_told_from_a_refused_connection(
    exc: BaseException, name: str, billed: bool
) -> None:
    error = describe(exc)

    assert error.category is ErrorCategory.UNAVAILABLE
    assert error.error_type == name
    assert (name in ABANDONED_ERROR_TYPES) is billed
