"""The ``spanledger`` command imports only what the command it runs needs: ``--help``,
``--version``, each subcommand's ``--help`` and a usage error import none of the heavy parts
(pydantic, DuckDB, OpenTelemetry, httpx, the ledger, attribution, events), not even
``spanledger.errors``; a report over empty logs is answered without the reader, printing what
the full report prints, byte for byte. Each command runs in a fresh interpreter, which lists
the modules it ended with: a future top-level import of a heavy part fails here, whatever it
costs on the machine running the tests."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from spanledger.cli import main
from spanledger.errors import ConfigurationError
from spanledger.fleet.empty import report_empty
from spanledger.fleet.options import GROUPINGS, groupings
from spanledger.fleet.scan import Grouping
from spanledger.reporting import run_report
from tests.reliability.test_cli_errors import clean_environment

HEAVY = (
    "pydantic",
    "pydantic_core",
    "duckdb",
    "opentelemetry",
    "httpx",
    "structlog",
    "spanledger._fingerprint",
    "spanledger.attribution",
    "spanledger.events",
    "spanledger.ledger",
    "spanledger.fleet.scan",
    "spanledger.reporting",
)
"""What no command that reads no log may import (a name and everything under it)."""

NOT_FOR_HELP = (*HEAVY, "spanledger.errors", "spanledger.fleet")
"""What a command that only prints its help or refuses its arguments may not import."""

_PROBE = """\
import sys
from spanledger.cli import main
try:
    status = main(sys.argv[2:])
finally:
    with open(sys.argv[1], "w", encoding="utf-8") as listing:
        listing.write("\\n".join(sorted(sys.modules)))
sys.exit(status)
"""
"""Run the command line given after the listing's path, then write every module imported."""


def _run(tmp_path: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The command run as the console script runs it, in a fresh interpreter in ``tmp_path``;
    and the modules that interpreter had imported when the command returned."""
    listing = tmp_path / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(listing), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_environment(),
        timeout=120,
        check=False,
    )
    assert listing.exists(), done.stderr
    return done, set(listing.read_text(encoding="utf-8").split())


def _imported(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name
        for name in modules
        if any(name == part or name.startswith(part + ".") for part in forbidden)
    )


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A folder holding an empty log ``empty.jsonl`` and an empty directory ``none``."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "none").mkdir()
    return folder


HELP_AND_USAGE = [
    ([], 0),
    (["--help"], 0),
    (["--version"], 0),
    (["demo", "--help"], 0),
    (["report", "--help"], 0),
    (["export", "--help"], 0),
    (["prices", "--help"], 0),
    (["prices", "check", "--help"], 0),
    (["prices", "example", "--help"], 0),
    (["prices", "import", "--help"], 0),
    (["bogus"], 1),
    (["report"], 1),
    (["report", "x.jsonl", "--json", "--csv"], 1),
    (["export", "x.jsonl"], 1),
    (["prices", "import", "nope"], 1),
]


@pytest.mark.parametrize(
    ("argv", "status"), HELP_AND_USAGE, ids=[" ".join(argv) or "bare" for argv, _ in HELP_AND_USAGE]
)
def test_help_version_and_usage_errors_import_nothing_heavy(
    tmp_path: Path, argv: list[str], status: int
) -> None:
    done, modules = _run(tmp_path, *argv)

    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    assert _imported(modules, NOT_FOR_HELP) == []


REPORTS_OF_NOTHING = [
    ["empty.jsonl"],
    ["empty.jsonl", "--json"],
    ["empty.jsonl", "--csv"],
    ["empty.jsonl", "--by", "day,request", "--skip-unreadable"],
    ["none"],
    ["none", "--json"],
]


@pytest.mark.parametrize("argv", REPORTS_OF_NOTHING, ids=" ".join)
def test_a_report_over_empty_logs_imports_nothing_heavy(logs: Path, argv: list[str]) -> None:
    done, modules = _run(logs, "report", *argv)

    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert _imported(modules, HEAVY) == []


def test_a_bad_option_is_one_line_without_pydantic(logs: Path) -> None:
    """``ConfigurationError`` is caught as before though ``main`` did not import it."""
    done, modules = _run(logs, "report", "empty.jsonl", "--by", "bogus")

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: --by 'bogus': groups by provider, model, day, request or a comma list of them\n"
    )
    assert _imported(modules, HEAVY) == []


def test_a_report_that_reads_a_log_imports_the_reader(logs: Path) -> None:
    """The probe sees imports: a log with a line in it goes to the full report."""
    (logs / "one.jsonl").write_text("\n", encoding="utf-8")

    _, modules = _run(logs, "report", "one.jsonl")

    assert "duckdb" in modules
    assert "spanledger.reporting" in modules


def test_a_report_answered_from_the_cache_imports_neither_duckdb_nor_capture(
    logs: Path,
) -> None:
    """A second report over an unchanged log is answered from the remembered scan: DuckDB is
    never started, and the attribution package's capture and matching are never loaded;
    asked the same a third time, it prints what it printed without the reader or pydantic."""
    log = logs / "one.jsonl"
    log.write_text("\n", encoding="utf-8")
    first, _ = _run(logs, "report", log.name, "--json")
    answers = Path(os.environ["XDG_CACHE_HOME"]) / "spanledger" / "report-cache" / "answers"
    shutil.rmtree(answers)
    second, modules = _run(logs, "report", log.name, "--json")

    assert second.stdout == first.stdout
    assert "spanledger.fleet.scan" in modules
    assert _imported(modules, ("duckdb",)) == []
    unneeded = ("spanledger.attribution.context", "spanledger.attribution.matching")
    assert _imported(modules, unneeded) == []

    third, modules = _run(logs, "report", log.name, "--json")
    assert (third.returncode, third.stdout, third.stderr) == (
        second.returncode,
        second.stdout,
        second.stderr,
    )
    assert "spanledger.fleet.remembered" in modules
    heavy = ("duckdb", "pydantic", "spanledger.fleet.scan", "spanledger.events")
    assert _imported(modules, heavy) == []


def _full(sources: list[str], by: str, *, as_json: bool, as_csv: bool) -> tuple[int, str, str]:
    """What the full report (the reader, DuckDB, the ledger) prints and returns."""
    out, err = io.StringIO(), io.StringIO()
    try:
        status = run_report(
            sources, None, as_json=as_json, as_csv=as_csv, by=groupings(by), out=out, err=err
        )
    except ConfigurationError as error:
        return 1, out.getvalue(), f"error: {error}\n"
    return status, out.getvalue(), err.getvalue()


SAME_AS_FULL = [
    (sources, by, form)
    for sources in (["empty.jsonl"], ["empty.jsonl", "./empty.jsonl", "more.jsonl"], ["none"])
    for by in ("provider,model", "day", "request", "model,request", "day,provider,model,request")
    for form in ("text", "json", "csv")
]


@pytest.mark.parametrize(
    ("sources", "by", "form"),
    SAME_AS_FULL,
    ids=[f"{'+'.join(sources)}-{by}-{form}" for sources, by, form in SAME_AS_FULL],
)
def test_the_report_of_nothing_is_the_full_reports_byte_for_byte(
    logs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sources: list[str],
    by: str,
    form: str,
) -> None:
    monkeypatch.chdir(logs)
    (logs / "more.jsonl").write_bytes(b"")
    flags = {"text": [], "json": ["--json"], "csv": ["--csv"]}[form]
    expected = _full(sources, by, as_json=form == "json", as_csv=form == "csv")

    status = main(["report", *sources, "--by", by, *flags])

    captured = capsys.readouterr()
    assert (status, captured.out, captured.err) == expected


def test_today_s_report_of_nothing(logs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Pinned as the full report printed it when the short way was added."""
    status = main(["report", str(logs / "empty.jsonl")])

    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == (
        "0 calls\n"
        "priced: 0  estimated: 0  unpriced: 0  unmetered: 0  not_billed: 0\n"
        "known spend: none\n"
        "\n"
        "provider model status         calls             amount       tokens    units"
        "        chars\n"
        "\n"
        "(tokens, units, chars: what the provider reported; unknown: no call reported it; "
        "\N{EM DASH}: the operation has none)\n"
        "\n"
        "attribution: no request reports in the log\n"
    )
    assert captured.err == "no readable event in 1 file\n"


@pytest.mark.parametrize("content", [b"\n", b"{}\n", b" "])
def test_a_log_holding_anything_is_left_to_the_full_report(logs: Path, content: bytes) -> None:
    log = logs / "something.jsonl"
    log.write_bytes(content)
    out, err = io.StringIO(), io.StringIO()

    answered = report_empty(
        [str(logs / "empty.jsonl"), str(log)],
        ("provider", "model"),
        as_json=False,
        as_csv=False,
        skip_unreadable=False,
        out=out,
        err=err,
    )

    assert (answered, out.getvalue(), err.getvalue()) == (None, "", "")


def test_a_directory_holding_anything_is_left_to_the_full_report(logs: Path) -> None:
    (logs / "none" / "empty.jsonl").write_bytes(b"")
    out, err = io.StringIO(), io.StringIO()

    answered = report_empty(
        [str(logs / "none")],
        ("day",),
        as_json=True,
        as_csv=False,
        skip_unreadable=False,
        out=out,
        err=err,
    )

    assert (answered, out.getvalue(), err.getvalue()) == (None, "", "")


def test_a_log_written_to_since_it_was_looked_at_is_left_to_the_full_report(
    logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sizes are read again once ``log_files`` has opened the logs: a log that has grown
    meanwhile is read, not reported as empty."""
    log = logs / "growing.jsonl"
    log.write_bytes(b"{}\n")
    monkeypatch.setattr("spanledger.fleet.empty._holds_nothing", lambda source: True)
    out, err = io.StringIO(), io.StringIO()

    answered = report_empty(
        [str(log)],
        ("provider", "model"),
        as_json=False,
        as_csv=True,
        skip_unreadable=False,
        out=out,
        err=err,
    )

    assert (answered, out.getvalue(), err.getvalue()) == (None, "", "")


def test_the_options_know_every_grouping_the_scan_groups_by() -> None:
    assert get_args(Grouping) == GROUPINGS


def test_the_errors_module_builds_no_pydantic_model_until_a_fingerprint_is_asked_for(
    tmp_path: Path,
) -> None:
    code = (
        "import sys, spanledger.errors as errors\n"
        "print('pydantic' in sys.modules)\n"
        "errors.Fingerprint.of(b'x')\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_environment(),
        timeout=120,
        check=False,
    )

    assert (done.returncode, done.stdout.split()) == (0, ["False", "True"]), done.stderr


def test_the_fingerprint_keeps_its_public_home() -> None:
    from spanledger import Fingerprint as top
    from spanledger.errors import Fingerprint, ProviderError

    fingerprint = Fingerprint.of(b"body")
    error = ProviderError("provider_unavailable", 503, fingerprint=fingerprint)

    assert top is Fingerprint
    assert f"{Fingerprint.__module__}.{Fingerprint.__qualname__}" == "spanledger.errors.Fingerprint"
    assert b"spanledger.errors" in pickle.dumps(fingerprint)
    assert pickle.loads(pickle.dumps(fingerprint)) == fingerprint
    assert pickle.loads(pickle.dumps(error)).fingerprint == fingerprint
    assert "Fingerprint" in dir(sys.modules["spanledger.errors"])
