"""Finding citation labels such as ``[1]`` or ``[doc-3]`` in a model's answer."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from spanledger.attribution.frames import FrameId, ServedFrame

__all__ = ["DEFAULT_CITATION", "find_labels", "label_map"]

_LABEL = "([A-Za-z0-9][A-Za-z0-9_.:-]{0,63})"
DEFAULT_CITATION = re.compile(re.escape("[") + _LABEL + re.escape("]"))
"""A bracketed label of letters, digits and ``_.:-``: ``[1]``, ``[doc-3]``, ``[p:12]``."""


def find_labels(text: str, pattern: re.Pattern[str] | str | None = None) -> list[str]:
    """The distinct labels cited in ``text``, in order of first appearance.

    A custom ``pattern`` must have one capture group: the label.
    """
    compiled = re.compile(pattern) if isinstance(pattern, str) else pattern or DEFAULT_CITATION
    labels: list[str] = []
    for match in compiled.finditer(text):
        label = match.group(1)
        if label not in labels:
            labels.append(label)
    return labels


def label_map(
    labels: Mapping[str, FrameId | ServedFrame] | Sequence[FrameId | ServedFrame],
) -> dict[str, FrameId]:
    """Labels to frames: a mapping as given, or a sequence numbered ``1``, ``2``, ... in the
    order it was rendered into the prompt."""
    pairs = (
        labels.items()
        if isinstance(labels, Mapping)
        else ((str(i), frame) for i, frame in enumerate(labels, start=1))
    )
    return {
        label: frame.frame if isinstance(frame, ServedFrame) else frame for label, frame in pairs
    }
