"""How much of a retried call an exporter renders, whichever backend it renders for."""

from __future__ import annotations

__all__ = ["MAX_ATTEMPT_EVENTS"]

MAX_ATTEMPT_EVENTS = 32
"""Retried attempts rendered per logical call; the rest are counted (their cost still sums)."""
