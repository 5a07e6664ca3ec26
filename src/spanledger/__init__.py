"""spanledger: tracing and cost accounting for embedding and rerank calls."""

from spanledger.configure import configure
from spanledger.errors import ConfigurationError, ErrorCategory, Fingerprint, ProviderError
from spanledger.eventlog import EventLog, LogProblem, read_events
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
from spanledger.instrument import instrument, record_embedding, record_rerank, uninstrument
from spanledger.recorder import (
    Recorder,
    RequestScope,
    current_request,
    get_recorder,
    request,
    set_default_recorder,
    use,
)

__version__ = "0.1.0"

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
    "__version__",
    "configure",
    "current_request",
    "get_recorder",
    "instrument",
    "read_events",
    "record_embedding",
    "record_rerank",
    "request",
    "set_default_recorder",
    "uninstrument",
    "use",
]
