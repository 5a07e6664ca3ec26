"""FrameId identity and ordering, the accounting token unit, and usage report arithmetic."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from spanledger.attribution import (
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
    token_cost,
)

from .conftest import AS_OF, accounting_tokens, digest_of, served

HEX = "0123456789abcdef" * 4
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64

# --------------------------------------------------------------------------- FrameId


def test_sorted_puts_a_missing_digest_before_a_present_one() -> None:
    with_b = FrameId("docs", "1", DIGEST_B)
    with_a = FrameId("docs", "1", DIGEST_A)
    without = FrameId("docs", "1")
    other_frame = FrameId("docs", "0", DIGEST_B)
    other_provider = FrameId("alpha", "9")

    ordered = sorted([with_b, other_frame, without, other_provider, with_a])

    assert ordered == [other_provider, other_frame, without, with_a, with_b]


def test_ordering_compares_provider_then_frame_then_digest() -> None:
    assert FrameId("a", "z", DIGEST_B) < FrameId("b", "a")
    assert FrameId("a", "a", DIGEST_B) < FrameId("a", "b")
    assert FrameId("a", "a") < FrameId("a", "a", DIGEST_A)
    assert FrameId("a", "a", DIGEST_A) < FrameId("a", "a", DIGEST_B)


def test_ordering_is_total_and_agrees_with_equality() -> None:
    low, high = FrameId("p", "f"), FrameId("p", "f", DIGEST_A)
    assert low < high
    assert not high < low
    assert low <= high
    assert high >= low
    assert high > low
    assert low <= FrameId("p", "f")
    assert low >= FrameId("p", "f")
    assert not low < FrameId("p", "f")


def test_ordering_against_another_type_is_refused() -> None:
    with pytest.raises(TypeError):
        _ = FrameId("p", "f") < ("p", "f", None)


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:" + HEX.upper(),  # uppercase hex
        "sha256:" + HEX[:-1] + "A",  # one uppercase digit
        "sha1:" + HEX,  # wrong prefix
        "SHA256:" + HEX,  # prefix is case-sensitive
        HEX,  # no prefix
        "sha256:" + HEX[:-1],  # 63 digits
        "sha256:" + HEX + "0",  # 65 digits
        "sha256:" + HEX[:-1] + "g",  # not hex
        "sha256:" + HEX + "\n",  # trailing newline
        " sha256:" + HEX,  # leading space
        "sha256:",
        "",
    ],
)
def test_a_present_digest_must_be_sha256_and_64_lowercase_hex(digest: str) -> None:
    with pytest.raises(ValueError, match="content_digest"):
        FrameId("docs", "1", digest)


def test_a_well_formed_digest_and_a_missing_one_are_accepted() -> None:
    assert FrameId("docs", "1", "sha256:" + HEX).content_digest == "sha256:" + HEX
    assert FrameId("docs", "1").content_digest is None


@pytest.mark.parametrize(("provider_id", "frame_id"), [("", "1"), ("docs", "")])
def test_provider_and_frame_ids_are_required(provider_id: str, frame_id: str) -> None:
    with pytest.raises(ValueError, match="provider_id and a frame_id"):
        FrameId(provider_id, frame_id)


@pytest.mark.parametrize("content", ["", "plain ascii", "héllo ☃ 😀", "line\r\nbreak  "])
def test_of_computes_the_sha256_of_the_utf8_content(content: str) -> None:
    expected = "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()

    identity = FrameId.of("docs", "7", content)

    assert identity == FrameId("docs", "7", expected)
    assert identity.content_digest == digest_of(content)


def test_of_distinguishes_content_exactly() -> None:
    assert FrameId.of("docs", "1", "text") != FrameId.of("docs", "1", "text ")
    assert FrameId.of("docs", "1", "text") != FrameId.of("docs", "1", "Text")


def test_equal_triples_are_equal_and_hash_alike() -> None:
    first = FrameId("docs", "1", DIGEST_A)
    second = FrameId("docs", "1", DIGEST_A)

    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1
    assert {first: "cost"}[second] == "cost"
    assert first != FrameId("docs", "1", DIGEST_B)
    assert first != FrameId("docs", "1")
    assert first != FrameId("other", "1", DIGEST_A)


def test_a_frame_id_is_immutable() -> None:
    identity = FrameId("docs", "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        identity.frame_id = "2"  # type: ignore[misc]


def test_str_names_provider_and_frame_but_not_the_digest() -> None:
    assert str(FrameId("docs", "1", DIGEST_A)) == "docs/1"


# --------------------------------------------------------------------------- token_cost


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),  # rounds up, never down
        ("abcdefgh", 2),
        ("😀", 1),  # an emoji is 4 bytes: one token
        ("😀x", 2),
        ("é", 1),  # 2 bytes
        ("ééé", 2),  # 6 bytes: bytes, not characters
        ("日本語", 3),  # 9 bytes
    ],
)
def test_token_cost_is_utf8_bytes_over_four_rounded_up(text: str, expected: int) -> None:
    assert token_cost(text) == expected
    assert accounting_tokens(text) == expected
    assert ServedFrame.of("docs", "1", text).token_cost == expected


def test_served_frame_of_keys_the_frame_by_its_content() -> None:
    frame = ServedFrame.of("docs", "1", "abcde")
    assert frame.frame == FrameId("docs", "1", digest_of("abcde"))
    assert frame.token_cost == 2


@pytest.mark.parametrize("cost", [-1, True, False, 1.0, "3"])
def test_served_frame_refuses_a_negative_or_non_integer_cost(cost: object) -> None:
    with pytest.raises(ValueError, match="token_cost"):
        ServedFrame(FrameId("docs", "1"), cost)  # type: ignore[arg-type]


def test_served_frame_accepts_zero() -> None:
    assert ServedFrame(FrameId("docs", "1"), 0).token_cost == 0


# --------------------------------------------------------------------------- usage reports


def test_provider_usage_of_sums_its_line_items() -> None:
    row = ProviderUsage.of("docs", [served("a", 100), served("b", 300)], rejected=2)

    assert row.frames_served == 2
    assert row.frames_rejected == 2
    assert row.token_cost == 400
    assert row.is_consistent()


def test_provider_usage_with_a_wrong_count_is_inconsistent() -> None:
    items = (served("a", 100), served("b", 300))
    assert ProviderUsage("docs", 2, 0, 400, items).is_consistent()
    assert not ProviderUsage("docs", 3, 0, 400, items).is_consistent()
    assert not ProviderUsage("docs", 1, 0, 400, items).is_consistent()


def test_provider_usage_with_a_wrong_cost_is_inconsistent() -> None:
    items = (served("a", 100), served("b", 300))
    assert not ProviderUsage("docs", 2, 0, 399, items).is_consistent()
    assert not ProviderUsage("docs", 2, 0, 401, items).is_consistent()


def test_an_empty_provider_line_is_consistent() -> None:
    assert ProviderUsage.of("docs", [], rejected=4).is_consistent()
    assert not ProviderUsage("docs", 0, 4, 10).is_consistent()


def test_usage_report_of_sums_the_providers() -> None:
    report = UsageReport.of(
        [
            ProviderUsage.of("docs", [served("a", 100)]),
            ProviderUsage.of("web", [served("b", 300, "web"), served("c", 5, "web")]),
        ],
        as_of=AS_OF,
        budget_requested=1000,
    )

    assert report.budget_consumed == 405
    assert report.as_of == AS_OF
    assert report.is_consistent()
    assert [f.token_cost for f in report.served_frames()] == [100, 300, 5]


def test_usage_report_whose_total_does_not_re_sum_is_inconsistent() -> None:
    rows = (ProviderUsage.of("docs", [served("a", 100)]), ProviderUsage.of("web", []))
    assert UsageReport(None, 100, AS_OF, rows).is_consistent()
    assert not UsageReport(None, 99, AS_OF, rows).is_consistent()
    assert not UsageReport(None, 101, AS_OF, rows).is_consistent()


def test_usage_report_with_an_inconsistent_provider_is_inconsistent() -> None:
    bad_row = ProviderUsage("docs", 5, 0, 100, (served("a", 100),))  # counts 5, lists 1
    report = UsageReport(None, 100, AS_OF, (bad_row,))

    assert report.budget_consumed == sum(row.token_cost for row in report.providers)
    assert not report.is_consistent()


def test_within_budget_is_none_without_a_budget() -> None:
    report = UsageReport.of([ProviderUsage.of("docs", [served("a", 100)])], as_of=AS_OF)
    assert report.within_budget() is None


@pytest.mark.parametrize(("budget", "expected"), [(401, True), (400, True), (399, False)])
def test_within_budget_compares_consumed_with_requested(budget: int, expected: bool) -> None:
    report = UsageReport.of(
        [ProviderUsage.of("docs", [served("a", 100), served("b", 300)])],
        as_of=AS_OF,
        budget_requested=budget,
    )
    assert report.within_budget() is expected


def test_an_empty_usage_report_is_consistent_and_within_any_budget() -> None:
    report = UsageReport.of([], as_of=AS_OF, budget_requested=0)
    assert report.budget_consumed == 0
    assert report.is_consistent()
    assert report.within_budget() is True
