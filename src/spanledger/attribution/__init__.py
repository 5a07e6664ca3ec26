"""Attribution: which retrieved frames a request served, rendered and got cited for, joined to
what the providers billed for that request; and the request scope that gathers both."""

from spanledger.attribution.bill import RequestReport
from spanledger.attribution.citations import DEFAULT_CITATION, find_labels, label_map
from spanledger.attribution.context import Caps, ContextCapture, ModelCall, Passage
from spanledger.attribution.frames import (
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
    token_cost,
)
from spanledger.attribution.scope import (
    OpenRequest,
    RequestScope,
    carry,
    current_request,
    open_request,
    request,
)
from spanledger.attribution.tracker import FrameLike, FrameTracker
from spanledger.attribution.uses import (
    AttributionReport,
    ContextUse,
    Evidence,
    Problem,
    ProblemKind,
)

__all__ = [
    "DEFAULT_CITATION",
    "AttributionReport",
    "Caps",
    "ContextCapture",
    "ContextUse",
    "Evidence",
    "FrameId",
    "FrameLike",
    "FrameTracker",
    "ModelCall",
    "OpenRequest",
    "Passage",
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
    "open_request",
    "request",
    "token_cost",
]
