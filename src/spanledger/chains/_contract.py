"""The outcome contract a step's answer must keep before a chain accepts it.

An answer ranks ``min(top_k, n)`` documents of the ``n`` it was given (all ``n`` without
``top_k``): each at most once, by an index in range, with a finite score; scores never rise down
the list, and documents with equal scores keep their input order. An answer that breaks a rule
is refused as ``invalid_results`` and the chain moves on to its next step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from spanledger.events import ScoredDocument

__all__ = ["InvalidAnswer", "broken_rule"]


class InvalidAnswer(ValueError):
    """A step's answer is no ranking at all (a wrong type, a score that is no number)."""


def broken_rule(results: Sequence[ScoredDocument], count: int, top_k: int | None) -> str | None:
    """Which rule ``results`` break for ``count`` documents and ``top_k``, or ``None``."""
    if not isinstance(results, list | tuple) or not all(
        type(result) is ScoredDocument or isinstance(result, ScoredDocument) for result in results
    ):
        return "a ranking must be a list of scored documents"
    expected = count if top_k is None else min(top_k, count)
    if len(results) > expected and top_k is not None and len(results) > top_k:
        return f"more results ({len(results)}) than top_k ({top_k})"
    if len(results) != expected:
        return f"{len(results)} results where {expected} documents had to be scored once"
    seen: set[int] = set()
    last_index, last_score = -1, math.inf
    for result in results:
        fields = result.__dict__  # a result built past validation may lack a field
        index, score = fields.get("index"), fields.get("relevance_score")
        if type(index) is not int or not 0 <= index < count:
            return f"index {index!r} is out of range for {count} documents"
        if index in seen:
            return f"document {index} is scored more than once"
        seen.add(index)
        if type(score) is not float and (
            not isinstance(score, float | int) or isinstance(score, bool)
        ):
            return f"document {index} has a score that is not a finite number"
        if not math.isfinite(score):
            return f"document {index} has a score that is not a finite number"
        if score > last_score:
            return f"scores rise at document {index}: not in descending order"
        if score == last_score and index < last_index:
            return f"documents {last_index} and {index} tie out of input order"
        last_index, last_score = index, score
    return None
