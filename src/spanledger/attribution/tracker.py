"""The frames of one request: what each provider served, and what was selected, rendered and
cited. A request scope owns one tracker; ``report()`` turns it into an ``AttributionReport``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol, cast

from spanledger import _forksafe
from spanledger.attribution.citations import find_labels, label_map
from spanledger.attribution.frames import (
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
)
from spanledger.attribution.passages import framework_passages
from spanledger.attribution.uses import AttributionReport, ContextUse, Problem, ProblemKind
from spanledger.events import ScoredDocument

__all__ = ["FrameLike", "FrameTracker"]

FrameLike = FrameId | ServedFrame | tuple[str, str, str | None]
"""A frame as callers name it; a tuple is ``(provider_id, frame_id, content_digest)``."""

_SELECTED, _RENDERED, _CITED = 0, 1, 2


class Ranked(Protocol):
    """Anything carrying ranked results: ``RerankResponse``, ``RerankOutcome``."""

    @property
    def results(self) -> Sequence[ScoredDocument]: ...


def _ranked(source: object) -> Sequence[ScoredDocument] | None:
    results = getattr(source, "results", None)
    if results is not None:
        return cast(Sequence[ScoredDocument], results)
    if isinstance(source, Sequence) and source and isinstance(source[0], ScoredDocument):
        return cast(Sequence[ScoredDocument], source)
    return None


class FrameTracker:
    """Thread-safe record of a request's frames, in the order they were first seen."""

    def __init__(self) -> None:
        self._lock = _forksafe.lock(self, "_lock")
        self._served: dict[str, list[ServedFrame]] = {}
        self._served_ids: set[FrameId] = set()
        self._rejected: dict[str, int] = {}
        self._flags: dict[FrameId, list[bool]] = {}
        self._problems: list[Problem] = []

    def serve(
        self,
        source: Ranked | Sequence[ScoredDocument] | Sequence[str] | Sequence[object],
        documents: Sequence[str] | None = None,
        *,
        provider_id: str,
        ids: Sequence[str] | None = None,
        selected: bool = True,
    ) -> list[ServedFrame]:
        """Record frames a provider served: ranked results (a ``RerankResponse``, a fallback
        ``RerankOutcome`` or a list of ``ScoredDocument``, in rank order, content taken from
        ``documents[result.index]``), a plain list of passages, or the list a framework's
        retriever returned (LangChain ``Document``, LlamaIndex ``NodeWithScore``), which
        carries its own texts. Frame ids come from ``ids`` (by original position), else from
        the framework items when every one has an id, else are the positions themselves."""
        results = _ranked(source)
        passages = framework_passages(source) if results is None else None
        if results is not None:
            if documents is None:
                raise ValueError("serving ranked results needs the documents they index")
            picks = [(r.index, documents[r.index]) for r in results]
        elif passages is not None:
            if documents is not None:
                raise ValueError("framework documents carry their own text: pass no documents")
            picks = list(enumerate(passages.texts))
            if ids is None:
                ids = passages.ids
        else:
            picks = list(enumerate(cast(Sequence[str], source)))
        if ids is not None and len(ids) < max((i for i, _ in picks), default=-1) + 1:
            raise ValueError("ids must name every served position")
        frames = [
            ServedFrame.of(provider_id, ids[i] if ids is not None else str(i), text)
            for i, text in picks
        ]
        with self._lock:
            bucket = self._served.setdefault(provider_id, [])
            for frame in frames:
                if frame.frame in self._served_ids:
                    self._problems.append(
                        Problem(
                            ProblemKind.DUPLICATE_USE,
                            f"{frame.frame} was served twice; counted once",
                            frame.frame,
                        )
                    )
                    continue
                self._served_ids.add(frame.frame)
                bucket.append(frame)
                flags = self._flags.setdefault(frame.frame, [False, False, False])
                flags[_SELECTED] = flags[_SELECTED] or selected
        return frames

    def reject(self, provider_id: str, count: int = 1) -> None:
        """Count frames a provider offered that were dropped before serving."""
        with self._lock:
            self._rejected[provider_id] = self._rejected.get(provider_id, 0) + count

    def select(self, frames: Iterable[FrameLike]) -> None:
        """Mark frames chosen for the request (served to it)."""
        self._mark(frames, _SELECTED, "selected")

    def render(self, frames: Iterable[FrameLike]) -> None:
        """Mark frames whose text reached the prompt."""
        self._mark(frames, _RENDERED, "rendered")

    def cite(self, frames: Iterable[FrameLike]) -> None:
        """Mark frames the answer cited."""
        self._mark(frames, _CITED, "cited")

    def cite_from_text(
        self,
        answer: str,
        labels: Mapping[str, FrameId | ServedFrame] | Sequence[FrameId | ServedFrame],
        pattern: re.Pattern[str] | str | None = None,
    ) -> list[FrameId]:
        """Cite the frames whose labels appear in ``answer``; unknown labels are reported."""
        by_label = label_map(labels)
        cited: list[FrameId] = []
        unknown = 0
        for label in find_labels(answer, pattern):
            frame = by_label.get(label)
            if frame is None:
                unknown += 1
            elif frame not in cited:
                cited.append(frame)
        if unknown:
            # The labels come from the model's answer: count them, never quote them.
            with self._lock:
                self._problems.append(
                    Problem(
                        ProblemKind.UNKNOWN_LABEL,
                        f"{unknown} citation label(s) in the answer match no frame",
                    )
                )
        self.cite(cited)
        return cited

    def _mark(self, frames: Iterable[FrameLike], flag: int, verb: str) -> None:
        with self._lock:
            for item in frames:
                frame = self._identity(item)
                if frame is None:
                    continue
                flags = self._flags.setdefault(frame, [False, False, False])
                if flags[flag]:
                    self._problems.append(
                        Problem(ProblemKind.DUPLICATE_USE, f"{frame} was {verb} twice", frame)
                    )
                flags[flag] = True

    def _identity(self, item: FrameLike) -> FrameId | None:
        if isinstance(item, ServedFrame):
            return item.frame
        if isinstance(item, FrameId):
            return item
        try:
            return FrameId(*item)
        except (TypeError, ValueError):
            self._problems.append(
                Problem(ProblemKind.BAD_IDENTITY, "a frame identity is malformed; ignored")
            )
            return None

    def usage(
        self, *, as_of: datetime | None = None, budget_requested: int | None = None
    ) -> UsageReport:
        """What the providers billed for the frames tracked so far, as a usage report."""
        with self._lock:
            providers = [
                ProviderUsage.of(provider, frames, self._rejected.get(provider, 0))
                for provider, frames in self._served.items()
            ]
            for provider, rejected in self._rejected.items():
                if provider not in self._served:
                    providers.append(ProviderUsage.of(provider, (), rejected))
        return UsageReport.of(
            providers,
            as_of=as_of if as_of is not None else datetime.now(UTC),
            budget_requested=budget_requested,
        )

    def report(self, *, budget_requested: int | None = None) -> AttributionReport:
        """The attribution report: one use per frame seen, joined to what was served."""
        usage = self.usage(budget_requested=budget_requested)
        with self._lock:
            uses = [ContextUse(frame, *flags) for frame, flags in self._flags.items()]
            problems = list(self._problems)
        return AttributionReport.of(uses, usage, problems)
