"""What the process-wide switch did with each library: ``sdk_status()``.

``instrumented_sdks()`` lists what records; this says, for every library spanledger knows, why
the others do not: not installed, a release outside the versions the tests cover, a library the
switch could not patch, or installed and tested but not switched on; each with the installed
release and the tested ranges.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from spanledger.instrumentation import _everywhere
from spanledger.integrations import INTEGRATIONS

__all__ = ["SdkState", "SdkStatus", "sdk_status"]


class SdkState(StrEnum):
    """Where one library stands with the process-wide switch."""

    SWITCHED_ON = "switched_on"
    """Patched: its clients (or models) record."""
    OFF = "off"
    """Installed, a tested release, and the switch is not on for it."""
    NOT_INSTALLED = "not_installed"
    UNTESTED_VERSION = "untested_version"
    """Installed, outside the tested ranges: the switch leaves it unpatched."""
    FAILED = "failed"
    """A tested release the switch could not patch (``reason`` says why); left unpatched."""


@dataclass(frozen=True)
class SdkStatus:
    """One library: its name for ``instrument(sdks=[...])``, its distribution, the installed
    release (``None``: not installed), the tested ranges in words, where it stands, and why
    (for an untested or failed library)."""

    name: str
    distribution: str
    version: str | None
    tested: str
    state: SdkState
    reason: str | None = None


def sdk_status() -> dict[str, SdkStatus]:
    """Every library spanledger knows, by the name ``instrument(sdks=[...])`` takes, with where
    it stands now (read afresh at each call)."""
    on = set(_everywhere.switched_on())
    failed = _everywhere.failures()
    found: dict[str, SdkStatus] = {}
    for integration in INTEGRATIONS:
        name = integration.name
        version = integration.installed_version()
        reason: str | None = None
        if version is None:
            state = SdkState.NOT_INSTALLED
        elif name in failed:
            state, reason = SdkState.FAILED, failed[name]
        elif name in on:
            state = SdkState.SWITCHED_ON
        elif not integration.tests(version):
            state, reason = SdkState.UNTESTED_VERSION, integration.untested()
        else:
            state = SdkState.OFF
        found[name] = SdkStatus(
            name=name,
            distribution=integration.distribution,
            version=version,
            tested=integration.tested_versions(),
            state=state,
            reason=reason,
        )
    return found
