"""The steps of a rerank chain: anything that ranks.

- ``ProviderStep``: a remote reranker (any ``RerankProvider``);
- ``CrossEncoderStep``: a local cross-encoder (anything with ``predict(pairs)``, such as
  ``sentence_transformers.CrossEncoder``);
- ``BM25Step``: lexical BM25 over the documents themselves (``rank-bm25``:
  ``pip install 'spanledger[bm25]'``);
- ``IdentityStep``: the input order, taken on purpose (recorded as a ``skipped`` attempt);
- ``CallableStep``: your function ``(query, documents, top_k) -> results``.

``as_step`` turns what a chain is given into a step (a provider, a cross-encoder, a function, or
a step already); ``step(thing, gate=..., timeout=...)`` does the same with a gate or a deadline
of its own. Local steps bill nothing (``billing="local"``); a ``CallableStep`` that calls a paid
service says what it bills by and returns the usage it was charged.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import numbers
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from spanledger.chains._bounded import arun_in_thread
from spanledger.chains._contract import InvalidAnswer, score_of
from spanledger.errors import MissingExtra
from spanledger.events import RerankResponse, RerankUsage, ScoredDocument, trusted_builder_of
from spanledger.outcomes import FallbackAttempt, StepKind
from spanledger.providers import RerankProvider
from spanledger.recording.names import local_model_name

__all__ = [
    "BM25Step",
    "CallableStep",
    "CrossEncoderStep",
    "Gate",
    "GateCheck",
    "IdentityStep",
    "ProviderStep",
    "RerankStep",
    "StepRanking",
    "as_step",
    "step",
]


_scored = trusted_builder_of(ScoredDocument)
"""Local steps and pairs make their results from whole numbers and finite floats they checked:
no validation pass (the contract checks each index's range)."""


@dataclass(frozen=True, slots=True)
class StepRanking:
    """A step's answer: the ranking, and the usage it was billed for (``None``: none
    reported, or nothing billed)."""

    results: list[ScoredDocument]
    usage: RerankUsage | None = None


@dataclass(frozen=True, slots=True)
class GateCheck:
    """What a gate is shown before its step runs (no text of the request)."""

    provider: str
    model: str
    kind: StepKind
    document_count: int
    top_k: int | None
    attempts: tuple[FallbackAttempt, ...]
    """The chain's attempts so far."""
    remaining: float
    """Seconds left of the chain's deadline."""


Gate = Callable[[GateCheck], Any]
"""Decides before a step runs: ``True`` runs it; ``False`` skips it (``gate_declined``) and a
string skips it with that string as the reason, kept as a code (at most 64 characters, each an
ASCII letter, a digit or one of ``_ - . :``; any other becomes ``_``). A gate may be a
coroutine function in an async chain. One that raises skips its step (``gate_failed``); one
that hangs is abandoned at the chain's deadline (``gate_timeout``)."""


class RerankStep:
    """A chain step: what it is, who it would bill, and how to run it.

    ``gate`` and ``timeout`` (seconds, within the chain's deadline) are the step's own. A sync
    chain runs a step on a worker thread it stops waiting for at the step's budget, unless the
    step ``runs_inline`` for the documents given (work that ends within about a millisecond
    whatever happens), which it runs on its own thread. ``ends_at_budget``: the step's own
    call ends at about its budget and records an event as it does (a remote call's timeout),
    so a chain that stopped waiting for it gives it a moment to.
    """

    kind: ClassVar[StepKind]
    ends_at_budget: ClassVar[bool] = False

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        billing: str | None = "local",
        gate: Gate | None = None,
        timeout: float | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.billing = billing
        self.gate = gate
        self.timeout = timeout

    @property
    def missing_key(self) -> str | None:
        """The key variable a call would be refused for lacking (remote steps only)."""
        return None

    def runs_inline(self, documents: Sequence[str]) -> bool:
        """Whether ranking ``documents`` is so little work that a sync chain runs it on its
        own thread: it cannot overrun a budget by more than about a millisecond."""
        return False

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        raise NotImplementedError

    async def arank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        """By default the sync ``rank`` on a worker thread, so a local model never blocks the
        event loop, and one left running past its budget holds none of the loop's executor
        threads (which the application's own ``to_thread`` calls and the loop's shutdown wait
        for)."""
        finished = await arun_in_thread(lambda: self.rank(query, documents, top_k, timeout), None)
        if finished.error is not None:
            raise finished.error
        return finished.value  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider!r}, {self.model!r})"


class ProviderStep(RerankStep):
    """A remote reranker. Its budget is its call's HTTP timeout, which bounds each read, not
    the exchange: a server that trickles its answer keeps a call going past any timeout, so a
    sync chain runs it on a worker thread and stops waiting at the budget."""

    kind = "provider"
    ends_at_budget = True

    def __init__(
        self,
        reranker: RerankProvider,
        *,
        gate: Gate | None = None,
        timeout: float | None = None,
    ) -> None:
        super().__init__(
            reranker.provider,
            reranker.model,
            billing=reranker.billing,
            gate=gate,
            timeout=timeout,
        )
        self.reranker = reranker

    @property
    def missing_key(self) -> str | None:
        return self.reranker.missing_key

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        answer = self.reranker.rerank(query, documents, top_k=top_k, timeout=timeout)
        return StepRanking(list(answer.results), answer.usage)

    async def arank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        answer = await self.reranker.arerank(query, documents, top_k=top_k, timeout=timeout)
        return StepRanking(list(answer.results), answer.usage)


def ranked_by_scores(scores: Sequence[float], top_k: int | None) -> list[ScoredDocument]:
    """Documents by score, highest first, ties in input order, cut at ``top_k``;
    ``InvalidAnswer`` when a score is not a finite number."""
    if not all(map(math.isfinite, scores)):
        raise InvalidAnswer("a score is not a finite number")
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if top_k is not None:
        order = order[:top_k]
    return [_scored({"index": i, "relevance_score": scores[i]}) for i in order]


class CrossEncoderStep(RerankStep):
    """A local cross-encoder: ``model.predict([(query, document), ...])`` scores each pair."""

    kind = "cross_encoder"

    def __init__(
        self,
        model: Any,
        *,
        name: str | None = None,
        provider: str = "sentence_transformers",
        batch_size: int | None = None,
        gate: Gate | None = None,
        timeout: float | None = None,
    ) -> None:
        if not callable(getattr(model, "predict", None)):
            raise TypeError(
                f"CrossEncoderStep needs a model with predict(pairs), not {type(model).__name__}"
            )
        super().__init__(provider, name or local_model_name(model), gate=gate, timeout=timeout)
        self.cross_encoder = model
        self.batch_size = batch_size

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        options = {} if self.batch_size is None else {"batch_size": self.batch_size}
        predicted = self.cross_encoder.predict([(query, d) for d in documents], **options)
        raw = predicted.tolist() if callable(getattr(predicted, "tolist", None)) else predicted
        scores = _scores(raw)
        if len(scores) != len(documents):
            raise ValueError(f"{len(scores)} scores for {len(documents)} documents")
        return StepRanking(ranked_by_scores(scores, top_k))


def _scores(raw: Iterable[object]) -> list[float]:
    """A model's scores as floats; ``InvalidAnswer`` (naming the type) for one that is no
    finite number, a bool or a string among them."""
    scores: list[float] = []
    for value in raw:
        score = score_of(value)
        if score is None:
            raise InvalidAnswer(f"a score is a {type(value).__name__}, not a finite number")
        scores.append(score)
    return scores


_WORDS = re.compile(r"\w+")


def _terms(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


INLINE_CHARACTERS = 4096
"""BM25 over documents of at most this many characters in all (about a millisecond of work) is
run on a sync chain's own thread, where a hand-off to a worker would cost a noticeable share;
more runs on a worker thread, which the chain stops waiting for at the step's budget."""


class BM25Step(RerankStep):
    """BM25 (Okapi) over the documents given, from ``rank-bm25``; words are lower-cased
    ``\\w+`` runs. Needs ``pip install 'spanledger[bm25]'``."""

    kind = "bm25"

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        gate: Gate | None = None,
        timeout: float | None = None,
    ) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError as missing:
            raise MissingExtra(
                "BM25Step needs rank-bm25: pip install 'spanledger[bm25]'", extra="bm25"
            ) from missing
        super().__init__("rank_bm25", "bm25okapi", gate=gate, timeout=timeout)
        self._okapi = BM25Okapi
        self.k1, self.b = k1, b

    def runs_inline(self, documents: Sequence[str]) -> bool:
        return len(documents) <= INLINE_CHARACTERS and sum(map(len, documents)) <= INLINE_CHARACTERS

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        """The ranking; past ``timeout`` seconds it stops at its next look at the clock
        (``TimeoutError``), so a run the chain stopped waiting for does not go on spending a
        core for nothing."""
        ends = None if timeout is None else time.monotonic() + timeout
        corpus: list[list[str]] = []
        for start in range(0, len(documents), _TOKENIZED_BETWEEN_LOOKS):
            _in_time(ends)
            corpus += [_terms(d) for d in documents[start : start + _TOKENIZED_BETWEEN_LOOKS]]
        if not any(corpus):  # nothing to score: every document ties at zero
            return StepRanking(ranked_by_scores([0.0] * len(documents), top_k))
        _in_time(ends)
        scores = self._okapi(corpus, k1=self.k1, b=self.b).get_scores(_terms(query))
        return StepRanking(ranked_by_scores([float(score) for score in scores], top_k))


_TOKENIZED_BETWEEN_LOOKS = 256
"""Documents BM25 splits into words between two looks at the clock."""


def _in_time(ends: float | None) -> None:
    if ends is not None and time.monotonic() > ends:
        raise TimeoutError("BM25 ran past its budget")


class IdentityStep(RerankStep):
    """The input order, on purpose: a chain that reaches it keeps the documents as given
    (scores 0.0) and records the step as ``skipped`` with the reason ``identity``."""

    kind = "identity"

    def __init__(self) -> None:
        super().__init__("local", "identity")

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        size = len(documents) if top_k is None else min(top_k, len(documents))
        return StepRanking([ScoredDocument(index=i, relevance_score=0.0) for i in range(size)])


RankFunction = Callable[[str, Sequence[str], int | None], Any]


class CallableStep(RerankStep):
    """Your function (sync or ``async``) ``(query, documents, top_k)``, returning a
    ``RerankResponse``, ``StepRanking``, or a list of ``ScoredDocument`` or ``(index, score)``
    pairs, best first. ``billing`` says what it bills by when it calls a paid service (return
    the usage in a ``StepRanking`` or ``RerankResponse``); by default it is local: nothing
    billed."""

    kind = "callable"

    def __init__(
        self,
        function: RankFunction,
        *,
        name: str | None = None,
        provider: str = "local",
        billing: str | None = "local",
        gate: Gate | None = None,
        timeout: float | None = None,
    ) -> None:
        if not callable(function):
            raise TypeError(f"CallableStep needs a function, not {type(function).__name__}")
        label = name or getattr(function, "__qualname__", None) or type(function).__name__
        super().__init__(provider, str(label), billing=billing, gate=gate, timeout=timeout)
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        answer = self.function(query, documents, top_k)
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
        return _as_ranked(answer)

    async def arank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        if self.is_async:
            return _as_ranked(await self.function(query, documents, top_k))
        return await super().arank(query, documents, top_k, timeout)


async def _awaited(answer: Awaitable[Any]) -> Any:
    return await answer


def _as_ranked(answer: object) -> StepRanking:
    """A function's answer as a ``StepRanking``; ``InvalidAnswer`` when it is no ranking at
    all. Its results are checked against the outcome contract afterwards."""
    if isinstance(answer, StepRanking):
        return answer
    if isinstance(answer, RerankResponse):
        return StepRanking(list(answer.results), answer.usage)
    if isinstance(answer, list | tuple):
        results: list[ScoredDocument] = []
        for item in answer:
            if isinstance(item, ScoredDocument):
                results.append(item)
            elif isinstance(item, tuple) and len(item) == 2:
                results.append(_pair(item[0], item[1]))
            else:
                kind = type(item).__name__
                raise InvalidAnswer(f"a ranking item must be (index, score), not a {kind}")
        return StepRanking(results)
    raise InvalidAnswer(f"a step must return a ranking, not a {type(answer).__name__}")


def _pair(index: object, score: object) -> ScoredDocument:
    """An ``(index, score)`` pair as a result, taken as it is: the index a whole number, the
    score a finite number, neither a bool nor text (nothing is converted from a string). What
    is refused is named by its type, never quoted."""
    if isinstance(index, bool) or not isinstance(index, numbers.Integral):
        raise InvalidAnswer(f"a ranking item's index is a {type(index).__name__}, not an int")
    number = score_of(score)
    if number is None:
        kind = type(score).__name__
        raise InvalidAnswer(f"a ranking item's score is a {kind}, not a finite number")
    return _scored({"index": int(index), "relevance_score": number})


def as_step(thing: object) -> RerankStep | None:
    """``thing`` as a step (``None`` when it is nothing that ranks): a step as it is, a
    ``RerankProvider``, a cross-encoder (has ``predict``), or a function."""
    if isinstance(thing, RerankStep):
        return thing
    if isinstance(thing, RerankProvider):
        return ProviderStep(thing)
    if isinstance(thing, type):  # a class, even a model's class, is not a model
        return None
    if callable(getattr(thing, "predict", None)):
        return CrossEncoderStep(thing)
    if callable(thing):
        return CallableStep(thing)
    return None


def step(thing: object, *, gate: Gate | None = None, timeout: float | None = None) -> RerankStep:
    """``thing`` as a step with a gate and a deadline of its own (``timeout`` seconds, always
    within what is left of the chain's)."""
    made = as_step(thing)
    if made is None:
        raise TypeError(f"{type(thing).__name__} is not something that ranks")
    if isinstance(thing, RerankStep):
        made = _copy(made)
    made.gate = gate if gate is not None else made.gate
    made.timeout = timeout if timeout is not None else made.timeout
    return made


def _copy(original: RerankStep) -> RerankStep:
    duplicate = object.__new__(type(original))
    duplicate.__dict__.update(original.__dict__)
    return duplicate
