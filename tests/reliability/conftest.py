"""Rigs for the reliability suite: the raw loopback server, and a summary of the wire fuzz's
calls and violations at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.fuzz_contract import TALLIES
from tests.reliability.fuzz_servers import RawServer


@pytest.fixture(scope="module")
def raw_server() -> Iterator[RawServer]:
    server = RawServer().start()
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLIES:
        return
    calls = sum(tally.calls for tally in TALLIES)
    by_kind: dict[str, int] = {}
    for tally in TALLIES:
        for kind, count in tally.counts.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
    terminalreporter.section("wire fuzz")
    terminalreporter.write_line(
        f"{calls} calls in {len(TALLIES)} fuzz tests, {sum(by_kind.values())} violations"
    )
    for kind, count in sorted(by_kind.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"  {count:6d}  {kind}")
    outcomes: dict[str, int] = {}
    for tally in TALLIES:
        for what, count in tally.outcomes.items():
            group = _group(what)
            outcomes[group] = outcomes.get(group, 0) + count
    notes: dict[str, int] = {}
    for tally in TALLIES:
        for note, count in tally.notes.items():
            notes[note] = notes.get(note, 0) + count
    for note, count in sorted(notes.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"  (note, not a violation) {count:6d}  {note}")
    terminalreporter.write_line("how the calls ended:")
    for what, count in sorted(outcomes.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"  {count:6d}  {what}")


def _group(outcome: str) -> str:
    """Transport outcomes by status class: ``"recognised, answered 404"`` -> ``"... 4xx"``."""
    head, _, last = outcome.rpartition(" ")
    if head.endswith("answered") and last.isdigit():
        return f"{head} {last[0]}xx"
    return outcome
