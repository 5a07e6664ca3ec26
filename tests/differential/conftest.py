"""The differential test's end-of-run summary: cases run per endpoint, known divergences met."""

from __future__ import annotations

import pytest

from tests.differential.paths import CASES_RUN, KNOWN_SEEN, PATHS_RUN


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not CASES_RUN:
        return
    endpoints = {name: count for name, count in CASES_RUN.items() if " / " not in name}
    terminalreporter.section("differential: cases run")
    terminalreporter.write_line(f"{sum(endpoints.values())} cases over {len(endpoints)} endpoints")
    for name, count in sorted(endpoints.items()):
        families = ", ".join(
            f"{key.split(' / ', 1)[1]} {n}"
            for key, n in sorted(CASES_RUN.items())
            if key.startswith(f"{name} / ")
        )
        terminalreporter.write_line(f"  {count:6d}  {name}  ({families})")
    for name in sorted(endpoints):
        paths = sorted({path for endpoint, path, _ in PATHS_RUN if endpoint == name})
        carried = []
        for path in paths:
            shown = f"{path} {PATHS_RUN[name, path, True] + PATHS_RUN[name, path, False]}"
            if PATHS_RUN[name, path, False]:
                shown += f" ({PATHS_RUN[name, path, False]} raised on a 2xx body)"
            carried.append(shown)
        terminalreporter.write_line(f"  paths of {name}: {', '.join(carried)}")
    for name, count in sorted(KNOWN_SEEN.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"  known divergence, reported: {count:6d}  {name}")
