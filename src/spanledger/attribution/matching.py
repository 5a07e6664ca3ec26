"""Finding served frames in the prompt a model received, the labels that stand next to them,
and those labels (or verbatim runs) in the model's answer.

Everything here works on texts in memory and keeps none of them past the request: a match is a
set of character ranges per frame and a table from label to frame. Matching is by lines, since
every framework puts a passage into its prompt as a block of its own (after a label line such
as ``Source 1:``, behind a label such as ``[1]``, between tags, or after metadata lines): the
prompt's lines are indexed once, in C, and each frame line is one look-up. A frame cut short
(truncated to fit, re-split into chunks, repacked) is found by where its pieces start, so only
the part that reached the prompt counts; that slower search runs only for frames not found
whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from spanledger.attribution.frames import FrameId

__all__ = ["AnswerLabels", "FrameIndex", "FrameText", "PromptMatch", "answer_labels", "covered"]

_KEY = 24
"""How many leading characters key a frame sentence, where a piece of a frame starts."""
_LONG = 32
"""A prompt line at least this long that is no whole frame line is looked up as a piece."""
_QUOTE = 48
"""A run of an answer at least this long, copied verbatim from a frame, is a quote."""
_LOOK_BACK = 4
"""How many non-blank lines above a passage are searched for its label."""
_MAX_RANGE = 64
"""A citation range wider than this (``[1-100000]``) is read as its two ends only."""

_LABEL = re.compile(
    r"""\s*(?:
        \[(?P<bracket>[A-Za-z]{0,8}\d{1,6})\]
      | <document\s+index=["']?(?P<xml>\d{1,6})["']?\s*>
      | (?P<doc>doc\d{1,6})
      | (?:source|document|doc|passage|context|reference|chunk)s?\s*
        (?:id\s*[:=]?\s*)?\#?\s*(?P<word>\d{1,6})
      | (?P<number>\d{1,6})[.)]
    )\s*[:.\-]?\s*""",
    re.IGNORECASE | re.VERBOSE,
)
"""A label as a prompt puts it before a passage: ``[1]``, ``[doc3]``, ``<document index="1">``,
``Source 1``, ``Document 2:``, ``Source ID: 3``, ``doc3``, ``1.``."""
_FIELD = re.compile(
    r"\s*(?:content|text|passage|snippet|article snippet|excerpt)\s*:\s*", re.IGNORECASE
)
"""A field name a prompt puts before a passage's text on its line (``Content: ...``)."""
_BETWEEN = re.compile(
    r"\s*(?:<[^<>]{1,80}>|<(\w{1,40})[^<>]{0,40}>[^<>]{0,120}</\1>|[\w .-]{1,40}:\s*\S.{0,120})\s*"
)
"""A line that may stand between a label and its passage: a tag, a ``key: value`` line."""
_SOURCE_AFTER = re.compile(r"\s*source\s*:\s*(?P<key>\S.{0,63}?)\s*", re.IGNORECASE)
"""A ``Source: <key>`` line after a passage (prompts that name sources at the end)."""
_ANSWER_BRACKETS = re.compile(r"\[\^?([^\[\]\n]{1,64})\]")
_ANSWER_WORDS = re.compile(r"\b(?:source|document)\s+#?(\d{1,6})\b", re.IGNORECASE)
_TOKEN = re.compile(r"[A-Za-z]{0,8}\d{1,6}")
_RANGE = re.compile(r"(\d{1,6})\s*[-\u2013]\s*(\d{1,6})")
_PARTS = re.compile(r"[,;]")


@dataclass(frozen=True, slots=True)
class FrameText:
    """A served frame and its text, as the matcher reads it."""

    frame: FrameId
    text: str


@dataclass(slots=True)
class PromptMatch:
    """What one prompt rendered: for each frame found, the characters of it that reached the
    prompt (``spans``: half-open ranges into the frame's text), and the labels read next to
    the frames (label key to frame)."""

    spans: dict[FrameId, list[tuple[int, int]]] = field(default_factory=dict)
    labels: dict[str, FrameId] = field(default_factory=dict)
    prompt_chars: int = 0

    def rendered_chars(self, frame: FrameId) -> int:
        """How many characters of ``frame`` this prompt held (overlapping pieces once)."""
        return covered(self.spans.get(frame, ()))


def covered(spans: Iterable[tuple[int, int]]) -> int:
    """The length of the union of half-open ranges."""
    total = 0
    end = 0
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


_HEAD = itemgetter(slice(0, _KEY))
_TAIL = itemgetter(slice(-_KEY, None))

_Place = tuple[int, int, int]
"""Where a line or a sentence of frame number ``[0]`` starts in its text (``[1]``), and where
that line ends (``[2]``)."""


class FrameIndex:
    """A request's frames, indexed once for every prompt and answer matched against them."""

    def __init__(self, frames: Sequence[FrameText]) -> None:
        self.frames = tuple(frames)
        self._texts = [item.text for item in self.frames]
        self._lines: dict[str, _Place] = {}
        for number, text in enumerate(self._texts):
            self._index_lines(number, text)
        self._places = set(self._lines.values())
        self._spans = [(place[0], place[1:], place) for place in self._lines.values()]
        self._ids = [item.frame for item in self.frames]
        self._numbers = {frame: number for number, frame in enumerate(self._ids)}
        self._sentences: dict[frozenset[int], set[str]] = {}

    def _index_lines(self, number: int, text: str) -> None:
        """Each line of the frame by its text, as it stands in the frame and stripped."""
        lines = self._lines
        offset = 0
        for raw in text.split("\n") if "\n" in text else (text,):
            line = raw.strip()
            if line:
                start = offset + raw.index(line[0])
                place = (number, start, start + len(line))
                lines.setdefault(line, place)
                if raw != line:
                    lines.setdefault(raw, place)
            offset += len(raw) + 1

    def match(self, prompt: str) -> PromptMatch:
        """Find the frames in ``prompt``: each frame line that is a line of the prompt; for the
        frame lines not found so, one behind a label or a field name on its line, or a piece of
        one (truncated, re-split) that starts a line; then read each frame's label, on its own
        line above it (tags and metadata lines may stand between), leading its line, or as a
        ``Source:`` line after it."""
        result = PromptMatch(prompt_chars=len(prompt))
        if not self._lines or not prompt:
            return result
        lines = prompt.split("\n")
        where = dict(zip(lines, range(len(lines)), strict=True))
        seen = _Seen()
        found: set[_Place] = set()
        note = seen.note
        for number, (frame, span, place) in zip(
            map(where.get, self._lines), self._spans, strict=True
        ):
            if number is not None:
                note(frame, span, number)
                found.add(place)
        if len(found) < len(self._places):
            self._search_rest(lines, self._places - found, seen)
        known_labels = _LABEL_LINES  # the line right above a passage is most often its label
        for frame, number in seen.first.items():
            above = lines[number - 1] if number else ""
            key = seen.leading.get(frame) or known_labels.get(above) or None
            key = key or _label_before(lines, number)
            if key is None:
                key = _label_after(lines, seen.last[frame])
            if key is not None:
                result.labels.setdefault(key, self._ids[frame])
        for frame, key in seen.later_labels(lines):
            result.labels.setdefault(key, self._ids[frame])
        ids = self._ids
        result.spans = {ids[frame]: ranges for frame, ranges in seen.spans.items()}
        return result

    def _search_rest(self, lines: Sequence[str], missing: Iterable[_Place], seen: _Seen) -> None:
        """The frame lines not found as prompt lines: one standing behind a label or a field
        name at the end of a prompt line, or a piece of it (its start, or a sentence of it)
        starting a prompt line, or its end (cut at any word) making a prompt line. The
        prompt's line heads and tails are indexed in C."""
        count = len(lines)
        heads = dict(zip(map(_HEAD, map(str.lstrip, lines)), range(count), strict=True))
        tails = dict(zip(map(_TAIL, map(str.rstrip, lines)), range(count), strict=True))
        short: dict[int, dict[str, int]] = {}
        for frame, start, stop in missing:
            text = self._texts[frame]
            line = text[start:stop]
            if len(line) < _KEY:
                self._search_short(lines, short, (frame, start, stop), seen)
                continue
            number = tails.get(line[-_KEY:])
            if number is not None:
                shown = lines[number].strip()
                if shown.endswith(line):
                    seen.note(frame, (start, stop), number, _leading_label(shown[: -len(line)]))
                    continue
                if line.endswith(shown):  # the rest of a line cut anywhere (a token split)
                    seen.note(frame, (stop - len(shown), stop), number)
            for at in _sentence_starts(line):
                number = heads.get(line[at : at + _KEY])
                if number is None:
                    continue
                shared = _shared(text, start + at, lines[number].strip())
                if shared >= _KEY:
                    seen.note(frame, (start + at, start + at + shared), number)

    def _search_short(
        self,
        lines: Sequence[str],
        tails: dict[int, dict[str, int]],
        place: _Place,
        seen: _Seen,
    ) -> None:
        """A frame line shorter than a key, found only whole behind a label at the end of a
        prompt line (``[2] Deer carry ticks.``): so short a text elsewhere in a line is no
        evidence. The prompt's line tails of its length are indexed once per length."""
        frame, start, stop = place
        size = stop - start
        if size not in tails:
            ends = (line.rstrip()[-size:] for line in lines)
            tails[size] = dict(zip(ends, range(len(lines)), strict=True))
        number = tails[size].get(self._texts[frame][start:stop])
        if number is None:
            return
        shown = lines[number].strip()
        label = _leading_label(shown[:-size])
        if label is not None:
            seen.note(frame, (start, stop), number, label)

    def _quotable(self, numbers: frozenset[int]) -> set[str]:
        """The sentences of the frames numbered ``numbers``: split once per set of frames and
        kept with the index (each answer of a request reads the frames its prompt showed)."""
        sentences = self._sentences.get(numbers)
        if sentences is None:
            sentences = set(_cut("\n".join(self._texts[n] for n in sorted(numbers))))
            self._sentences[numbers] = sentences
        return sentences

    def quoted(self, answer: str, frames: Iterable[FrameId] | None = None) -> int:
        """How many characters of ``answer`` are sentences copied verbatim from a frame (of
        ``frames``, when given): sentences of at least 48 characters, a lead-in clause and
        citation brackets set aside. Copying a passage is not citing it; the figure is
        reported on its own."""
        if frames is None:
            numbers = frozenset(range(len(self._texts)))
        else:
            known = self._numbers
            numbers = frozenset(known[frame] for frame in frames if frame in known)
        if not numbers or len(answer) < _QUOTE:
            return 0
        sentences = self._quotable(numbers)
        if "[" in answer:
            answer = _ANSWER_BRACKETS.sub("", answer)
        total = 0
        for sentence in set(map(str.strip, _cut(answer))):
            if len(sentence) < _QUOTE:
                continue
            if sentence in sentences or f" {sentence}" in sentences:
                total += len(sentence)
                continue
            clause = sentence.partition(", ")[2] or sentence.partition(": ")[2]
            if len(clause) >= _QUOTE and (clause in sentences or f" {clause}" in sentences):
                total += len(clause)
        return total


def _cut(text: str) -> list[str]:
    """``text`` cut at every full stop, question or exclamation mark and line end, without
    them. A frame's pieces are kept as cut (a sentence after ``". "`` starts with its space)
    and an answer's are stripped and looked up with and without that space, so only the
    answer's few pieces are copied. The cuts are single characters, which C finds a word at a
    time; a two-character separator such as ``". "`` would be tried at every space."""
    for mark in "?!\n":
        if mark in text:
            text = text.replace(mark, ".")
    return text.split(".")


@dataclass(slots=True)
class _Seen:
    """What a prompt showed of each frame (by number): its pieces, the prompt lines it stands
    on (first, last, every one) and the labels leading them."""

    spans: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    leading: dict[int, str] = field(default_factory=dict)
    lines: dict[int, dict[int, str | None]] = field(default_factory=dict)

    several: bool = False
    """Whether some frame stands on more than one prompt line."""

    def note(
        self, frame: int, span: tuple[int, int], number: int, label: str | None = None
    ) -> None:
        pieces = self.spans.get(frame)
        if pieces is None:  # most frames are seen once, whole
            self.spans[frame] = [span]
            self.lines[frame] = {number: label}
            self.first[frame] = self.last[frame] = number
            if label:
                self.leading[frame] = label
            return
        pieces.append(span)
        shown = self.lines[frame]
        shown[number] = label
        self.several = self.several or len(shown) > 1
        if self.first[frame] > number:
            self.first[frame] = number
            if label:
                self.leading[frame] = label
        if self.last[frame] < number:
            self.last[frame] = number

    def later_labels(self, lines: Sequence[str]) -> Iterator[tuple[int, str]]:
        """The labels of a frame's later pieces, each standing apart from the piece before it
        (a frame re-split into chunks labelled ``Source 3:`` and ``Source 4:``): ``(frame,
        key)``. A line that continues the frame's previous line has no label of its own."""
        if not self.several:
            return
        for frame, shown in self.lines.items():
            if len(shown) < 2:
                continue
            for number in sorted(shown)[1:]:
                if _line_above(lines, number) in shown:
                    continue
                key = shown[number] or _label_before(lines, number)
                if key is not None:
                    yield frame, key


def _line_above(lines: Sequence[str], number: int) -> int:
    """The number of the nearest non-blank line above line ``number`` (``-1``: none)."""
    for above in range(number - 1, -1, -1):
        text = lines[above]
        if text and not text.isspace():
            return above
    return -1


def _leading_label(prefix: str) -> str | None:
    """The label in what stands before a frame line on its prompt line (``[1] ``,
    ``Source 2: Content: ``), or ``None``."""
    prefix = prefix.strip()
    if not prefix or len(prefix) > 80:
        return None
    labelled = _LABEL.match(prefix)
    if labelled is None:
        return None
    rest = prefix[labelled.end() :]
    if rest and _FIELD.fullmatch(rest) is None:
        return None
    return _key(labelled)


def _sentence_starts(line: str) -> Iterator[int]:
    """Where the sentences of ``line`` start (after ``. ``, ``? `` or ``! ``)."""
    yield 0
    if "? " in line or "! " in line:
        line = line.replace("? ", ". ").replace("! ", ". ")
    elif ". " not in line:
        return
    at = 0
    for sentence in line.split(". ")[:-1]:
        at += len(sentence) + 2
        while at < len(line) and line[at] == " ":
            at += 1
        yield at


def _shared(text: str, start: int, line: str) -> int:
    """How many leading characters of ``line`` stand in ``text`` from ``start``."""
    low, high = 0, min(len(line), len(text) - start)
    while low < high:
        middle = (low + high + 1) // 2
        if text.startswith(line[:middle], start):
            low = middle
        else:
            high = middle - 1
    return low


def _key(found: re.Match[str]) -> str:
    for group in ("bracket", "xml", "word", "doc", "number"):
        value = found.group(group)
        if value:
            return _normal(value)
    return found.group(0).strip().lower()


def _normal(key: str) -> str:
    """A label key as answers are matched against it: lower case, a number without leading
    zeros."""
    return str(int(key)) if key.isdigit() else key.lower()


_LABEL_LINES: dict[str, str | None] = {}
"""Label lines already read (``Source 1:`` is read once per process, not once per prompt)."""
_LABEL_LINES_MAX = 4096
_NOT_A_LABEL = ""


def _label_line(text: str) -> str | None:
    """The label key of a line that is only a label; ``""`` for a line that may stand between a
    label and its passage; ``None`` for any other line."""
    found = _LABEL_LINES.get(text, _NOT_CACHED)
    if found is not _NOT_CACHED:
        return found  # type: ignore[return-value]
    line = text.strip()
    labelled = _LABEL.fullmatch(line) if len(line) <= 80 else None
    if labelled is not None:
        key: str | None = _key(labelled)
    else:
        key = _NOT_A_LABEL if _BETWEEN.fullmatch(line) is not None else None
    if len(text) <= 160:
        if len(_LABEL_LINES) >= _LABEL_LINES_MAX:
            _LABEL_LINES.clear()
        _LABEL_LINES[text] = key
    return key


_NOT_CACHED = object()


def _label_before(lines: Sequence[str], number: int) -> str | None:
    """The label on a line of its own above line ``number`` (tags and ``key: value`` lines may
    stand between), or ``None``."""
    seen = 0
    for before in range(number - 1, -1, -1):
        text = lines[before]
        if not text or text.isspace():
            continue
        key = _label_line(text)
        if key:
            return key
        seen += 1
        if key is None or seen >= _LOOK_BACK:
            return None
    return None


def _label_after(lines: Sequence[str], number: int) -> str | None:
    """The key of a ``Source: <key>`` line right after line ``number``, or ``None``."""
    for after in range(number + 1, len(lines)):
        text = lines[after].strip()
        if text:
            found = _SOURCE_AFTER.fullmatch(text)
            return found.group("key").lower() if found is not None else None
    return None


@dataclass(frozen=True, slots=True)
class AnswerLabels:
    """The frames an answer cites by label, in order of first citation, and how many labels it
    gave that name no frame the prompts labelled."""

    frames: tuple[FrameId, ...]
    unknown: int


def answer_labels(answer: str, labels: Mapping[str, FrameId]) -> AnswerLabels:
    """Read the labels in ``answer`` (``[1]``, ``[1, 3]``, ``[2-4]``, ``[doc1]``, ``[^1]``,
    ``Source 2``) and name the frames they stand for in ``labels`` (keys as the prompt gave
    them: ``1``, ``doc3``)."""
    cited: dict[FrameId, None] = {}
    unknown = 0
    for key in _answer_keys(answer):
        frame = labels.get(key)
        if frame is None:
            unknown += 1
        else:
            cited.setdefault(frame)
    return AnswerLabels(tuple(cited), unknown)


def _answer_keys(answer: str) -> Iterator[str]:
    """Every label key an answer names, in order (a range gives each key in it)."""
    for inside in _ANSWER_BRACKETS.findall(answer):
        if inside.isdigit():
            yield _normal(inside)
            continue
        for part in _PARTS.split(inside):
            part = part.strip().lstrip("^")
            spread = _RANGE.fullmatch(part)
            if spread is not None:
                low, high = int(spread.group(1)), int(spread.group(2))
                if low <= high and high - low <= _MAX_RANGE:
                    yield from map(str, range(low, high + 1))
                else:
                    yield from (str(low), str(high))
            elif _TOKEN.fullmatch(part):
                yield _normal(part)
    lowered = answer.lower()
    if "source" in lowered or "document" in lowered:  # a substring test in C, before the regex
        yield from map(_normal, _ANSWER_WORDS.findall(answer))
