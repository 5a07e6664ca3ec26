"""spanledger: tracing and cost accounting for embedding and rerank calls."""

from spanledger import instrumentation
from spanledger._version import __version__
from spanledger.attribution import RequestScope, current_request, request
from spanledger.configure import configure
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
