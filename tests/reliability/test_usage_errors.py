"""A command line the ``spanledger`` command cannot parse (an unknown option, a missing
argument, a bad choice), for the command and every subcommand, is one line on standard error
naming the (sub)command and where its help is, with status 1, as every other failure of the
command is (argparse's own way is a usage block and status 2). ``--help`` and ``--version``
still print their text and exit 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spanledger.cli import main
from tests.reliability.test_cli_errors import REPO_ROOT, clean_environment

USAGE_ERRORS = [
    # (command line, the (sub)command that refuses it, argparse's reason)
    (["--bogus"], "spanledger", "unrecognized arguments: --bogus"),
    (["bogus"], "spanledger", "argument command: invalid choice: 'bogus'"),
    (["demo", "--bogus"], "spanledger demo", "unrecognized arguments: --bogus"),
    (["demo", "--events"], "spanledger demo", "argument --events: expected one argument"),
    (["report"], "spanledger report", "the following arguments are required: events"),
    (["report", "x.jsonl", "--bogus"], "spanledger report", "unrecognized arguments: --bogus"),
    (
        ["report", "x.jsonl", "--json", "--csv"],
        "spanledger report",
        "argument --csv: not allowed with argument --json",
    ),
    (["export", "x.jsonl"], "spanledger export", "the following arguments are required: --parquet"),
    (
        ["export", "x.jsonl", "--parquet", "out", "--bogus"],
        "spanledger export",
        "unrecognized arguments: --bogus",
    ),
    (["prices"], "spanledger prices", "the following arguments are required: command"),
    (["prices", "bogus"], "spanledger prices", "argument command: invalid choice: 'bogus'"),
    (["prices", "check"], "spanledger prices check", "the following arguments are required: table"),
    (["prices", "example", "extra"], "spanledger prices example", "unrecognized arguments: extra"),
    (
        ["prices", "import", "nope"],
        "spanledger prices import",
        "argument source: invalid choice: 'nope'",
    ),
]


@pytest.mark.parametrize(
    ("argv", "command", "reason"), USAGE_ERRORS, ids=[" ".join(argv) for argv, *_ in USAGE_ERRORS]
)
def test_a_usage_error_is_one_line_naming_the_command_and_its_help(
    capsys: pytest.CaptureFixture[str], argv: list[str], command: str, reason: str
) -> None:
    status = main(argv)

    captured = capsys.readouterr()
    assert (status, captured.out) == (1, "")
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {command}: {reason}")
    assert captured.err.endswith(f" (see {command} --help)\n")


def test_a_usage_error_is_status_1_run_as_users_run_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "spanledger.cli", "report", "--bogus", "x.jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
        env=clean_environment(),
        check=False,
    )

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: spanledger report: unrecognized arguments: --bogus (see spanledger report --help)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["demo", "--help"],
        ["report", "--help"],
        ["export", "-h"],
        ["prices", "--help"],
        ["prices", "check", "--help"],
        ["prices", "example", "--help"],
        ["prices", "import", "--help"],
    ],
    ids=" ".join,
)
def test_help_still_prints_the_usage_and_exits_0(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)

    captured = capsys.readouterr()
    assert stopped.value.code == 0
    assert captured.out.startswith("usage: spanledger")
    assert captured.err == ""


def test_version_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])

    assert stopped.value.code == 0
    assert capsys.readouterr().out.startswith("spanledger ")
