"""The frames of one request: what each provider served, and what was selected, rendered and
cited. A request scope owns one tracker; ``report()`` turns it into an ``AttributionReport``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from spanledger.attribution.uses import (
    AttributionReport,
    ContextUse,
    Evidence,
    Problem,
    ProblemKind,
    stronger,
)
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
        self._parts: dict[FrameId, int | None] = {}
        self._renders: dict[FrameId, int] = {}
        self._evidence: dict[FrameId, Evidence] = {}
        self._before_report: Callable[[], None] | None = None
        self._by_digest: tuple[dict[str, ServedFrame], dict[str, ServedFrame]] = ({}, {})
        """Served frames by content digest: those the request's code served, those captured."""

    def before_report(self, settle: Callable[[], None]) -> None:
        """Run ``settle`` before each report (a capture serving what it holds back)."""
        self._before_report = settle

    def serve(
        self,
        source: Ranked | Sequence[ScoredDocument] | Sequence[str] | Sequence[object],
        documents: Sequence[str] | None = None,
        *,
        provider_id: str,
        ids: Sequence[str] | None = None,
        selected: bool = True,
        captured: bool = False,
    ) -> list[ServedFrame]:
        """Record frames a provider served: ranked results (a ``RerankResponse``, a fallback
        ``RerankOutcome`` or a list of ``ScoredDocument``, in rank order, content taken from
        ``documents[result.index]``), a plain list of passages, or the list a framework's
        retriever returned (LangChain ``Document``, LlamaIndex ``NodeWithScore``), which
        carries its own texts. Frame ids come from ``ids`` (by original position), else from
        the framework items when every one has an id, else are the positions themselves.

        ``captured`` frames come from a capture (a framework, the wire), the others from the
        request's own code: a text one of them served already is the frame the other served,
        so serving by hand what a framework served (or the reverse) counts it once."""
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
            own, other = self._by_digest[captured], self._by_digest[not captured]
            for position, frame in enumerate(frames):
                known = other.get(frame.frame.content_digest or "")
                if known is not None:
                    frames[position] = known
                    flags = self._flags.setdefault(known.frame, [False, False, False])
                    flags[_SELECTED] = flags[_SELECTED] or selected
                    continue
                own.setdefault(frame.frame.content_digest or "", frame)
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

    def select_quietly(self, frames: Iterable[FrameId]) -> None:
        """Mark frames selected where a capture saw them chosen (an outer retriever or a
        reranker handing on frames served before is no duplicate)."""
        with self._lock:
            for frame in frames:
                self._flags.setdefault(frame, [False, False, False])[_SELECTED] = True

    def render(self, frames: Iterable[FrameLike]) -> None:
        """Mark frames whose text reached the prompt (whole)."""
        marked = self._mark(frames, _RENDERED, "rendered")
        with self._lock:
            for frame in marked:
                self._parts[frame] = None
                self._renders[frame] = self._renders.get(frame, 0) + 1

    def cite(self, frames: Iterable[FrameLike]) -> None:
        """Mark frames the answer cited."""
        self.cite_with(frames, Evidence.BY_HAND)

    def cite_with(self, frames: Iterable[FrameLike], evidence: Evidence) -> None:
        """Mark frames cited, saying what evidence made each so (the strongest is kept)."""
        marked = self._mark(frames, _CITED, "cited")
        with self._lock:
            for frame in marked:
                self._evidence[frame] = stronger(self._evidence.get(frame), evidence) or evidence

    def rendered_part(self, frame: FrameId, tokens: int, calls: int) -> None:
        """Mark a frame rendered by ``calls`` model calls, of which ``tokens`` accounting tokens
        (the part that reached a prompt, over every call) were shown: what a framework or the
        wire showed, so rendering it again is no duplicate."""
        with self._lock:
            flags = self._flags.setdefault(frame, [False, False, False])
            flags[_RENDERED] = True
            self._parts[frame] = tokens
            self._renders[frame] = calls

    def cited_again(self, frames: Iterable[FrameId], evidence: Evidence) -> None:
        """Mark frames cited by a model call's answer (an answer citing a frame a previous
        answer cited is no duplicate); the strongest evidence is kept."""
        with self._lock:
            for frame in frames:
                flags = self._flags.setdefault(frame, [False, False, False])
                flags[_CITED] = True
                self._evidence[frame] = stronger(self._evidence.get(frame), evidence) or evidence

    def note(self, kind: ProblemKind, detail: str) -> None:
        """Keep a problem found while capturing (counts and ids only, never text)."""
        with self._lock:
            self._problems.append(Problem(kind, detail))

    def identity(self, frame: FrameId) -> bool:
        """Whether ``frame`` was served to this request."""
        with self._lock:
            return frame in self._served_ids

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

    def _mark(self, frames: Iterable[FrameLike], flag: int, verb: str) -> list[FrameId]:
        marked = []
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
                marked.append(frame)
        return marked

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
        if self._before_report is not None:
            self._before_report()
        usage = self.usage(budget_requested=budget_requested)
        with self._lock:
            uses = [
                ContextUse(
                    frame,
                    selected=flags[_SELECTED],
                    rendered=flags[_RENDERED],
                    cited=flags[_CITED],
                    rendered_tokens=self._parts.get(frame),
                    renders=self._renders.get(frame, 0),
                    evidence=self._evidence.get(frame) if flags[_CITED] else None,
                )
                for frame, flags in self._flags.items()
            ]
            problems = list(self._problems)
        return AttributionReport.of(uses, usage, problems)
