"""A request's context as its model calls saw it, captured where it happens: the frames served
(with their texts), each model call's prompt and answer, matched as they arrive.

Integrations feed it (a framework's retriever and model callbacks, the wire's rerank and chat
requests), and so can your own pipeline; the request scope owns one. Texts live here only while
the request is open (``close`` forgets them) and never leave: what the tracker keeps, and what
the report and every exporter get, are identities, counts and token figures. Memory is bounded:
past a cap, frames are not tracked and prompts are examined only up to a length, and what a cap
cut is counted and reported.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from spanledger import _forksafe
from spanledger.attribution.frames import FrameId
from spanledger.attribution.matching import (
    FrameIndex,
    FrameText,
    PromptMatch,
    answer_labels,
    covered,
)
from spanledger.attribution.tracker import FrameTracker
from spanledger.attribution.uses import Evidence, ProblemKind
from spanledger.estimates import utf8_bytes
from spanledger.provider_ids import canonical

__all__ = ["Caps", "ContextCapture", "ModelCall", "Passage"]


@dataclass(frozen=True)
class Caps:
    """How much one request keeps in memory for matching."""

    frames: int = 1000
    """Frames tracked per request; later ones are counted, not tracked."""
    prompt_chars: int = 1_000_000
    """Characters of one model call's prompt examined; the rest is counted."""
    answer_chars: int = 200_000
    """Characters of one answer read for citations."""
    calls: int = 256
    """Model calls matched per request; later ones are counted."""


@dataclass(frozen=True)
class Passage:
    """A retrieved passage as a framework hands it over: its text and, where it has a stable
    one, its id there."""

    text: str
    id: str | None = None


@dataclass
class _Cut:
    frames: int = 0
    prompt_chars: int = 0
    answer_chars: int = 0
    calls: int = 0


@dataclass
class ModelCall:
    """One model call of the request: what its prompt showed of each frame, the labels next to
    them, and what its provider reported it read (for the context's spend)."""

    match: PromptMatch = field(default_factory=PromptMatch)
    answered: bool = False
    input_tokens: int | None = None
    provider: str | None = None
    model: str | None = None


class ContextCapture:
    """What one request's model calls saw of its frames, and what their answers cited."""

    def __init__(self, tracker: FrameTracker, caps: Caps | None = None) -> None:
        self._tracker = tracker
        self.caps = caps or Caps()
        self._lock = _forksafe.lock(self, "_lock")
        self._texts: dict[FrameId, str] = {}
        self._by_digest: dict[str, FrameId] = {}
        self._index: FrameIndex | None = None
        self._calls: list[ModelCall] = []
        self._spans: dict[FrameId, list[tuple[int, int]]] = {}
        self._renders: dict[FrameId, int] = {}
        self.quoted_tokens = 0
        self._cut = _Cut()
        self._pending: list[tuple[list[Passage], list[Passage], str]] = []
        self._by_hand = False
        tracker.before_report(self.settle)
        self.captured = False
        """Whether anything was captured here (a framework or the wire fed it)."""

    def reranked(
        self, passages: Sequence[Passage], chosen: Sequence[Passage], *, provider_id: str
    ) -> None:
        """A rerank call of the request was given ``passages`` and returned ``chosen``: they
        are served (the chosen selected) when the context is next read, unless the request's
        frames are served by hand by then (the hand-written account is the request's)."""
        with self._lock:
            if not self._by_hand:
                self._pending.append((list(passages), list(chosen), provider_id))

    def served_by_hand(self) -> None:
        """The request's code serves its frames itself: rerank calls serve nothing more."""
        with self._lock:
            self._by_hand = True
            self._pending.clear()

    def settle(self) -> None:
        """Serve what the request's rerank calls were given and returned, in call order."""
        with self._lock:
            pending, self._pending = self._pending, []
        for passages, chosen, provider_id in pending:
            self.served(passages, provider_id=provider_id, selected=False)
            if chosen:
                self.served(chosen, provider_id=provider_id, selected=True)

    def served(
        self,
        passages: Sequence[Passage],
        *,
        provider_id: str,
        selected: bool = True,
    ) -> list[FrameId]:
        """Serve ``passages`` to the request (a retriever's documents, a reranker's input): each
        is a frame named by its id there, else by its content digest. A passage already served
        (the same text) is the same frame; ``selected`` marks the selection a reranker or an
        outer retriever made from candidates served before."""
        self.settle()
        frames: list[FrameId] = []
        fresh: list[tuple[Passage, str]] = []
        with self._lock:
            self.captured = True
            for passage in passages:
                digest = _digest(passage.text)
                known = self._by_digest.get(digest)
                if known is not None:
                    frames.append(known)
                    continue
                if len(self._texts) + len(fresh) >= self.caps.frames:
                    self._cut.frames += 1
                    continue
                fresh.append((passage, digest))
        if fresh:
            ids = [passage.id or digest.removeprefix("sha256:")[:16] for passage, digest in fresh]
            served = self._tracker.serve(
                [passage.text for passage, _ in fresh],
                provider_id=provider_id,
                ids=ids,
                selected=selected,
                captured=True,
            )
            with self._lock:
                for (passage, digest), frame in zip(fresh, served, strict=True):
                    self._texts[frame.frame] = passage.text
                    self._by_digest[digest] = frame.frame
                    frames.append(frame.frame)
                self._index = None
        if selected:
            self._tracker.select_quietly(frames)
        return frames

    def frames_of(self, texts: Iterable[str]) -> list[FrameId]:
        """The frames served with exactly these texts (a copy a reranker made is the same
        frame), in order; texts no frame has are left out."""
        self.settle()
        found: list[FrameId] = []
        with self._lock:
            for text in texts:
                frame = self._by_digest.get(_digest(text))
                if frame is not None and frame not in found:
                    found.append(frame)
        return found

    def prompted(self, parts: Sequence[str]) -> ModelCall:
        """A model call received a prompt made of ``parts`` (messages, a system prompt, the
        documents passed beside them): find the frames it rendered and the labels next to them.
        Returns the call, for its answer."""
        self.settle()
        call = ModelCall()
        with self._lock:
            self.captured = True
            if len(self._calls) >= self.caps.calls:
                self._cut.calls += 1
                return call
            self._calls.append(call)
            index = self._current_index()
            budget = self.caps.prompt_chars
        if index is None:
            return call
        kept: list[str] = []
        for part in parts:
            if budget <= 0:
                self._cut_prompt(len(part))
                continue
            if len(part) > budget:
                self._cut_prompt(len(part) - budget)
                part = part[:budget]
            kept.append(part)
            budget -= len(part)
        call.match = index.match("\n".join(kept))
        self._rendered(call.match)
        return call

    def answered(
        self,
        call: ModelCall,
        answer: str,
        *,
        cited: Sequence[str] = (),
        marked: Sequence[str] = (),
        input_tokens: int | None = None,
        provider: str | None = None,
        model: str | None = None,
    ) -> None:
        """The model answered ``call``: ``cited`` are the texts of the documents the provider's
        own citations name, ``marked`` those the framework marked as used; then the labels the
        prompt put next to frames, found in the answer. ``input_tokens`` is the provider's own
        count of what it read (for the context's spend; ``None``: not reported)."""
        call.answered = True
        call.input_tokens = input_tokens
        call.provider = (canonical(provider) or provider) if provider else provider
        call.model = model
        if len(answer) > self.caps.answer_chars:
            with self._lock:
                self._cut.answer_chars += len(answer) - self.caps.answer_chars
            answer = answer[: self.caps.answer_chars]
        rendered = list(call.match.spans)
        for texts, evidence in (
            (cited, Evidence.PROVIDER_CITATION),
            (marked, Evidence.FRAMEWORK_MARKING),
        ):
            frames = self._frames_named(texts)
            if frames:
                self._tracker.cited_again(frames, evidence)
        labelled = answer_labels(answer, self._labels_for(call))
        if labelled.frames:
            self._tracker.cited_again(labelled.frames, Evidence.PROMPT_LABEL)
        if labelled.unknown:
            self._tracker.note(
                ProblemKind.UNKNOWN_LABEL,
                f"{labelled.unknown} citation label(s) in an answer match no rendered frame",
            )
        with self._lock:
            index = self._current_index()
        if index is not None and rendered:
            quoted = index.quoted(answer, rendered)
            if quoted:
                with self._lock:
                    self.quoted_tokens += math.ceil(quoted / 4)

    def _labels_for(self, call: ModelCall) -> dict[str, FrameId]:
        """The labels an answer to ``call`` may cite: its own prompt's, over those the
        request's earlier calls gave (a refine step carries the answer so far, whose labels
        name frames an earlier call showed, as sources numbered across the calls do)."""
        with self._lock:
            if not self._calls or self._calls[0] is call:
                return call.match.labels
            labels: dict[str, FrameId] = {}
            for earlier in self._calls:
                if earlier is call:
                    break
                labels.update(earlier.match.labels)
        labels.update(call.match.labels)
        return labels

    def _frames_named(self, texts: Sequence[str]) -> list[FrameId]:
        """The frames the texts a provider or framework named are: the same text, else the
        frames a text holds (a chunk re-split from a frame)."""
        if not texts:
            return []
        found = self.frames_of(texts)
        with self._lock:
            index = self._current_index()
            known = {_digest(self._texts[frame]) for frame in found}
        if index is None:
            return found
        for text in texts:
            if _digest(text) in known:
                continue
            for frame in index.match(text).spans:
                if frame not in found:
                    found.append(frame)
        return found

    def _current_index(self) -> FrameIndex | None:
        """The index of the frames served so far (rebuilt after new ones); call under the
        lock."""
        if not self._texts:
            return None
        if self._index is None:
            self._index = FrameIndex(
                [FrameText(frame, text) for frame, text in self._texts.items()]
            )
        return self._index

    def _cut_prompt(self, chars: int) -> None:
        with self._lock:
            self._cut.prompt_chars += chars

    def _rendered(self, match: PromptMatch) -> None:
        """Add what one prompt showed to each frame's rendered part, over every call."""
        updates: list[tuple[FrameId, int, int]] = []
        with self._lock:
            for frame, spans in match.spans.items():
                merged = self._spans.setdefault(frame, [])
                merged.extend(spans)
                self._renders[frame] = self._renders.get(frame, 0) + 1
                text = self._texts[frame]
                part = _part_tokens(text, merged)
                updates.append((frame, part, self._renders[frame]))
        for frame, tokens, calls in updates:
            self._tracker.rendered_part(frame, tokens, calls)

    def calls(self) -> list[ModelCall]:
        """The model calls matched so far (a copy)."""
        with self._lock:
            return list(self._calls)

    def rendered_chars(self, call: ModelCall) -> dict[FrameId, int]:
        """How many characters of each frame ``call``'s prompt held."""
        return {frame: covered(spans) for frame, spans in call.match.spans.items()}

    def cut(self) -> dict[str, int]:
        """What the caps cut so far, by what (only what was cut)."""
        with self._lock:
            return {name: count for name, count in vars(self._cut).items() if count}

    def close(self) -> None:
        """Forget every text: the request is over. What the caps cut is reported."""
        with self._lock:
            cut = {name: count for name, count in vars(self._cut).items() if count}
            self._texts.clear()
            self._by_digest.clear()
            self._index = None
            for call in self._calls:
                call.match.labels = {}
        if cut:
            detail = ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in cut.items())
            self._tracker.note(ProblemKind.CAPTURE_CUT, f"cut by the capture's caps: {detail}")


def _digest(text: str) -> str:
    """A text's content digest, as frame identities carry it."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _part_tokens(text: str, spans: Sequence[tuple[int, int]]) -> int:
    """The accounting tokens of the union of ``spans`` of ``text`` (UTF-8 bytes / 4, up)."""
    if text.isascii():
        return math.ceil(covered(spans) / 4)
    total = 0
    end = 0
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += utf8_bytes(text[max(start, end) : stop])
        end = stop
    return math.ceil(total / 4)
