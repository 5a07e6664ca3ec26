"""The request's context captured where it happens: served passages, each model call's prompt and
answer, matched in memory and reported as counts, never as text."""

from __future__ import annotations

import math

import spanledger
from spanledger.attribution import ProblemKind
from spanledger.attribution.context import Caps, ContextCapture, Passage
from spanledger.attribution.tracker import FrameTracker
from spanledger.attribution.uses import Evidence
from spanledger.events import AttributionRecord

SENTINEL = "SENTINEL-ctx-5d1e"
MOON = f"The moon's gravity drives the tides {SENTINEL}. Tides rise and fall twice a day."
CLOCK = f"Clocks tick every second {SENTINEL}, and some clocks chime on the hour."
SUN = f"The sun pulls on the sea too {SENTINEL}. Spring tides come twice a month."


def tokens(text: str) -> int:
    return math.ceil(len(text.encode()) / 4)


def capture() -> tuple[FrameTracker, ContextCapture]:
    tracker = FrameTracker()
    return tracker, ContextCapture(tracker)


def test_the_share_is_the_cited_part_of_what_the_prompts_rendered() -> None:
    tracker, context = capture()
    moon, clock, sun = context.served(
        [Passage(MOON, "m"), Passage(CLOCK, "c"), Passage(SUN, "s")], provider_id="search"
    )
    call = context.prompted([f"Source 1:\n{MOON}\n\nSource 2:\n{SUN}", f"Question {SENTINEL}?"])
    context.answered(call, f"Because of the moon [1] {SENTINEL}.", input_tokens=120)
    report = tracker.report()
    assert report.rendered_tokens() == tokens(MOON) + tokens(SUN)
    assert report.cited_tokens() == tokens(MOON)
    assert report.cited_token_share() == tokens(MOON) / (tokens(MOON) + tokens(SUN))
    use = report.use_of(moon)
    assert use is not None
    assert (use.evidence, use.renders) == (Evidence.PROMPT_LABEL, 1)
    assert report.use_of(clock) is not None
    assert not report.use_of(clock).rendered  # type: ignore[union-attr]
    assert report.is_reconcilable()
    assert sun in {use.frame for use in report.uses}


def test_an_answer_with_no_evidence_cites_nothing_and_the_share_is_zero() -> None:
    tracker, context = capture()
    context.served([Passage(MOON)], provider_id="search")
    call = context.prompted([MOON])
    context.answered(call, "The tides follow the moon.")
    assert tracker.report().cited_token_share() == 0.0


def test_a_truncated_frame_counts_only_the_part_that_reached_the_prompt() -> None:
    tracker, context = capture()
    (sun,) = context.served([Passage(SUN)], provider_id="search")
    call = context.prompted([f"Source 1:\n{SUN[:40]}"])
    context.answered(call, "Spring tides [1].")
    use = tracker.report().use_of(sun)
    assert use is not None
    assert use.rendered_tokens == 10
    assert tracker.report().cited_tokens() == 10


def test_several_calls_count_each_frame_once_with_the_calls_that_rendered_it() -> None:
    tracker, context = capture()
    (moon,) = context.served([Passage(MOON)], provider_id="search")
    for _ in range(3):
        call = context.prompted([f"[1] {MOON}"])
        context.answered(call, "Refined [1].")
    report = tracker.report()
    use = report.use_of(moon)
    assert use is not None
    assert (use.renders, use.rendered_tokens) == (3, tokens(MOON))
    assert report.is_reconcilable()


def test_provider_citations_are_the_strongest_evidence() -> None:
    tracker, context = capture()
    moon, clock = context.served([Passage(MOON), Passage(CLOCK)], provider_id="search")
    call = context.prompted([f"[1] {MOON}", f"[2] {CLOCK}"])
    context.answered(call, "Both [1] [2].", cited=[MOON], marked=[CLOCK])
    report = tracker.report()
    assert report.use_of(moon).evidence is Evidence.PROVIDER_CITATION  # type: ignore[union-attr]
    assert report.use_of(clock).evidence is Evidence.FRAMEWORK_MARKING  # type: ignore[union-attr]


def test_a_reranker_copy_of_a_passage_is_the_same_frame_and_selects_it() -> None:
    tracker, context = capture()
    candidates = context.served(
        [Passage(MOON, "m"), Passage(CLOCK, "c")], provider_id="search", selected=False
    )
    chosen = context.served([Passage(MOON)], provider_id="rerank")
    assert chosen == [candidates[0]]
    report = tracker.report()
    assert report.use_of(candidates[0]).selected  # type: ignore[union-attr]
    assert not report.use_of(candidates[1]).selected  # type: ignore[union-attr]
    assert sum(1 for _ in report.usage.served_frames()) == 2


def test_an_unknown_label_is_a_problem_that_quotes_nothing() -> None:
    tracker, context = capture()
    context.served([Passage(MOON)], provider_id="search")
    call = context.prompted([f"[1] {MOON}"])
    context.answered(call, f"Moon [1], and [7] {SENTINEL}.")
    problems = tracker.report().problems()
    assert [problem.kind for problem in problems] == [ProblemKind.UNKNOWN_LABEL]
    assert SENTINEL not in repr(problems)


def test_what_the_caps_cut_is_counted_and_reported() -> None:
    tracker = FrameTracker()
    context = ContextCapture(tracker, Caps(frames=1, prompt_chars=10))
    context.served([Passage(MOON), Passage(CLOCK)], provider_id="search")
    context.prompted([MOON])
    context.close()
    (problem,) = tracker.report().problems()
    assert problem.kind is ProblemKind.CAPTURE_CUT
    assert "1 frames" in problem.detail
    assert "prompt chars" in problem.detail


def test_closing_forgets_every_text() -> None:
    _, context = capture()
    context.served([Passage(MOON)], provider_id="search")
    context.prompted([MOON])
    context.close()
    assert SENTINEL not in repr(vars(context))


def test_a_request_whose_context_was_captured_reports_itself_when_it_closes() -> None:
    records: list[AttributionRecord] = []

    class Sink:
        def emit(self, event: object) -> None:
            pass

        def attribution(self, record: AttributionRecord) -> None:
            records.append(record)

    with spanledger.use(spanledger.Recorder([Sink()])):
        with spanledger.request("turn-auto") as turn:
            turn.context.served([Passage(MOON)], provider_id="search")
            call = turn.context.prompted([f"[1] {MOON}"])
            turn.context.answered(call, "It is the moon [1].")
        with spanledger.request("turn-by-hand") as turn:
            turn.serve([MOON], provider_id="search")
    assert [record.request_id for record in records] == ["turn-auto"]
    assert records[0].cited_token_share == 1.0
    assert SENTINEL not in records[0].model_dump_json()


def test_serving_by_hand_what_a_capture_served_counts_each_passage_once() -> None:
    with spanledger.use(spanledger.Recorder([])), spanledger.request("both") as turn:
        captured = turn.context.served([Passage(MOON, "m"), Passage(CLOCK, "c")], provider_id="fw")
        by_hand = turn.serve([MOON, SUN], provider_id="kb", ids=["moon", "sun"])
        turn.render(by_hand[:1])
        report = turn.report(emit=False).attribution
    assert by_hand[0].frame == captured[0]  # the same text is the frame the capture named
    assert len(report.uses) == 3
    assert report.problems() == []
    assert report.rendered_frames() == 1


def test_a_capture_after_serving_by_hand_names_the_hand_served_frames() -> None:
    with spanledger.use(spanledger.Recorder([])), spanledger.request("both") as turn:
        by_hand = turn.serve([MOON, CLOCK], provider_id="kb", ids=["moon", "clock"])
        captured = turn.context.served([Passage(MOON), Passage(SUN)], provider_id="fw")
        call = turn.context.prompted([f"[1] {MOON}", "Why?"])
        turn.context.answered(call, "The moon [1].")
        report = turn.report(emit=False).attribution
    assert captured[0] == by_hand[0].frame
    assert len(report.uses) == 3
    assert report.problems() == []
    [cited] = [use for use in report.uses if use.cited]
    assert cited.frame == by_hand[0].frame


def test_a_framework_s_name_for_a_provider_is_priced_under_spanledger_s_id() -> None:
    """LangChain names Bedrock ``amazon_bedrock``, LlamaIndex Mistral ``mistralai``: the call
    is priced under the ids the price table uses."""
    _, context = capture()
    context.served([Passage(MOON, "m")], provider_id="search")
    for given, expected in (("amazon_bedrock", "aws.bedrock"), ("mistralai", "mistral_ai")):
        call = context.prompted([f"[1] {MOON}"])
        context.answered(call, "So [1].", provider=given, model="m", input_tokens=10)
        assert call.provider == expected
    call = context.prompted([f"[1] {MOON}"])
    context.answered(call, "So [1].", provider="acme-llm", model="m", input_tokens=10)
    assert call.provider == "acme-llm"  # a name spanledger does not know is kept as it is
