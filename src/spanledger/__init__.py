"""spanledger: tracing and cost accounting for embedding and rerank calls.

Every embedding or rerank call becomes one typed event; exporters render it as a span, a
Langfuse observation or a log line, the ledger prices it, and a request's report says what
share of the context it paid for was cited. The public names below load on first use, so
``import spanledger`` stays cheap for the command line and for applications that use one part
of it.

Where each concern lives, top to bottom (a module imports only from rooms below its own):

- ``instrumentation``: the switch (``instrument()``) and the public API for existing calls;
  ``exporters``, ``fleet``, ``testing``: spans, metrics and logs; reports over many logs; the
  stand-in server;
- ``integrations``: one package per library recorded (openai, cohere, botocore, ...), each
  declaring what the switch patches; ``chains``: rerank chains that never fail;
- ``capture``: the machinery integrations are built on; ``providers``: spanledger's own
  provider classes;
- ``recording``: the one recording core; ``wire``: each vendor endpoint's rules, declared once;
- ``attribution``, ``recorder``, ``ledger``: the request scope and its frames, where events go,
  prices;
- ``events``, ``eventlog``, ``outcomes``, ``costs``, ``errors``, ``figures``: the records and
  rules everything reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spanledger._moved import give_on_first_use
from spanledger._version import __version__

if TYPE_CHECKING:
    from spanledger import instrumentation
    from spanledger.attribution import RequestScope, carry, current_request, request
    from spanledger.configuration import configure
    from spanledger.errors import ConfigurationError, ErrorCategory, Fingerprint, ProviderError
    from spanledger.eventlog import EventLog, LogProblem, iter_events, read_events
    from spanledger.events import (
        CallStarted,
        EmbeddingEvent,
        EmbeddingFailedEvent,
        EmbeddingResponse,
        EmbeddingUsage,
        Event,
        RerankEvent,
        RerankFailedEvent,
        RerankResponse,
        RerankUsage,
        ScoredDocument,
    )
    from spanledger.exporters import ConsoleSink, JsonlSink
    from spanledger.instrumentation import instrument, record_embedding, record_rerank, uninstrument
    from spanledger.recorder import Recorder, get_recorder, set_default_recorder, use
    from spanledger.wire import Vendor

_HOMES = {
    "CallStarted": "spanledger.events",
    "ConfigurationError": "spanledger.errors",
    "carry": "spanledger.attribution",
    "configure": "spanledger.configuration",
    "ConsoleSink": "spanledger.exporters",
    "current_request": "spanledger.attribution",
    "EmbeddingEvent": "spanledger.events",
    "EmbeddingFailedEvent": "spanledger.events",
    "EmbeddingResponse": "spanledger.events",
    "EmbeddingUsage": "spanledger.events",
    "ErrorCategory": "spanledger.errors",
    "Event": "spanledger.events",
    "EventLog": "spanledger.eventlog",
    "Fingerprint": "spanledger.errors",
    "get_recorder": "spanledger.recorder",
    "instrument": "spanledger.instrumentation",
    "instrumentation": "spanledger.instrumentation",
    "iter_events": "spanledger.eventlog",
    "JsonlSink": "spanledger.exporters",
    "LogProblem": "spanledger.eventlog",
    "ProviderError": "spanledger.errors",
    "read_events": "spanledger.eventlog",
    "record_embedding": "spanledger.instrumentation",
    "record_rerank": "spanledger.instrumentation",
    "Recorder": "spanledger.recorder",
    "request": "spanledger.attribution",
    "RequestScope": "spanledger.attribution",
    "RerankEvent": "spanledger.events",
    "RerankFailedEvent": "spanledger.events",
    "RerankResponse": "spanledger.events",
    "RerankUsage": "spanledger.events",
    "ScoredDocument": "spanledger.events",
    "set_default_recorder": "spanledger.recorder",
    "uninstrument": "spanledger.instrumentation",
    "use": "spanledger.recorder",
    "Vendor": "spanledger.wire",
}
"""Each public name and the module that defines it (a submodule names itself)."""

give_on_first_use(globals(), _HOMES)


__all__ = [
    "CallStarted",
    "ConfigurationError",
    "ConsoleSink",
    "EmbeddingEvent",
    "EmbeddingFailedEvent",
    "EmbeddingResponse",
    "EmbeddingUsage",
    "ErrorCategory",
    "Event",
    "EventLog",
    "Fingerprint",
    "JsonlSink",
    "LogProblem",
    "ProviderError",
    "Recorder",
    "RequestScope",
    "RerankEvent",
    "RerankFailedEvent",
    "RerankResponse",
    "RerankUsage",
    "ScoredDocument",
    "Vendor",
    "__version__",
    "carry",
    "configure",
    "current_request",
    "get_recorder",
    "instrument",
    "instrumentation",
    "iter_events",
    "read_events",
    "record_embedding",
    "record_rerank",
    "request",
    "set_default_recorder",
    "uninstrument",
    "use",
]
