"""The report's fixed words are written once: the answer over empty logs, which prints them
without importing the reader, holds the same statuses, figures and marks as the ledger."""

from __future__ import annotations

from spanledger.costs import CostStatus
from spanledger.fleet import empty
from spanledger.fleet.layout import FIGURE_LEGEND
from spanledger.ledger.totals import FIGURES, NOT_APPLICABLE, UNKNOWN


def test_the_empty_report_names_the_ledgers_statuses_and_figures() -> None:
    assert tuple(status.value for status in CostStatus) == empty._STATUSES
    assert empty._FIGURES == FIGURES


def test_the_legend_shows_the_marks_the_table_prints() -> None:
    assert f"{UNKNOWN}: no call reported it" in FIGURE_LEGEND
    assert f"{NOT_APPLICABLE}: the operation has none" in FIGURE_LEGEND
