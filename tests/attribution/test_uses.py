"""ContextUse coherence and the AttributionReport join: figures, problems, complexity."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pytest

from spanledger.attribution import (
    AttributionReport,
    ContextUse,
    FrameId,
    Problem,
    ProblemKind,
    ProviderUsage,
    ServedFrame,
    UsageReport,
)

from .conftest import AS_OF, SENTINEL, frame, report_of, served, usage_of

A = served("a", 100)
B = served("b", 300)


def kinds(report: AttributionReport) -> list[ProblemKind]:
    return [problem.kind for problem in report.problems()]


# --------------------------------------------------------------------------- ContextUse


@pytest.mark.parametrize(
    ("selected", "rendered", "cited", "coherent"),
    [
        (False, False, False, True),
        (True, False, False, True),
        (True, True, False, True),
        (True, True, True, True),
        (False, True, False, False),  # rendered, never selected
        (False, True, True, False),
        (True, False, True, False),  # cited, never rendered
        (False, False, True, False),
    ],
)
def test_cited_implies_rendered_implies_selected(
    selected: bool, rendered: bool, cited: bool, coherent: bool
) -> None:
    assert ContextUse(frame("a"), selected, rendered, cited).is_coherent() is coherent


@pytest.mark.parametrize(
    ("rendered", "cited", "expected"),
    [(True, False, True), (True, True, False), (False, False, False), (False, True, False)],
)
def test_rendered_but_uncited(rendered: bool, cited: bool, expected: bool) -> None:
    use = ContextUse(frame("a"), selected=True, rendered=rendered, cited=cited)
    assert use.is_rendered_but_uncited() is expected


def test_a_use_defaults_to_no_observation() -> None:
    use = ContextUse(frame("a"))
    assert (use.selected, use.rendered, use.cited) == (False, False, False)


# --------------------------------------------------------------------------- reference figures


def test_reference_rendered_and_cited_against_rendered_only() -> None:
    report = report_of(
        [ContextUse(A.frame, True, True, True), ContextUse(B.frame, True, True, False)], A, B
    )

    assert report.cited_tokens() == 100
    assert report.uncited_rendered_tokens() == 300
    assert report.rendered_tokens() == 400
    assert report.cited_token_share() == 0.25
    assert report.is_reconcilable()
    assert report.problems() == []


def test_reference_selected_only_is_neither_credit_nor_debit() -> None:
    report = report_of(
        [ContextUse(A.frame, True, True, True), ContextUse(B.frame, selected=True)], A, B
    )

    assert report.cited_tokens() == 100
    assert report.uncited_rendered_tokens() == 0
    assert report.cited_token_share() == 1.0
    assert report.is_reconcilable()


def test_reference_a_use_naming_a_frame_never_billed_is_not_reconcilable() -> None:
    ghost = FrameId("docs", "ghost")
    report = report_of(
        [ContextUse(A.frame, True, True, True), ContextUse(ghost, True, True, True)], A, B
    )

    assert not report.is_reconcilable()
    [problem] = report.problems()
    assert problem.kind is ProblemKind.NOT_BILLED
    assert problem.frame == ghost
    assert "docs/ghost" in problem.detail
    assert report.cited_tokens() == 100  # the ghost adds nothing


def test_a_frame_with_the_right_id_and_the_wrong_digest_is_not_billed() -> None:
    mis_keyed = FrameId("docs", "a", "sha256:" + "0" * 64)  # same ids, other content
    report = report_of([ContextUse(mis_keyed, True, True, True)], A)

    assert kinds(report) == [ProblemKind.NOT_BILLED]
    assert report.cited_tokens() == 0
    assert report.cited_token_share() is None


# --------------------------------------------------------------------------- share edge cases


def test_share_is_none_when_nothing_was_rendered() -> None:
    report = report_of([ContextUse(A.frame, selected=True), ContextUse(B.frame, True)], A, B)

    assert report.cited_token_share() is None
    assert report.cited_tokens() == 0
    assert report.uncited_rendered_tokens() == 0
    assert report.is_reconcilable()


def test_share_is_none_without_any_use() -> None:
    report = report_of([], A, B)
    assert report.cited_token_share() is None
    assert report.is_reconcilable()


def test_share_is_zero_when_rendered_context_went_uncited() -> None:
    report = report_of([ContextUse(A.frame, True, True), ContextUse(B.frame, True, True)], A, B)

    share = report.cited_token_share()
    assert share is not None
    assert share == 0.0
    assert report.uncited_rendered_tokens() == 400


def test_rendering_only_frames_that_cost_nothing_gives_no_share() -> None:
    empty = ServedFrame.of("docs", "empty", "")
    report = report_of([ContextUse(empty.frame, True, True, True)], empty)
    assert report.cited_token_share() is None


def test_a_cited_but_unrendered_frame_cannot_push_the_share_over_one() -> None:
    report = report_of(
        [
            ContextUse(A.frame, True, True, False),  # rendered, 100 tokens
            ContextUse(B.frame, True, False, True),  # cited without being rendered: incoherent
        ],
        A,
        B,
    )

    share = report.cited_token_share()
    assert share is not None
    assert 0.0 <= share <= 1.0
    assert share == 0.0
    assert report.cited_tokens() == 0
    assert not report.is_reconcilable()
    [problem] = report.problems()
    assert problem.kind is ProblemKind.INCOHERENT
    assert problem.frame == B.frame
    assert "cited but not rendered" in problem.detail


def test_a_rendered_but_unselected_frame_is_incoherent() -> None:
    report = report_of([ContextUse(A.frame, selected=False, rendered=True)], A)

    [problem] = report.problems()
    assert problem.kind is ProblemKind.INCOHERENT
    assert "rendered but not selected" in problem.detail
    assert not report.is_reconcilable()
    assert not report.is_coherent()


# --------------------------------------------------------------------------- duplicates


def test_duplicate_uses_of_one_frame_are_counted_once_and_reported() -> None:
    report = report_of(
        [
            ContextUse(A.frame, True, True, True),
            ContextUse(A.frame, True, True, True),
            ContextUse(B.frame, True, True, False),
        ],
        A,
        B,
    )

    assert report.cited_tokens() == 100
    assert report.rendered_tokens() == 400
    assert report.cited_token_share() == 0.25
    assert not report.is_reconcilable()
    [problem] = report.problems()
    assert problem.kind is ProblemKind.DUPLICATE_USE
    assert problem.frame == A.frame


def test_duplicate_uses_are_merged_by_observation() -> None:
    report = report_of(
        [ContextUse(A.frame, True, True, False), ContextUse(A.frame, True, True, True)], A
    )

    assert report.use_of(A.frame) == ContextUse(A.frame, True, True, True)
    assert report.cited_tokens() == 100
    assert report.uncited_rendered_tokens() == 0
    assert kinds(report) == [ProblemKind.DUPLICATE_USE]


def test_a_frame_billed_by_two_providers_costs_its_first_line_item() -> None:
    twice = FrameId("docs", "x")
    usage = usage_of([ServedFrame(twice, 10)], [ServedFrame(twice, 99)])
    report = AttributionReport.of([ContextUse(twice, True, True, True)], usage)
    assert report.cited_tokens() == 10


def test_use_of_an_unknown_frame_is_none() -> None:
    assert report_of([], A).use_of(A.frame) is None


# --------------------------------------------------------------------------- other problems


def test_inconsistent_usage_makes_the_report_unreconcilable() -> None:
    usage = UsageReport(None, 999, AS_OF, (ProviderUsage.of("docs", [A]),))
    report = AttributionReport.of([ContextUse(A.frame, True, True, True)], usage)

    assert kinds(report) == [ProblemKind.INCONSISTENT_USAGE]
    assert not report.is_reconcilable()
    assert report.cited_token_share() == 1.0


@pytest.mark.parametrize("kind", [ProblemKind.UNKNOWN_LABEL, ProblemKind.BAD_IDENTITY])
def test_problems_handed_in_are_kept(kind: ProblemKind) -> None:
    extra = Problem(kind, "reported by the tracker")
    report = AttributionReport.of([ContextUse(A.frame, True, True, True)], usage_of([A]), [extra])

    assert report.problems() == [extra]
    assert not report.is_reconcilable()


def test_every_problem_kind_has_a_stable_name() -> None:
    assert {kind.value for kind in ProblemKind} == {
        "not_billed",
        "incoherent",
        "duplicate_use",
        "unknown_label",
        "bad_identity",
        "inconsistent_usage",
        "capture_cut",
    }


def test_problem_details_never_contain_frame_content() -> None:
    secret = f"{SENTINEL} the passage text itself"
    billed = ServedFrame.of("docs", "s1", secret)
    ghost = FrameId.of("docs", "s2", secret)
    unselected = ServedFrame.of("docs", "s3", secret + " 3")
    usage = UsageReport(None, 1, AS_OF, (ProviderUsage.of("docs", [billed, unselected]),))
    report = AttributionReport.of(
        [
            ContextUse(billed.frame, True, False, True),
            ContextUse(billed.frame, True, True, True),
            ContextUse(ghost, True, True, True),
            ContextUse(unselected.frame, False, True, False),
        ],
        usage,
    )

    problems = report.problems()
    assert {p.kind for p in problems} == {
        ProblemKind.INCONSISTENT_USAGE,
        ProblemKind.INCOHERENT,
        ProblemKind.DUPLICATE_USE,
        ProblemKind.NOT_BILLED,
    }
    for problem in problems:
        assert SENTINEL not in problem.detail
        assert "passage text" not in problem.detail
        assert "sha256:" not in problem.detail


# --------------------------------------------------------------------------- complexity


def _large(count: int) -> tuple[list[ContextUse], UsageReport]:
    frames = [ServedFrame(FrameId("docs", str(i)), 1 + i % 7) for i in range(count)]
    uses = [ContextUse(f.frame, True, i % 3 != 0, i % 3 == 1) for i, f in enumerate(frames)]
    return uses, UsageReport.of([ProviderUsage.of("docs", frames)], as_of=AS_OF)


def _best_time(run: Callable[[], object], repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best


def _whole_report(uses: list[ContextUse], usage: UsageReport) -> Callable[[], object]:
    def run() -> object:
        report = AttributionReport.of(uses, usage)  # fresh: nothing cached between runs
        return (
            report.cited_tokens(),
            report.uncited_rendered_tokens(),
            report.cited_token_share(),
            report.is_reconcilable(),
        )

    return run


def test_a_report_over_100k_uses_and_frames_is_fast_and_exact() -> None:
    uses, usage = _large(100_000)
    report = AttributionReport.of(uses, usage)

    started = time.perf_counter()
    cited, uncited = report.cited_tokens(), report.uncited_rendered_tokens()
    share, reconcilable = report.cited_token_share(), report.is_reconcilable()
    elapsed = time.perf_counter() - started

    expected_cited = sum(1 + i % 7 for i in range(100_000) if i % 3 == 1)
    expected_uncited = sum(1 + i % 7 for i in range(100_000) if i % 3 == 2)
    assert (cited, uncited) == (expected_cited, expected_uncited)
    assert share == expected_cited / (expected_cited + expected_uncited)
    assert reconcilable
    assert elapsed < 2.0, f"100k uses took {elapsed:.2f}s"


def test_report_cost_grows_linearly_with_uses_and_frames() -> None:
    # 8x the data: about 8x the time when linear (somewhat more once the data outgrows the CPU
    # caches), 64x when quadratic; the bound sits well between the two.
    small = _best_time(_whole_report(*_large(50_000)))
    large = _best_time(_whole_report(*_large(400_000)))

    assert large < 24 * small, f"50k: {small:.3f}s, 400k: {large:.3f}s"
