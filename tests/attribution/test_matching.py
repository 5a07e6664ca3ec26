"""Frames found in prompts as the frameworks render them, their labels read from the prompt, and
those labels (or copied runs) found in the answer."""

from __future__ import annotations

import pytest

from spanledger.attribution.frames import FrameId
from spanledger.attribution.matching import FrameIndex, FrameText, answer_labels, covered

MOON = "The moon's gravity drives the tides. Tides rise and fall twice a day."
CLOCK = "Clocks tick every second, and some clocks chime on the hour as well."
SUN = "The sun pulls on the sea too. Spring tides come twice a month when both align."
TEXTS = [MOON, CLOCK, SUN]


def frames() -> list[FrameText]:
    return [FrameText(FrameId.of("search", str(i), text), text) for i, text in enumerate(TEXTS)]


def frame(i: int) -> FrameId:
    return frames()[i].frame


@pytest.fixture
def index() -> FrameIndex:
    return FrameIndex(frames())


def test_frames_on_lines_of_their_own_after_label_lines(index: FrameIndex) -> None:
    prompt = f"Use the sources.\n\nSource 1:\n{MOON}\n\nSource 2:\n{SUN}\n\nQuestion: why?"
    found = index.match(prompt)
    assert set(found.spans) == {frame(0), frame(2)}
    assert found.rendered_chars(frame(0)) == len(MOON)
    assert found.labels == {"1": frame(0), "2": frame(2)}


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("[1] {text}", "1"),
        ("[doc3] {text}", "doc3"),
        ("Document 4: {text}", "4"),
        ("2. {text}", "2"),
        ("Source ID: 7\n{text}", "7"),
        ("doc5\n{text}", "doc5"),
        ('<document index="3">\n<source>a.txt</source>\n<document_content>\n{text}', "3"),
        ("Source 01:\nfile_name: tides.txt\n{text}", "1"),
    ],
)
def test_every_label_form_is_read_next_to_its_frame(index: FrameIndex, line: str, key: str) -> None:
    found = index.match("Context:\n" + line.format(text=MOON) + "\nAnswer briefly.")
    assert found.labels == {key: frame(0)}
    assert found.rendered_chars(frame(0)) == len(MOON)


def test_a_source_line_after_the_passage_names_it(index: FrameIndex) -> None:
    found = index.match(f"Content: {CLOCK}\nSource: clocks-wiki\n\nContent: {SUN}\nSource: sea")
    assert found.labels == {"clocks-wiki": frame(1), "sea": frame(2)}


def test_a_label_in_a_few_shot_example_binds_to_no_frame(index: FrameIndex) -> None:
    prompt = (
        "Example:\nSource 1:\nThe sky is red in the evening.\nAnswer: red [1].\n\n"
        f"Now your turn.\nSource 1:\n{SUN}\n"
    )
    found = index.match(prompt)
    assert found.labels == {"1": frame(2)}
    assert set(found.spans) == {frame(2)}


def test_only_the_part_of_a_truncated_frame_that_reached_the_prompt_counts(
    index: FrameIndex,
) -> None:
    cut = SUN[:50]
    found = index.match(f"Source 1:\n{cut}")
    assert found.rendered_chars(frame(2)) == 50
    assert found.labels == {"1": frame(2)}


def test_a_frame_re_split_into_chunks_renders_each_chunk(index: FrameIndex) -> None:
    first, second = SUN.split(". ", 1)
    found = index.match(f"Source 1:\n{first}.\n\nSource 2:\n{second}")
    assert covered(found.spans[frame(2)]) == len(first) + 1 + len(second)
    assert found.labels["1"] == frame(2)


def test_a_frame_not_in_the_prompt_is_not_rendered(index: FrameIndex) -> None:
    found = index.match(f"Source 1:\n{MOON}")
    assert frame(1) not in found.spans
    assert frame(2) not in found.spans


def test_indented_frames_are_found(index: FrameIndex) -> None:
    found = index.match(f"  Source 1:\n    {MOON}\n")
    assert found.rendered_chars(frame(0)) == len(MOON)
    assert found.labels == {"1": frame(0)}


def test_answer_labels_read_lists_ranges_and_words() -> None:
    labels = {"1": frame(0), "2": frame(1), "3": frame(2)}
    read = answer_labels("Tides [1, 3]; also [2-3] and Source 2 and [^1].", labels)
    assert read.frames == (frame(0), frame(2), frame(1))
    assert read.unknown == 0


def test_a_label_that_names_no_rendered_frame_is_counted_never_dropped() -> None:
    read = answer_labels("The moon [1] and the sun [9].", {"1": frame(0)})
    assert read.frames == (frame(0),)
    assert read.unknown == 1


def test_brackets_that_are_no_label_are_no_unknown_label() -> None:
    read = answer_labels("It is true [citation needed] and [see above].", {"1": frame(0)})
    assert read == type(read)((), 0)


def test_a_huge_range_is_read_as_its_ends() -> None:
    read = answer_labels("[1-100000]", {"1": frame(0)})
    assert read.frames == (frame(0),)
    assert read.unknown == 1


def test_a_copied_sentence_is_quoted_and_a_paraphrase_is_not(index: FrameIndex) -> None:
    copied = "Clocks tick every second, and some clocks chime on the hour as well"
    assert index.quoted(f"As the source says, {copied} [2].") == len(copied)
    assert index.quoted("Clocks chime hourly and tick each second [2].") == 0
    assert index.quoted(f"{copied}.", [frame(0)]) == 0  # only frames rendered to that call


SHORT = "Deer carry ticks."  # shorter than the piece a longer frame line is looked up by


@pytest.mark.parametrize("label", ["[2] ", "Document 2: ", "2. "])
def test_a_short_passage_behind_its_label_on_one_line_is_rendered_and_labelled(
    label: str,
) -> None:
    short = FrameText(FrameId.of("search", "s", SHORT), SHORT)
    found = FrameIndex([*frames(), short]).match(f"[1] {MOON}\n{label}{SHORT}\n\nWhy?")
    assert found.rendered_chars(short.frame) == len(SHORT)
    assert found.labels == {"1": frame(0), "2": short.frame}


def test_a_short_passage_ending_a_line_without_a_label_is_no_rendering() -> None:
    short = FrameText(FrameId.of("search", "s", SHORT), SHORT)
    found = FrameIndex([short]).match(f"We all know that {SHORT}\nWhy?")
    assert short.frame not in found.spans


@pytest.mark.parametrize("answer", ["As Document 3 says, the sea follows.", "per SOURCE 3."])
def test_an_answer_naming_a_source_in_words_cites_it(answer: str) -> None:
    read = answer_labels(answer, {"1": frame(0), "3": frame(2)})
    assert read.frames == (frame(2),)


LONG_QUESTION = "Why do the spring tides come twice a month when the sun and moon align?"
LONG_LINE = "Neap tides happen when the sun and the moon pull at right angles"


@pytest.mark.parametrize(
    ("text", "answer", "copied"),
    [
        (
            f"Tides vary. {LONG_QUESTION} Nobody knows.",
            f"Indeed: {LONG_QUESTION} [1]",
            len(LONG_QUESTION) - 1,
        ),
        (f"Tides vary.\n{LONG_LINE}\nMore later.", f"We read that {LONG_LINE}.", 0),
        (f"Tides vary.\n{LONG_LINE}\nMore later.", f"{LONG_LINE}! [1]", len(LONG_LINE)),
        (f"Tides vary. {LONG_LINE}. Then more.", f"In short, {LONG_LINE} [1].", len(LONG_LINE)),
        (f"Tides vary. {LONG_LINE}. Then more.", f"Well. {LONG_LINE} [1].", len(LONG_LINE)),
    ],
)
def test_copied_sentences_are_found_whatever_ends_them(text: str, answer: str, copied: int) -> None:
    served = FrameText(FrameId.of("search", "q", text), text)
    assert FrameIndex([served]).quoted(answer) == copied
