"""The ISO 4217 currency codes a price table may name.

The list is a data file inside the package (``data/iso4217.txt``), generated from the ISO 4217
data pycountry ships and checked against it by the test suite, so spanledger needs no
dependency of its own for 180 three-letter codes. It is read once, on the first check.
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["is_currency", "iso4217_codes"]

_CODES = Path(__file__).resolve().parent.parent / "data" / "iso4217.txt"


@functools.cache
def iso4217_codes() -> frozenset[str]:
    """Every code in the shipped list (comment lines, starting ``#``, aside)."""
    lines = _CODES.read_text(encoding="ascii").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def is_currency(code: str) -> bool:
    """Whether ``code`` is an ISO 4217 currency code (``USD``, ``EUR``; not ``XYZ``)."""
    return code in iso4217_codes()
