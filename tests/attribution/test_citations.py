"""Finding citation labels in an answer and mapping labels to frames."""

from __future__ import annotations

import re

import pytest

from spanledger.attribution import DEFAULT_CITATION, FrameId, ServedFrame, find_labels, label_map

from .conftest import frame, served


def test_default_labels_are_found_in_order_of_first_appearance() -> None:
    answer = "Tides follow the moon [doc-3], see [1]; page [p:12] agrees [1] and [doc-3] too."
    assert find_labels(answer) == ["doc-3", "1", "p:12"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("[1]", ["1"]),
        ("[1][2]", ["1", "2"]),
        ("x[12]y", ["12"]),
        ("[doc_7.v2]", ["doc_7.v2"]),
        ("[A-1]", ["A-1"]),
        ("[p:12]", ["p:12"]),
        ("no citations at all", []),
        ("", []),
        ("[]", []),
        ("[ 1 ]", []),
        ("[two words]", []),
        ("[-1]", []),  # must start with a letter or digit
        ("[" + "a" * 64 + "]", ["a" * 64]),
        ("[" + "a" * 65 + "]", []),
    ],
)
def test_what_the_default_pattern_takes_for_a_label(answer: str, expected: list[str]) -> None:
    assert find_labels(answer) == expected
    assert find_labels(answer, DEFAULT_CITATION) == expected


def test_labels_are_deduplicated() -> None:
    assert find_labels("[2] [2] [1] [2] [1]") == ["2", "1"]


def test_a_caller_pattern_with_one_group_is_used_instead() -> None:
    answer = "Moon pulls the sea (source 4), and the sun helps (source 2) [9] (source 4)."
    compiled = re.compile(r"\(source (\d+)\)")

    assert find_labels(answer, compiled) == ["4", "2"]
    assert find_labels(answer, r"\(source (\d+)\)") == ["4", "2"]


def test_a_caller_pattern_for_fullwidth_brackets() -> None:
    assert find_labels("潮汐【3】と月【1】【3】", "【(\\d+)】") == ["3", "1"]


def test_label_map_numbers_a_rendered_sequence_from_one() -> None:
    first, second, third = served("a", 1), served("b", 2), served("c", 3)

    assert label_map([first, second, third]) == {
        "1": first.frame,
        "2": second.frame,
        "3": third.frame,
    }


def test_label_map_accepts_frame_ids_and_served_frames_mixed() -> None:
    plain: FrameId = frame("x")
    item: ServedFrame = served("y", 5)
    assert label_map([plain, item]) == {"1": plain, "2": item.frame}


def test_label_map_takes_a_mapping_as_given() -> None:
    item = served("y", 5)
    plain = frame("x")

    assert label_map({"doc-3": item, "p:12": plain}) == {"doc-3": item.frame, "p:12": plain}


def test_label_map_of_nothing_is_empty() -> None:
    assert label_map([]) == {}
    assert label_map({}) == {}
