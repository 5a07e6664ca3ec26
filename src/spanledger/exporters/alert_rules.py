"""Where the Prometheus alert rules shipped with spanledger are.

The rules live inside the package (``spanledger/data``) so an installed wheel carries the same
file the repository's ``dashboards/prometheus`` folder links to: one copy, found without a
source checkout.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["alert_rules_path"]


def alert_rules_path() -> Path:
    """The Prometheus rule file (``rule_files:`` in a Prometheus configuration) that alerts on
    unpriced and malformed usage."""
    return Path(__file__).resolve().parent.parent / "data" / "spanledger-alerts.yml"
