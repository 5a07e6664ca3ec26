"""Every name spanledger writes on a span or a metric point, each named once: attribute keys,
span event names and span names. The span builders and the metrics read them from here, so a
name cannot drift between the call's span, the chain's span and the metrics.

Grouped by whose names they are: the OpenTelemetry semantic conventions (GenAI, errors,
server), what the backends key on (OpenInference, Langfuse), spanledger's own, and the
rerank chain's.
"""

from __future__ import annotations

# OpenTelemetry GenAI semantic conventions
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TOP_K = "gen_ai.request.top_k"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_COST = "gen_ai.usage.cost"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"  # noqa: S105
"""On token metrics: which tokens were counted."""
GEN_AI_RERANK_CANDIDATE_COUNT = "gen_ai.rerank.candidate.count"
"""The open GenAI rerank proposal's name, written when the latest names are asked for."""
GEN_AI_RERANK_TOP_N = "gen_ai.rerank.top_n"
"""The open GenAI rerank proposal's name, written when the latest names are asked for."""

# OpenTelemetry errors and exceptions
ERROR_TYPE = "error.type"
HTTP_RESPONSE_STATUS_CODE = "http.response.status_code"
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"

# OpenTelemetry server
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# What the backends key a span on: OpenInference's (Phoenix, Arize) and Langfuse's
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
OPENINFERENCE_EMBEDDING_MODEL_NAME = "embedding.model_name"
OPENINFERENCE_RERANKER_MODEL_NAME = "reranker.model_name"
OPENINFERENCE_RERANKER_TOP_K = "reranker.top_k"
LANGFUSE_OBSERVATION_TYPE = "langfuse.observation.type"
LANGFUSE_USAGE_DETAILS = "langfuse.observation.usage_details"
LANGFUSE_COST_DETAILS = "langfuse.observation.cost_details"

# spanledger's own: the call and its attempts
CALL_ID = "spanledger.call_id"
REQUEST_ID = "spanledger.request_id"
LOGICAL_CALL_ID = "spanledger.logical_call_id"
ATTEMPT_NUMBER = "spanledger.attempt"
ATTEMPTS = "spanledger.attempts"
ATTEMPT_LATENCY_MS = "spanledger.attempt.latency_ms"
ATTEMPT_EVENTS_DROPPED = "spanledger.attempt.events_dropped"
ATTEMPT_EVENT = "spanledger.attempt"
"""The span event of one retried attempt, on its logical call's span."""

# spanledger's own: what was asked and answered
EMBEDDING_INPUT_COUNT = "spanledger.embedding.input_count"
EMBEDDING_INPUT_TYPE = "spanledger.embedding.input_type"
RERANK_QUERY_LENGTH = "spanledger.rerank.query_length"
RERANK_DOCUMENT_COUNT = "spanledger.rerank.document_count"
RERANK_RESULT_COUNT = "spanledger.rerank.result_count"

# spanledger's own: the opt-in payload
EMBEDDING_INPUTS = "spanledger.embedding.inputs"
RERANK_QUERY = "spanledger.rerank.query"
RERANK_DOCUMENTS = "spanledger.rerank.documents"
RERANK_RESULTS = "spanledger.rerank.results"
REQUEST_EXTRAS = "spanledger.request.extras"

# spanledger's own: usage, cost and failure
USAGE_SEARCH_UNITS = "spanledger.usage.search_units"
USAGE_BILLABLE_CHARACTERS = "spanledger.usage.billable_characters"
"""The input characters the provider reported billing (Vertex AI's ``:predict``)."""
USAGE_MALFORMED = "spanledger.usage.malformed"
USAGE_SOURCE = "spanledger.usage.source"
USAGE_ESTIMATED = "spanledger.usage.estimated"
USAGE_FIGURE = "spanledger.usage.figure"
"""On the malformed-usage metric: which usage figure was not a count."""
COST_STATUS = "spanledger.cost.status"
COST_CURRENCY = "spanledger.cost.currency"
COST_REASON = "spanledger.cost.reason"
PROVIDER_ERROR_TYPE = "spanledger.error.type"
"""The provider's own error code or type (``error.type`` is spanledger's category)."""
ERROR_RETRY_AFTER = "spanledger.error.retry_after"

# spanledger's own: a request's attribution, on its span
ATTRIBUTION_FRAMES_SERVED = "spanledger.attribution.frames_served"
ATTRIBUTION_FRAMES_RENDERED = "spanledger.attribution.frames_rendered"
ATTRIBUTION_FRAMES_CITED = "spanledger.attribution.frames_cited"
ATTRIBUTION_RENDERED_TOKENS = "spanledger.attribution.rendered_tokens"
ATTRIBUTION_CITED_TOKENS = "spanledger.attribution.cited_tokens"
ATTRIBUTION_UNCITED_RENDERED_TOKENS = "spanledger.attribution.uncited_rendered_tokens"
ATTRIBUTION_CITED_TOKEN_SHARE = "spanledger.attribution.cited_token_share"  # noqa: S105
ATTRIBUTION_RECONCILABLE = "spanledger.attribution.reconcilable"
ATTRIBUTION_SPEND_COMPLETE = "spanledger.attribution.spend_complete"
ATTRIBUTION_SPEND = "spanledger.attribution.spend"
ATTRIBUTION_SPEND_PER_CITED_TOKEN = "spanledger.attribution.spend_per_cited_token"  # noqa: S105
ATTRIBUTION_CURRENCY = "spanledger.attribution.currency"
ATTRIBUTION_CALLS = "spanledger.attribution.calls"
ATTRIBUTION_BILLED_INPUT_TOKENS = "spanledger.attribution.billed_input_tokens"
ATTRIBUTION_BILLED_SEARCH_UNITS = "spanledger.attribution.billed_search_units"
ATTRIBUTION_BILLED_CHARACTERS = "spanledger.attribution.billed_characters"
ATTRIBUTION_CALLS_WITHOUT_USAGE = "spanledger.attribution.calls_without_usage"
ATTRIBUTION_PROBLEMS = "spanledger.attribution.problems"
ATTRIBUTION_PROBLEM_COUNT = "spanledger.attribution.problem_count"
ATTRIBUTION_CALLS_BY_STATUS_PREFIX = "spanledger.attribution.calls."
"""Followed by a cost status: the request's calls with that status."""
ATTRIBUTION_SPEND_BY_STATUS_PREFIX = "spanledger.attribution.spend."
"""Followed by a cost status: the request's spend with that status."""
ATTRIBUTION_CHAINS_BY_STATUS_PREFIX = "spanledger.attribution.chains."
"""Followed by a chain outcome status: the request's chains that ended so."""
ATTRIBUTION_MODEL_CALLS = "spanledger.attribution.model_calls"
ATTRIBUTION_QUOTED_TOKENS = "spanledger.attribution.quoted_tokens"
ATTRIBUTION_CITED_BY_PREFIX = "spanledger.attribution.cited_by."
"""Followed by an evidence (``prompt_label``...): the frames it made cited."""
ATTRIBUTION_CONTEXT_SPEND = "spanledger.attribution.context_spend"
"""What the rendered context cost as the model calls' input tokens."""
ATTRIBUTION_CITED_CONTEXT_SPEND = "spanledger.attribution.cited_context_spend"
ATTRIBUTION_UNUSED_CONTEXT_SPEND = "spanledger.attribution.unused_context_spend"
ATTRIBUTION_CONTEXT_CURRENCY = "spanledger.attribution.context_currency"
ATTRIBUTION_UNKNOWN_CONTEXT_SPEND = "spanledger.attribution.unknown_context_spend"
"""Why the context's spend is unknown (then no amount is written)."""
ATTRIBUTION_CAPTURE_CUT_PREFIX = "spanledger.attribution.capture_cut."
"""Followed by what a cap cut (``frames``, ``prompt_chars``...): how much."""
ATTRIBUTION_CONTEXT_PART = "spanledger.attribution.context_part"
"""On the context spend metric: ``cited`` or ``unused``."""

# The rerank chain's span and its attempt events
CHAIN_SPAN = "rerank_chain"
CHAIN_ATTEMPT_EVENT = "spanledger.chain.attempt"
"""The span event of one attempt of a chain, at the moment the attempt ended."""
CHAIN_STATUS = "spanledger.chain.status"
CHAIN_ATTEMPTS = "spanledger.chain.attempts"
CHAIN_REASON = "spanledger.chain.reason"
CHAIN_ANSWERED_BY = "spanledger.chain.answered_by"
CHAIN_CALLBACK_FAILURES = "spanledger.chain.callback_failures"
BREAKER_STATES = "spanledger.breaker.states"
BREAKER_STATE = "spanledger.breaker.state"
ATTEMPT_KIND = "spanledger.attempt.kind"
ATTEMPT_STATUS = "spanledger.attempt.status"
ATTEMPT_REASON = "spanledger.attempt.reason"
ATTEMPT_DETAIL = "spanledger.attempt.detail"
ATTEMPT_DURATION_MS = "spanledger.attempt.duration_ms"
BILLING = "spanledger.billing"

# A request's span
REQUEST_SPAN = "request"
