"""The fixed words of ``spanledger report``'s output: the JSON layout's version, the figure
legend and the per-request CSV columns. They live apart from the report so that the answer over
empty logs (``fleet/empty.py``) prints the same words without importing the reader."""

from __future__ import annotations

__all__ = ["FIGURE_LEGEND", "PARTIAL_LEGEND", "REPORT_SCHEMA_VERSION", "REQUEST_CONTEXT_COLUMNS"]

REPORT_SCHEMA_VERSION = 2
"""The version of ``--json``'s layout; it changes when a field changes meaning or goes."""

FIGURE_LEGEND = (
    "(tokens, units, chars: what the provider reported; unknown: no call reported it; "
    "\N{EM DASH}: the operation has none"
)
"""The legend under the table, before its closing parenthesis."""
PARTIAL_LEGEND = "; n (k/c): reported by k of the row's c calls that have the figure"
"""What the legend adds when a row shows a figure only some of its calls reported."""

REQUEST_CONTEXT_COLUMNS = (
    "request_cited_token_share",
    "request_context_spend",
    "request_cited_context_spend",
    "request_unused_context_spend",
    "request_context_currency",
    "request_unknown_context_spend",
)
"""The CSV columns a report grouped by request adds: each request's context spend."""
