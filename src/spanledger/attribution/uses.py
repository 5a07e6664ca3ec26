"""What a request did with its frames, and the share of paid-for context that was used.

A ``ContextUse`` records three independent observations about one frame: selected (it
survived ranking), rendered (its text reached the prompt) and cited (the answer referred to
it). ``AttributionReport`` joins uses to the usage report by ``FrameId`` and states the cited
token share. Anything that does not reconcile is reported as a problem, never counted quietly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from spanledger.attribution.frames import FrameId, UsageReport

__all__ = ["AttributionReport", "ContextUse", "Evidence", "Problem", "ProblemKind"]


class Evidence(StrEnum):
    """What made a use cited, strongest first: the citations the provider returned with the
    answer, the framework's own marking of the documents it used, a label the prompt put next
    to the frame found in the answer, or the caller's own ``cite``."""

    PROVIDER_CITATION = "provider_citation"
    FRAMEWORK_MARKING = "framework_marking"
    PROMPT_LABEL = "prompt_label"
    BY_HAND = "by_hand"

    @property
    def strength(self) -> int:
        """Lower is stronger."""
        return _STRENGTH[self]


_STRENGTH = {evidence: rank for rank, evidence in enumerate(Evidence)}


def stronger(first: Evidence | None, second: Evidence | None) -> Evidence | None:
    """The stronger of two pieces of evidence (``None``: none)."""
    if first is None:
        return second
    if second is None:
        return first
    return first if first.strength <= second.strength else second


@dataclass(frozen=True)
class ContextUse:
    """What a request did with one frame: selected (served), rendered into the prompt, cited.

    ``rendered_tokens`` is the accounting cost of the part of the frame that reached a prompt
    (``None``: the whole frame, as a hand-written ``render`` says); ``renders`` how many model
    calls rendered it; ``evidence`` what made it cited."""

    frame: FrameId
    selected: bool = False
    rendered: bool = False
    cited: bool = False
    rendered_tokens: int | None = None
    renders: int = 0
    evidence: Evidence | None = None

    def rendered_cost(self, cost: int) -> int:
        """The accounting tokens of this use's rendered part, for a frame costing ``cost``."""
        part = self.rendered_tokens
        return cost if part is None else min(part, cost)

    def is_coherent(self) -> bool:
        """Cited implies rendered, and rendered implies selected."""
        return (not self.cited or self.rendered) and (not self.rendered or self.selected)

    def is_rendered_but_uncited(self) -> bool:
        """Context that was paid for and shown to the model, and earned nothing visible."""
        return self.rendered and not self.cited


class ProblemKind(StrEnum):
    """Why an attribution report is not reconcilable: a frame cited or rendered without the
    step before it, a use no call billed, a duplicate use, a citation label that matches no
    frame, a malformed frame identity, usage figures that disagree, or a capture cut short by
    its caps (frames not tracked, prompt text not examined)."""

    INCOHERENT = "incoherent"
    NOT_BILLED = "not_billed"
    DUPLICATE_USE = "duplicate_use"
    UNKNOWN_LABEL = "unknown_label"
    BAD_IDENTITY = "bad_identity"
    INCONSISTENT_USAGE = "inconsistent_usage"
    CAPTURE_CUT = "capture_cut"


@dataclass(frozen=True)
class Problem:
    """Why a report does not reconcile; ``detail`` names frames and labels, never content."""

    kind: ProblemKind
    detail: str
    frame: FrameId | None = None


@dataclass(frozen=True)
class _Analysis:
    merged: dict[FrameId, ContextUse]
    duplicates: list[FrameId]
    cited: int
    uncited: int
    flawed: int
    """Uses that are incoherent or name a frame that was never billed (details: problems())."""


def _combined(frame: FrameId, uses: list[ContextUse]) -> ContextUse:
    """Several uses of one frame as one: each flag if any use had it, the larger rendered part,
    the calls summed, the strongest evidence."""
    parts = [use.rendered_tokens for use in uses if use.rendered]
    evidence = None
    for use in uses:
        evidence = stronger(evidence, use.evidence)
    return ContextUse(
        frame,
        any(use.selected for use in uses),
        any(use.rendered for use in uses),
        any(use.cited for use in uses),
        None if not parts or None in parts else max(p for p in parts if p is not None),
        sum(use.renders for use in uses),
        evidence,
    )


@dataclass(frozen=True)
class AttributionReport:
    """Uses joined to the usage report. All figures are computed in one pass each."""

    uses: tuple[ContextUse, ...]
    usage: UsageReport
    extra_problems: tuple[Problem, ...] = ()

    @classmethod
    def of(
        cls,
        uses: Iterable[ContextUse],
        usage: UsageReport,
        problems: Iterable[Problem] = (),
    ) -> AttributionReport:
        """A report over these uses and this usage, with problems found while collecting them."""
        return cls(tuple(uses), usage, tuple(problems))

    @cached_property
    def _costs(self) -> dict[FrameId, int]:
        """Each billed frame's cost (the first line item naming it)."""
        return {
            served.frame: served.token_cost
            for row in reversed(self.usage.providers)
            for served in reversed(row.served_frames)
        }

    @cached_property
    def _analysis(self) -> _Analysis:
        """Everything the figures and the problems need, in one pass over the uses."""
        costs = self._costs
        merged: dict[FrameId, ContextUse] = {}
        duplicates: list[FrameId] = []
        cited = uncited = flawed = 0
        for use in self.uses:
            frame = use.frame
            if frame in merged:
                duplicates.append(frame)
                continue
            merged[frame] = use
            cost = costs.get(frame)
            if cost is None:
                flawed += 1
                cost = 0
            if use.rendered:
                if not use.selected:
                    flawed += 1
                if use.cited:
                    cited += use.rendered_cost(cost)
                else:
                    uncited += use.rendered_cost(cost)
            elif use.cited:
                flawed += 1
        for frame in dict.fromkeys(duplicates):
            all_uses = [use for use in self.uses if use.frame == frame]
            combined = _combined(frame, all_uses)
            cost = costs.get(frame, 0)
            for use, sign in ((merged[frame], -1), (combined, 1)):
                if use.rendered:
                    if use.cited:
                        cited += sign * use.rendered_cost(cost)
                    else:
                        uncited += sign * use.rendered_cost(cost)
            merged[frame] = combined
        return _Analysis(merged, duplicates, cited, uncited, flawed)

    @property
    def _merged(self) -> dict[FrameId, ContextUse]:
        return self._analysis.merged

    @property
    def _split(self) -> tuple[int, int]:
        return self._analysis.cited, self._analysis.uncited

    def rendered_frames(self) -> int:
        """Billed frames that reached the prompt (the frames ``rendered_tokens`` counts)."""
        costs = self._costs
        return sum(1 for f, use in self._merged.items() if use.rendered and f in costs)

    def cited_frames(self) -> int:
        """Billed frames that were rendered and cited (the frames ``cited_tokens`` counts)."""
        costs = self._costs
        return sum(
            1 for f, use in self._merged.items() if use.rendered and use.cited and f in costs
        )

    def rendered_tokens(self) -> int:
        """Accounting tokens of every billed frame that reached the prompt."""
        return sum(self._split)

    def cited_tokens(self) -> int:
        """Tokens of frames that were rendered and cited (cited alone cannot count)."""
        return self._split[0]

    def uncited_rendered_tokens(self) -> int:
        """Tokens of frames that reached the prompt and were not cited: spent, unused."""
        return self._split[1]

    def cited_token_share(self) -> float | None:
        """Cited over rendered tokens; ``None`` (not 0) when nothing was rendered."""
        cited, uncited = self._split
        if cited + uncited == 0:
            return None
        return cited / (cited + uncited)

    def problems(self) -> list[Problem]:
        """Everything that keeps this report from reconciling with the bill."""
        found = list(self.extra_problems)
        if not self.usage.is_consistent():
            found.append(
                Problem(ProblemKind.INCONSISTENT_USAGE, "usage totals do not re-sum from items")
            )
        costs = self._costs
        analysis = self._analysis
        for frame in analysis.duplicates:
            found.append(Problem(ProblemKind.DUPLICATE_USE, f"{frame} is used twice", frame))
        for frame, use in analysis.merged.items():
            if use.cited and not use.rendered:
                detail = f"{frame} cited but not rendered"
                found.append(Problem(ProblemKind.INCOHERENT, detail, frame))
            elif use.rendered and not use.selected:
                detail = f"{frame} rendered but not selected"
                found.append(Problem(ProblemKind.INCOHERENT, detail, frame))
            if frame not in costs:
                detail = f"{frame} was never served in this request"
                found.append(Problem(ProblemKind.NOT_BILLED, detail, frame))
        return found

    def is_coherent(self) -> bool:
        """Every use is coherent: cited implies rendered, rendered implies selected."""
        return all(use.is_coherent() for use in self.uses)

    def is_reconcilable(self) -> bool:
        """Every use is coherent, unique and names a billed frame, and nothing else is off."""
        analysis = self._analysis
        if self.extra_problems or analysis.duplicates or analysis.flawed:
            return False
        return self.usage.is_consistent()

    def use_of(self, frame: FrameId) -> ContextUse | None:
        """What the request did with ``frame`` (its uses merged), or ``None`` if nothing."""
        return self._merged.get(frame)
