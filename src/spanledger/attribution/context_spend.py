"""What a request's context cost as the models' input tokens, and how much of it went unused.

Retrieval is the smaller bill: every frame rendered into a prompt is paid again as input tokens
of the model call that read it. For each model call whose prompt was matched, each frame's share
of that prompt (the characters of it the prompt held over the prompt's characters) times the
input tokens the provider reported is the frame's part of the call's input; priced at the
model's ``input_per_mtok`` from the price table, summed over the request's calls and frames,
that is the context's spend, the cited frames' part of it, and the rest: the unused context's
spend.

Unknown is never zero: a call that rendered frames without reporting its input tokens, a model
with no input rate, rendered frames no captured prompt held, a capture cut short by its caps,
or rates in several currencies make the figures unknown, with the reason. A partial sum is
never handed out as the whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction

from spanledger.attribution.context import ModelCall
from spanledger.attribution.frames import FrameId
from spanledger.attribution.matching import covered
from spanledger.attribution.summary import counted
from spanledger.attribution.uses import AttributionReport
from spanledger.ledger.prices import PriceTable

__all__ = ["PLACES", "ContextSpend", "price_context"]

PLACES = 18
"""Decimal places the context's spend is rounded to (half even). A frame's share of a prompt
is rarely a terminating decimal; 10**-18 of a currency unit is far below any bill."""
_MILLION = 1_000_000
_LABELS_SHOWN = 3
"""Models without an input rate named in a reason; the rest are counted."""


@dataclass(frozen=True)
class ContextSpend:
    """The request's context priced as input tokens: all of it, its cited part, and the unused
    rest, in ``currency``; or, with ``unknown`` saying why, none of the three."""

    context: Decimal | None = None
    cited: Decimal | None = None
    currency: str | None = None
    unknown: str | None = None

    @property
    def unused(self) -> Decimal | None:
        """The spend on rendered context the answer did not cite (exact: both are rounded to
        ``PLACES``)."""
        if self.context is None or self.cited is None:
            return None
        with localcontext() as exact:
            exact.prec = 80
            return self.context - self.cited


def price_context(
    calls: Sequence[ModelCall],
    attribution: AttributionReport,
    prices: PriceTable | None,
    at: datetime,
    *,
    cut: Mapping[str, int] | None = None,
) -> ContextSpend:
    """Price the context the request's model ``calls`` read, at the input rates ``prices``
    gives at ``at``; ``attribution`` says which frames were rendered and cited, ``cut`` what
    the capture's caps left unexamined."""
    reasons = _capture_gaps(calls, attribution, cut or {})
    rendering = [call for call in calls if _rendered(call)]
    unreported = sum(1 for call in rendering if call.input_tokens is None)
    if unreported:
        reasons.append(
            f"{unreported} of {counted(len(rendering), 'model call')} that rendered context "
            "reported no input tokens"
        )
    unnamed = sum(1 for call in rendering if not call.provider or not call.model)
    if unnamed:
        reasons.append(f"{counted(unnamed, 'model call')} that rendered context named no model")
    priceable = [
        call for call in rendering if call.input_tokens is not None and call.provider and call.model
    ]
    sums = _Sums()
    if priceable and prices is None:
        reasons.append("no price table to read the models' input rates from")
    elif prices is not None:
        for call in priceable:
            sums.add(call, attribution, prices, at)
    if sums.no_rate:
        reasons.append(_no_rate(sums.no_rate))
    if len(sums.currencies) > 1:
        reasons.append(f"model calls priced in {len(sums.currencies)} currencies")
    if reasons:
        return ContextSpend(unknown="; ".join(reasons))
    currency = next(iter(sums.currencies), None)
    return ContextSpend(_decimal(sums.context), _decimal(sums.cited), currency, None)


@dataclass
class _Sums:
    """The exact running sums over the priced calls, and what could not be priced."""

    context: Fraction = Fraction(0)
    cited: Fraction = Fraction(0)
    currencies: set[str] = field(default_factory=set)
    no_rate: dict[str, int] = field(default_factory=dict)

    def add(
        self, call: ModelCall, attribution: AttributionReport, prices: PriceTable, at: datetime
    ) -> None:
        """Add one call's frames at its model's input rate (or note that it has none)."""
        label = f"{call.provider}/{call.model}"
        entry = prices.lookup(call.provider or "", call.model or "", at).entry
        rate = entry.input_per_mtok if entry is not None else None
        if entry is None or rate is None:
            self.no_rate[label] = self.no_rate.get(label, 0) + 1
            return
        self.currencies.add(entry.currency)
        for frame, part in _parts(call).items():
            amount = part * Fraction(rate) / _MILLION
            self.context += amount
            if _is_cited(attribution, frame):
                self.cited += amount


def _capture_gaps(
    calls: Sequence[ModelCall], attribution: AttributionReport, cut: Mapping[str, int]
) -> list[str]:
    """Why the calls matched are not the request's whole context, if they are not."""
    if not calls:
        return ["no model call was captured"]
    gaps: list[str] = []
    if cut.get("calls"):
        gaps.append(f"{counted(cut['calls'], 'model call')} past the capture's cap not matched")
    if cut.get("prompt_chars"):
        gaps.append(
            f"{counted(cut['prompt_chars'], 'prompt character')} past the capture's cap "
            "not examined"
        )
    seen = {frame for call in calls for frame in call.match.spans}
    unseen = len({use.frame for use in attribution.uses if use.rendered} - seen)
    if unseen:
        gaps.append(f"{counted(unseen, 'rendered frame')} held by no captured prompt")
    return gaps


def _rendered(call: ModelCall) -> bool:
    return any(covered(spans) for spans in call.match.spans.values())


def _parts(call: ModelCall) -> dict[FrameId, Fraction]:
    """Each frame's part of the call's input tokens: its share of the prompt's characters."""
    tokens = call.input_tokens or 0
    size = call.match.prompt_chars
    if size <= 0:
        return {}
    return {
        frame: Fraction(covered(spans) * tokens, size) for frame, spans in call.match.spans.items()
    }


def _is_cited(attribution: AttributionReport, frame: FrameId) -> bool:
    use = attribution.use_of(frame)
    return use is not None and use.rendered and use.cited


def _no_rate(labels: Mapping[str, int]) -> str:
    """The models without an input rate, the first few by name."""
    named = sorted(labels)
    shown = ", ".join(
        f"{label} ({counted(labels[label], 'call')})" for label in named[:_LABELS_SHOWN]
    )
    more = len(named) - _LABELS_SHOWN
    return "no input rate for " + shown + (f" and {more} more models" if more > 0 else "")


def _decimal(amount: Fraction) -> Decimal:
    """``amount`` rounded half even to ``PLACES`` decimal places, trailing zeros dropped."""
    with localcontext() as exact:
        exact.prec = 80
        value = (Decimal(amount.numerator) / Decimal(amount.denominator)).quantize(
            Decimal(1).scaleb(-PLACES), rounding=ROUND_HALF_EVEN
        )
        if value == value.to_integral_value():
            return value.quantize(Decimal(1))
        return value.normalize()
