"""What the context cost as the model calls' input tokens: each frame's share of a prompt's
characters times the input tokens the provider reported, priced at the model's input rate and
summed over the request's calls; the cited part and the unused rest. Unknown, with the reason,
whenever part of it cannot be priced: never $0, never a partial sum.

Workloads are built with the capture API (``turn.context.served/prompted/answered``)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger.attribution import Caps, Passage, RequestReport, RequestScope
from spanledger.attribution.context_spend import PLACES
from spanledger.cli import main
from spanledger.events import AttributionRecord
from spanledger.ledger import Ledger, PriceTable

MOON = "The moon pulls the sea; the tides follow its pull."
CLOCK = "Clocks tick once every second."
SUN = "The sun pulls on the sea too, twice a month more."
QUESTION = "q" * 118  # with MOON, CLOCK and the two newlines between: a prompt of 200 characters
FOLLOW_UP = "r" * 49  # with MOON and one newline: a prompt of 100 characters


def table(*rows: dict[str, Any], currency: str = "USD") -> PriceTable:
    return PriceTable.from_dict({"currency": currency, "prices": list(rows)})


def rate(model: str, input_per_mtok: str, **more: Any) -> dict[str, Any]:
    return {"provider": "openai", "model": model, "input_per_mtok": input_per_mtok, **more}


RATES = table(rate("gpt-4o-mini", "0.15"), rate("gpt-4o", "2.5"))


def two_calls(
    turn: RequestScope,
    *,
    tokens: Sequence[int | None] = (1000, 400),
    models: Sequence[str] = ("gpt-4o-mini", "gpt-4o"),
) -> None:
    """Two model calls over MOON and CLOCK: the first shows both and cites MOON, the second
    shows MOON again."""
    turn.context.served([Passage(MOON, "moon"), Passage(CLOCK, "clock")], provider_id="kb")
    first = turn.context.prompted([MOON, CLOCK, QUESTION])
    turn.context.answered(
        first, "The moon.", cited=[MOON], input_tokens=tokens[0], provider="openai", model=models[0]
    )
    second = turn.context.prompted([MOON, FOLLOW_UP])
    turn.context.answered(
        second, "Yes.", input_tokens=tokens[1], provider="openai", model=models[1]
    )


def reported(
    workload: Any, rates: PriceTable | None = RATES, **report: Any
) -> tuple[RequestReport, AttributionRecord]:
    """The report of one request running ``workload``, on a recorder pricing with ``rates``."""
    recorder = spanledger.Recorder([], prices=rates)
    with spanledger.use(recorder), spanledger.request("turn-1") as turn:
        workload(turn)
        done = turn.report(**report)
    return done, done.record()


def test_the_workload_is_as_counted_by_hand() -> None:
    assert (len(MOON), len(CLOCK), len(QUESTION), len(FOLLOW_UP)) == (50, 30, 118, 49)
    with spanledger.use(spanledger.Recorder([])), spanledger.request("turn-1") as turn:
        two_calls(turn)
        first, second = (call.match for call in turn.context.calls())
    assert first.prompt_chars == 200
    assert second.prompt_chars == 100
    assert [first.rendered_chars(f) for f in first.spans] == [50, 30]
    assert [second.rendered_chars(f) for f in second.spans] == [50]


def test_the_spend_is_each_frames_share_of_each_prompt_at_its_models_rate() -> None:
    _, record = reported(two_calls)
    # call 1, gpt-4o-mini at $0.15/Mtok, 1000 input tokens over a 200-character prompt:
    #   MOON 50/200 -> 250 tokens -> 0.0000375; CLOCK 30/200 -> 150 tokens -> 0.0000225
    # call 2, gpt-4o at $2.50/Mtok, 400 input tokens over a 100-character prompt:
    #   MOON 50/100 -> 200 tokens -> 0.0005
    # MOON was cited, CLOCK was not.
    assert record.context_spend == Decimal("0.00056")
    assert record.cited_context_spend == Decimal("0.0005375")
    assert record.unused_context_spend == Decimal("0.0000225")
    assert record.context_currency == "USD"
    assert record.unknown_context_spend is None
    assert record.model_calls == 2
    assert record.cited_by == {"provider_citation": 1}


def test_input_tokens_not_reported_make_the_spend_unknown_not_zero() -> None:
    _, record = reported(lambda turn: two_calls(turn, tokens=(1000, None)))
    assert (record.context_spend, record.cited_context_spend, record.unused_context_spend) == (
        None,
        None,
        None,
    )
    assert record.context_currency is None
    assert record.unknown_context_spend == (
        "1 of 2 model calls that rendered context reported no input tokens"
    )


def test_a_model_without_an_input_rate_makes_the_spend_unknown() -> None:
    no_entry = table(rate("gpt-4o-mini", "0.15"))
    _, record = reported(two_calls, no_entry)
    assert record.context_spend is None
    assert record.unknown_context_spend == "no input rate for openai/gpt-4o (1 call)"

    per_call_only = table(
        rate("gpt-4o-mini", "0.15"), {"provider": "openai", "model": "gpt-4o", "per_request": "1"}
    )
    _, record = reported(two_calls, per_call_only)
    assert record.context_spend is None
    assert record.unknown_context_spend == "no input rate for openai/gpt-4o (1 call)"


def test_rates_in_two_currencies_make_the_spend_unknown() -> None:
    mixed = table(rate("gpt-4o-mini", "0.15"), rate("gpt-4o", "2.3", currency="EUR"))
    _, record = reported(two_calls, mixed)
    assert record.context_spend is None
    assert record.context_currency is None
    assert record.unknown_context_spend == "model calls priced in 2 currencies"


def test_without_a_price_table_the_spend_is_unknown() -> None:
    _, record = reported(two_calls, None)
    assert record.context_spend is None
    assert record.unknown_context_spend == "no price table to read the models' input rates from"


def test_the_table_given_to_report_prices_the_context() -> None:
    cheaper = table(rate("gpt-4o-mini", "0.15"), rate("gpt-4o", "1.25"))
    _, record = reported(two_calls, None, prices=Ledger(cheaper))
    # call 2's 200 MOON tokens at $1.25/Mtok: 0.00025
    assert record.context_spend == Decimal("0.00031")
    assert record.cited_context_spend == Decimal("0.0002875")


def test_a_call_that_rendered_no_frame_needs_no_tokens_and_costs_no_context() -> None:
    def workload(turn: RequestScope) -> None:
        turn.context.served([Passage(MOON)], provider_id="kb")
        call = turn.context.prompted(["A prompt that holds no passage at all."])
        turn.context.answered(call, "Nothing.", provider="openai", model="gpt-unlisted")

    _, record = reported(workload)
    assert record.context_spend == Decimal(0)
    assert record.unused_context_spend == Decimal(0)
    assert record.unknown_context_spend is None


def test_frames_rendered_where_no_prompt_was_seen_make_the_spend_unknown() -> None:
    def workload(turn: RequestScope) -> None:
        two_calls(turn)
        turn.render(turn.serve([SUN], provider_id="kb", ids=["sun"]))

    _, record = reported(workload)
    assert record.context_spend is None
    assert record.unknown_context_spend == "1 rendered frame held by no captured prompt"


def test_a_request_without_a_model_call_has_an_unknown_context_spend() -> None:
    def workload(turn: RequestScope) -> None:
        turn.render(turn.serve([MOON], provider_id="kb"))

    _, record = reported(workload)
    assert record.context_spend is None
    assert record.unknown_context_spend == "no model call was captured"
    assert record.model_calls == 0


def test_a_capture_cut_by_its_caps_makes_the_spend_unknown() -> None:
    def short_prompts(turn: RequestScope) -> None:
        turn.context.caps = Caps(prompt_chars=120)
        two_calls(turn)

    _, record = reported(short_prompts)
    assert record.context_spend is None
    assert record.unknown_context_spend == (
        "78 prompt characters past the capture's cap not examined"
    )
    assert record.capture_cut == {"prompt_chars": 78}  # QUESTION's past the first 120

    def one_call(turn: RequestScope) -> None:
        turn.context.caps = Caps(calls=1)
        two_calls(turn)

    _, record = reported(one_call)
    assert record.context_spend is None
    assert record.unknown_context_spend == "1 model call past the capture's cap not matched"
    assert record.capture_cut == {"calls": 1}


def test_every_reason_is_said_at_once() -> None:
    _, record = reported(
        lambda turn: two_calls(turn, tokens=(None, 400), models=("gpt-4o-mini", "gpt-9"))
    )
    assert record.unknown_context_spend == (
        "1 of 2 model calls that rendered context reported no input tokens; "
        "no input rate for openai/gpt-9 (1 call)"
    )


def test_a_share_that_does_not_terminate_is_rounded_and_the_three_still_add_up() -> None:
    def thirds(turn: RequestScope) -> None:
        turn.context.served([Passage(MOON), Passage(CLOCK)], provider_id="kb")
        call = turn.context.prompted([MOON, CLOCK, "x" * 69])  # 151 characters
        turn.context.answered(
            call, "The moon.", cited=[MOON], input_tokens=7, provider="openai", model="gpt-4o"
        )

    _, record = reported(thirds)
    assert record.context_spend is not None
    assert record.cited_context_spend is not None
    assert record.unused_context_spend is not None
    # MOON: 50/151 of 7 tokens at $2.50/Mtok = 0.000005794701986754966... (rounded half even)
    assert record.cited_context_spend == Decimal("0.000005794701986755")
    assert record.cited_context_spend.as_tuple().exponent == -PLACES
    assert record.cited_context_spend + record.unused_context_spend == record.context_spend


def test_the_report_text_says_the_spend_or_why_it_is_unknown() -> None:
    report, _ = reported(two_calls)
    text = report.render()
    assert "  context spend: 0.00056 USD (cited 0.0005375 USD, unused 0.0000225 USD)" in text
    assert "  model calls: 2; quoted tokens: 0; cited by: 1 provider_citation" in text
    report, _ = reported(lambda turn: two_calls(turn, tokens=(None, None)))
    assert (
        "  context spend: unknown (2 of 2 model calls that rendered context reported no input "
        "tokens)" in report.render()
    )


def test_the_cited_frames_are_counted_by_the_evidence_that_made_them_so() -> None:
    def workload(turn: RequestScope) -> None:
        turn.context.served([Passage(MOON), Passage(CLOCK), Passage(SUN)], provider_id="kb")
        call = turn.context.prompted([f"[1] {MOON}", f"[2] {CLOCK}", f"[3] {SUN}"])
        answer = "The moon [1] and the sun [3]."
        turn.context.answered(
            call, answer, marked=[CLOCK], input_tokens=90, provider="openai", model="gpt-4o-mini"
        )

    _, record = reported(workload)
    assert record.cited_by == {"framework_marking": 1, "prompt_label": 2}
    assert sum(record.cited_by.values()) == record.frames_cited == 3
    assert record.unused_context_spend == Decimal(0)  # every rendered frame was cited


def test_a_logs_request_id_and_reason_are_made_safe_for_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, record = reported(lambda turn: two_calls(turn, tokens=(None, 1)))
    hostile = record.model_copy(
        update={"request_id": "turn\x1b[2J", "unknown_context_spend": "why\x07"}
    )
    sink = spanledger.JsonlSink(tmp_path / "events.jsonl")
    sink.attribution(hostile)
    sink.shutdown()
    capsys.readouterr()
    assert main(["report", str(tmp_path / "events.jsonl"), "--by", "request"]) == 0
    out = capsys.readouterr().out
    assert "    turn\\x1b[2J: cited token share " in out
    assert "; context spend unknown (why\\x07)\n" in out
    assert "\x1b" not in out
    assert "\x07" not in out
