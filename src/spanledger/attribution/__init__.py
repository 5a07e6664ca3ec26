"""Attribution: which retrieved frames a request served, rendered and got cited for, joined to
what the providers billed for that request; and the request scope that gathers both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spanledger._moved import give_on_first_use

if TYPE_CHECKING:
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

_HOMES = {
    "AttributionReport": "spanledger.attribution.uses",
    "Caps": "spanledger.attribution.context",
    "carry": "spanledger.attribution.scope",
    "ContextCapture": "spanledger.attribution.context",
    "ContextUse": "spanledger.attribution.uses",
    "current_request": "spanledger.attribution.scope",
    "DEFAULT_CITATION": "spanledger.attribution.citations",
    "Evidence": "spanledger.attribution.uses",
    "find_labels": "spanledger.attribution.citations",
    "FrameId": "spanledger.attribution.frames",
    "FrameLike": "spanledger.attribution.tracker",
    "FrameTracker": "spanledger.attribution.tracker",
    "label_map": "spanledger.attribution.citations",
    "ModelCall": "spanledger.attribution.context",
    "open_request": "spanledger.attribution.scope",
    "OpenRequest": "spanledger.attribution.scope",
    "Passage": "spanledger.attribution.context",
    "Problem": "spanledger.attribution.uses",
    "ProblemKind": "spanledger.attribution.uses",
    "ProviderUsage": "spanledger.attribution.frames",
    "request": "spanledger.attribution.scope",
    "RequestReport": "spanledger.attribution.bill",
    "RequestScope": "spanledger.attribution.scope",
    "ServedFrame": "spanledger.attribution.frames",
    "token_cost": "spanledger.attribution.frames",
    "UsageReport": "spanledger.attribution.frames",
}
"""Each public name and the module that defines it: imported on first use, so that a part
of the package (the report reads ``summary``) can be imported without the rest."""

give_on_first_use(globals(), _HOMES)


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
