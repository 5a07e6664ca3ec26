"""Instrument existing embedding and rerank calls: SDK clients, your own httpx traffic, any code.

- ``spanledger.instrument(client)`` / ``uninstrument(client)``: the official ``openai``,
  ``cohere`` (v2) and ``voyageai`` clients, sync and async, one client at a time (a copy made
  with ``client.with_options(...)`` is a new, uninstrumented client), and the other libraries
  of ``spanledger.integrations``.
- ``spanledger.instrument()`` / ``uninstrument()``: the process-wide switch, for clients a
  framework builds where you cannot reach them: every client of those SDKs records, made before
  the switch or after (copies too); ``instrument(sdks=["cohere"])`` names the SDKs. A library
  outside the versions the tests cover is left alone with a warning, never an exception;
  ``sdk_status()`` says where each library stands.
- ``transport()`` / ``async_transport()``: an httpx transport that records requests to the
  known vendors' embedding and rerank endpoints.
- ``record_embedding(...)`` / ``record_rerank(...)``: a block around any other call.

This package is the switch and the public API. What it records each library with is in
``spanledger.integrations`` (one package per library, each declaring what the switch patches),
built on the machinery of ``spanledger.capture``.

Each HTTP request to a provider is one event through the current recorder, with the same
guarantees as ``spanledger.providers``. A call the SDK retries is one event per attempt (a
retried 429 stays visible, and the ledger can price every attempt), each with its own
``call_id``, the same ``request_id``, and one ``logical_call_id`` shared by the attempts;
exporters show the call as one span with every attempt on it.

Figures come from the provider's raw response body, never from an SDK's typed result, which can
hide a bad figure (Cohere's SDK turns ``search_units: 1`` into ``1.0`` and an absent figure into
``None``; OpenAI's keeps ``"abc"`` as a token count). For OpenAI and Cohere, hooks on the SDK's
own httpx client see every attempt, and the figures are read from the JSON the SDK decodes from
the body, at the moment it decodes it (or from the body itself, when the SDK defers decoding).
For Voyage, whose SDK uses ``requests`` / ``aiohttp``, its requestor is wrapped and the JSON it
has just decoded is read before the SDK touches it. A missing or malformed figure is not
reported. When the SDK itself cannot read a 2xx body (Voyage's raises on a malformed or absent
``usage``), the caller gets the SDK's exception and the event is ``provider_invalid_response``
named by that exception's class. SDK exceptions are re-raised unchanged; the event carries the
category by HTTP status, the status, ``Retry-After`` and a fingerprint of the body, never it.
"""

from __future__ import annotations

from spanledger.instrumentation._registry import (
    instrument,
    instrumented_sdks,
    is_instrumented,
    uninstrument,
)
from spanledger.instrumentation._status import SdkState, SdkStatus, sdk_status
from spanledger.instrumentation.manual import (
    EmbeddingRecord,
    RerankRecord,
    record_embedding,
    record_rerank,
)
from spanledger.instrumentation.transport import (
    AsyncRecordingTransport,
    RecordingTransport,
    async_transport,
    transport,
)

__all__ = [
    "AsyncRecordingTransport",
    "EmbeddingRecord",
    "RecordingTransport",
    "RerankRecord",
    "SdkState",
    "SdkStatus",
    "async_transport",
    "instrument",
    "instrumented_sdks",
    "is_instrumented",
    "record_embedding",
    "record_rerank",
    "sdk_status",
    "transport",
    "uninstrument",
]
