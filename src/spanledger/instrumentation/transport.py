"""An httpx transport that records the known vendors' embedding and rerank requests.

```python
client = httpx.Client(transport=spanledger.instrumentation.transport())
```

Each POST to a recognised endpoint (``spanledger.capture.vendors``) is one event: the
request's JSON gives the model and the input counts, and the response body gives the figures by
the same vendor rules as ``spanledger.providers``. A chat request made inside an open request is
read for the request's context (what its prompt rendered, what its answer cited;
``spanledger.capture.chat``) and records no event. Everything else passes through untouched. A
response read is read whole before it is handed on, as a fresh response with the same status,
headers and raw bytes, so the caller reads it exactly as before; a streamed read of such a
response gets the bytes in one piece (a streamed chat answer is left unread).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from spanledger.capture.chat import asend_read, might_be_chat_call, send_read
from spanledger.capture.http import asend_recorded, send_recorded
from spanledger.capture.vendors import checked_vendors

__all__ = ["AsyncRecordingTransport", "RecordingTransport", "async_transport", "transport"]


class RecordingTransport(httpx.BaseTransport):
    """Records vendor embedding and rerank requests sent through ``inner``."""

    def __init__(
        self, inner: httpx.BaseTransport | None = None, *, vendors: Mapping[str, str] | None = None
    ) -> None:
        self._inner = inner if inner is not None else httpx.HTTPTransport()
        self._vendors = checked_vendors(vendors)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the wrapped transport; a vendor's embedding or rerank call is recorded,
        a chat call inside an open request is read for its context."""
        if might_be_chat_call(request.method, request.url.path):
            return send_read(self._inner.handle_request, request)
        return send_recorded(self._inner.handle_request, request, self._vendors)

    def close(self) -> None:
        """Close the wrapped transport."""
        self._inner.close()


class AsyncRecordingTransport(httpx.AsyncBaseTransport):
    """The asyncio twin of ``RecordingTransport``."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        vendors: Mapping[str, str] | None = None,
    ) -> None:
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()
        self._vendors = checked_vendors(vendors)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send through the wrapped transport; a vendor's embedding or rerank call is recorded,
        a chat call inside an open request is read for its context."""
        if might_be_chat_call(request.method, request.url.path):
            return await asend_read(self._inner.handle_async_request, request)
        return await asend_recorded(self._inner.handle_async_request, request, self._vendors)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self._inner.aclose()


def transport(
    inner: httpx.BaseTransport | None = None, *, vendors: Mapping[str, str] | None = None
) -> RecordingTransport:
    """A transport for ``httpx.Client`` recording vendor calls made through ``inner`` (a plain
    ``httpx.HTTPTransport()`` by default). ``vendors`` maps a host or URL prefix to a vendor
    name (``openai``, ``cohere``, ``jina``, ``tei``, ``voyageai``) where guessing is not enough:
    a self-hosted TEI, a proxy, an OpenAI-compatible server."""
    return RecordingTransport(inner, vendors=vendors)


def async_transport(
    inner: httpx.AsyncBaseTransport | None = None, *, vendors: Mapping[str, str] | None = None
) -> AsyncRecordingTransport:
    """``transport`` for ``httpx.AsyncClient``."""
    return AsyncRecordingTransport(inner, vendors=vendors)
