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

__all__ = ["AttributionReport", "ContextUse", "Problem", "ProblemKind"]


@dataclass(frozen=True)
class ContextUse:
    frame: FrameId
    selected: bool = False
    rendered: bool = False
    cited: bool = False

    def is_coherent(self) -> bool:
        """Cited implies rendered, and rendered implies selected."""
        return (not self.cited or self.rendered) and (not self.rendered or self.selected)

    def is_rendered_but_uncited(self) -> bool:
        """Context that was paid for and shown to the model, and earned nothing visible."""
        return self.rendered and not self.cited


class ProblemKind(StrEnum):
    INCOHERENT = "incoherent"
    NOT_BILLED = "not_billed"
    DUPLICATE_USE = "duplicate_use"
    UNKNOWN_LABEL = "unknown_label"
    BAD_IDENTITY = "bad_identity"
    INCONSISTENT_USAGE = "inconsistent_usage"


@dataclass(frozen=True)
class Problem:
    """Why a report does not reconcile; ``detail`` names frames and labels, never content."""

    kind: ProblemKind
    detail: str
    frame: FrameId | None = None


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
        return cls(tuple(uses), usage, tuple(problems))

    @cached_property
    def _costs(self) -> dict[FrameId, int]:
        """Each billed frame's cost (the first line item naming it)."""
        costs: dict[FrameId, int] = {}
        for served in self.usage.served_frames():
            costs.setdefault(served.frame, served.token_cost)
        return costs

    @cached_property
    def _merged(self) -> dict[FrameId, ContextUse]:
        """One use per frame: duplicates are merged (and reported), never counted twice."""
        merged: dict[FrameId, ContextUse] = {}
        for use in self.uses:
            seen = merged.get(use.frame)
            if seen is None:
                merged[use.frame] = use
            else:
                merged[use.frame] = ContextUse(
                    use.frame,
                    seen.selected or use.selected,
                    seen.rendered or use.rendered,
                    seen.cited or use.cited,
                )
        return merged

    @cached_property
    def _split(self) -> tuple[int, int]:
        """(cited, uncited) tokens over rendered, billed frames, in one pass."""
        costs = self._costs
        cited = uncited = 0
        for use in self._merged.values():
            if use.rendered:
                cost = costs.get(use.frame, 0)
                if use.cited:
                    cited += cost
                else:
                    uncited += cost
        return cited, uncited

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
        counted: set[FrameId] = set()
        for use in self.uses:
            if use.frame in counted:
                found.append(
                    Problem(ProblemKind.DUPLICATE_USE, f"{use.frame} is used twice", use.frame)
                )
                continue
            counted.add(use.frame)
            if not use.is_coherent():
                what = (
                    "cited but not rendered"
                    if use.cited and not use.rendered
                    else ("rendered but not selected")
                )
                found.append(Problem(ProblemKind.INCOHERENT, f"{use.frame} {what}", use.frame))
            if use.frame not in costs:
                found.append(
                    Problem(
                        ProblemKind.NOT_BILLED,
                        f"{use.frame} was never served in this request",
                        use.frame,
                    )
                )
        return found

    def is_coherent(self) -> bool:
        return all(use.is_coherent() for use in self.uses)

    def is_reconcilable(self) -> bool:
        """Every use is coherent, unique and names a billed frame, and nothing else is off."""
        return not self.problems()

    def use_of(self, frame: FrameId) -> ContextUse | None:
        return self._merged.get(frame)
