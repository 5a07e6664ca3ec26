"""Attribution: which retrieved frames a request served, rendered and got cited for, joined to
what the providers billed for that request; and the request scope that gathers both."""

from spanledger.attribution.bill import RequestReport
from spanledger.attribution.citations import DEFAULT_CITATION, find_labels, label_map
from spanledger.attribution.frames import (
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
    token_cost,
)
from spanledger.attribution.scope import RequestScope, carry, current_request, request
from spanledger.attribution.tracker import FrameLike, FrameTracker
from spanledger.attribution.uses import AttributionReport, ContextUse, Problem, ProblemKind

__all__ = [
    "DEFAULT_CITATION",
    "AttributionReport",
    "ContextUse",
    "FrameId",
    "FrameLike",
    "FrameTracker",
    "Problem",
    "ProblemKind",
    "ProviderUsage",
    "RequestReport",
    "RequestScope",
    "ServedFrame",
    "UsageReport",
    "carry",
    "current_request",
    "find_labels",
    "label_map",
    "request",
    "token_cost",
]
