"""The ten 1 KB passages the framework-handler benchmarks serve (words that repeat, so every
passage is its own text): one place, so the three benchmarks time the same work."""

from __future__ import annotations

WORDS = [
    "ticks",
    "feed",
    "on",
    "the",
    "blood",
    "of",
    "deer",
    "and",
    "mice",
    "while",
    "clocks",
    "tick",
    "every",
    "second",
]


def passage(number: int, size: int = 1024) -> str:
    """The ``number``-th passage: the words from a shifted start, cut to ``size`` characters."""
    return " ".join(WORDS[(number + i) % len(WORDS)] for i in range(size // 4))[:size]


TEXTS = [passage(n) for n in range(10)]
