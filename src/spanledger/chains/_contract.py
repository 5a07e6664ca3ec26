"""The outcome contract a step's answer must keep before a chain accepts it.

An answer ranks ``min(top_k, n)`` documents of the ``n`` it was given (all ``n`` without
``top_k``): each at most once, by an index in range, with a finite score; scores never rise down
the list, and documents with equal scores keep their input order. An answer that breaks a rule
is refused as ``invalid_results`` and the chain moves on to its next step.

What the refusal says is never a value from the answer (an index may be a document's text, a
score anything at all): a rule names results by their position in the answer, and what is wrong
with them by type and count.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

from spanledger.events import ScoredDocument

__all__ = ["InvalidAnswer", "broken_rule", "score_of"]


class InvalidAnswer(ValueError):
    """A step's answer is no ranking at all (a wrong type, a score that is no number)."""


def score_of(value: object) -> float | None:
    """``value`` as a score, or ``None`` when it is none: a score is a finite real number (an
    ``int`` or a ``float``, numpy's too); a bool is not one, and nothing is read from text."""
    if type(value) is float:
        score = value
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    else:
        score = float(value)
    return score if math.isfinite(score) else None


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
    for position, result in enumerate(results, 1):
        fields = result.__dict__  # a result built past validation may lack a field
        index, score = fields.get("index"), fields.get("relevance_score")
        if type(index) is not int:
            return f"result {position}'s index is a {type(index).__name__}, not an int"
        if not 0 <= index < count:
            return f"result {position}'s index is out of range for {count} documents"
        if index in seen:
            return f"result {position}'s document is scored more than once"
        seen.add(index)
        number = score if type(score) is float else score_of(score)
        if number is None or not math.isfinite(number):
            return f"result {position}'s score is not a finite number (a {type(score).__name__})"
        if number > last_score:
            return f"scores rise at result {position}: not in descending order"
        if number == last_score and index < last_index:
            return f"results {position - 1} and {position} tie out of input order"
        last_index, last_score = index, number
    return None
