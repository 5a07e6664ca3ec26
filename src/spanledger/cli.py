"""The ``spanledger`` command.

Whatever goes wrong, the command ends with one line on standard error and a non-zero status,
never a traceback: a usage error (an unknown option, a missing argument, a bad choice) is named
with the command's ``--help`` (status 1), a setting or file spanledger cannot use is named with
its problem (status 1), an extra that is not installed is named with the command that installs
it (status 1), and anything unexpected is named by its type only (status 1; its message could
quote a file's content). ``prices check`` reports an invalid table on standard output, as its
answer. ``--help`` and ``--version`` print their text and exit 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from spanledger._version import __version__

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["main"]

_SKIP_UNREADABLE = (
    "skip the logs and directories that cannot be read, naming them on standard error "
    "(without it, the first one fails the command)"
)


class _UsageError(Exception):
    """A command line argparse refused: which (sub)command, and argparse's reason."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = " ".join(message.split())  # one line, whatever argparse wrote


class _Parser(argparse.ArgumentParser):
    """argparse raising ``_UsageError`` instead of printing its usage and exiting 2, so that a
    usage error is one line and status 1, as every other failure of the command is.
    Subcommands' parsers are of this class too (``add_subparsers`` uses the parent's)."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.prog, message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="spanledger", description="Tracing and cost accounting for retrieval calls."
    )
    parser.add_argument("--version", action="version", version=f"spanledger {__version__}")
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser(
        "demo", help="a retrieval-augmented turn end to end against a local stand-in, offline"
    )
    demo.add_argument(
        "--tour", action="store_true", help="instead, drive every provider class once"
    )
    demo.add_argument(
        "--events",
        type=Path,
        default=None,
        help="where to append the JSONL event log (default: $SPANLEDGER_EVENTS, else "
        "./spanledger-events.jsonl)",
    )
    report = commands.add_parser(
        "report", help="spend and cited token share from event logs, grouped as asked"
    )
    report.add_argument(
        "events",
        nargs="+",
        help="event logs: files, directories (every *.jsonl inside) or glob patterns; not "
        "standard input ('-'), a pipe or a device: save the log to a file first",
    )
    report.add_argument("--prices", type=Path, help="price table (TOML or JSON) to price with")
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    output.add_argument("--csv", action="store_true", help="print the rows as CSV")
    output.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="write the report as one self-contained HTML page of charts (needs spanledger[html])",
    )
    report.add_argument(
        "--by",
        default="provider,model",
        help="group rows by provider,model (default), day or request, or a comma list of them",
    )
    report.add_argument("--since", help="only calls started at or after (ISO date or time, UTC)")
    report.add_argument(
        "--until", help="only calls started before (ISO date or time, UTC; after --since)"
    )
    report.add_argument("--skip-unreadable", action="store_true", help=_SKIP_UNREADABLE)
    report.add_argument(
        "--no-cache",
        action="store_true",
        help="read every log afresh, neither using nor writing the report cache",
    )
    export = commands.add_parser(
        "export", help="event logs as Parquet, partitioned by day, for a warehouse"
    )
    export.add_argument(
        "events",
        nargs="+",
        help="event logs: files, directories or glob patterns (not '-', a pipe or a device)",
    )
    export.add_argument(
        "--parquet", type=Path, required=True, help="a new or empty directory to write into"
    )
    export.add_argument("--since", help="only records at or after (ISO date or time, UTC)")
    export.add_argument("--until", help="only records before (ISO date or time, UTC)")
    export.add_argument("--skip-unreadable", action="store_true", help=_SKIP_UNREADABLE)
    prices = commands.add_parser("prices", help="work with price tables")
    prices_commands = prices.add_subparsers(dest="prices_command", required=True, metavar="command")
    check = prices_commands.add_parser("check", help="validate a price table")
    check.add_argument("table", type=Path)
    prices_commands.add_parser(
        "example", help="print the example price table (spanledger prices example > prices.toml)"
    )
    check.add_argument(
        "--stale-days",
        default="90",
        help="report entries whose 'checked' date is older than this many days, 0 to 36500 "
        "(default 90)",
    )
    importer = prices_commands.add_parser(
        "import",
        help="write a dated table of embedding prices from genai-prices' bundled data (offline)",
    )
    importer.add_argument("source", choices=("genai-prices",), help="where the prices come from")
    importer.add_argument(
        "--output", type=Path, help="write the table to this file instead of standard output"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported here, by the innermost command given, rather than by the top
            raise _UsageError(_prog(args), f"unrecognized arguments: {' '.join(extra)}")
    except _UsageError as error:
        return _fail(f"error: {error.prog}: {error.message} (see {error.prog} --help)")
    if args.command is None:  # bare `spanledger`: say what it can do
        parser.print_help()
        return 0
    try:
        return _run(args)
    except _configuration_error() as error:
        return _fail(f"error: {error}")
    except BrokenPipeError:
        _stop_writing_to_stdout()
        return 1
    except OSError as error:
        return _fail(f"error: {_describe_os_error(error)}")
    except KeyboardInterrupt:
        return _fail("interrupted", status=130)
    except ImportError as error:  # not spanledger's own sentence: an install that lacks a part
        missing = error.name or "a module it needs"
        return _fail(
            f"error: 'spanledger {args.command}' could not import {missing}: reinstall spanledger "
            "with the extras this command needs, e.g. pip install 'spanledger[all]'"
        )
    except Exception as error:  # the last line of defence: one line, never a traceback
        return _fail(
            f"error: unexpected {type(error).__name__} in 'spanledger {args.command}' "
            "(this is a bug in spanledger; please report it)"
        )


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from spanledger._settings import writable_event_log
        from spanledger.demo import DEFAULT_EVENTS, run_demo, run_tour

        if args.tour:
            events = args.events if args.events is not None else DEFAULT_EVENTS
            writable_event_log(events, named="--events")
            return run_tour(events, sys.stdout)
        if args.events is not None:
            writable_event_log(args.events, named="--events")
        return run_demo(args.events, sys.stdout)
    if args.command == "report":
        from spanledger.fleet.options import groupings, window

        since, until = window(args.since, args.until)
        by = groupings(args.by)
        nothing = _report_of_nothing(args, by)
        if nothing is not None:
            return nothing
        remembered = _report_remembered(args, by, since, until)
        if remembered is not None:
            return remembered
        from spanledger.reporting import run_report

        return run_report(
            args.events,
            args.prices,
            as_json=args.json,
            as_csv=args.csv,
            by=by,
            since=since,
            until=until,
            html=args.html,
            skip_unreadable=args.skip_unreadable,
            cache=not args.no_cache,
            out=sys.stdout,
            err=sys.stderr,
        )
    if args.command == "export":
        from spanledger.fleet.options import window
        from spanledger.reporting import run_export

        since, until = window(args.since, args.until)
        return run_export(
            args.events,
            args.parquet,
            since=since,
            until=until,
            skip_unreadable=args.skip_unreadable,
            out=sys.stdout,
            err=sys.stderr,
        )
    if args.command == "prices" and args.prices_command == "example":
        from spanledger.ledger import example_prices_path

        sys.stdout.write(example_prices_path().read_text(encoding="utf-8"))
        return 0
    if args.command == "prices" and args.prices_command == "import":
        from spanledger.reporting import run_prices_import

        return run_prices_import(args.output, out=sys.stdout, err=sys.stderr)
    if args.command == "prices":
        from spanledger.fleet.options import stale_days
        from spanledger.reporting import run_prices_check

        days = stale_days(args.stale_days)
        return run_prices_check(args.table, stale_days=days, out=sys.stdout)
    return 2  # pragma: no cover - argparse rejects unknown commands


def _report_of_nothing(args: argparse.Namespace, by: Sequence[str]) -> int | None:
    """``spanledger report`` over empty logs, answered without importing the reader (DuckDB,
    pydantic, the ledger); ``None`` when the logs hold something or a price table or a page
    was asked for, and the full report answers."""
    if args.prices is not None or args.html is not None:
        return None
    from spanledger.fleet.empty import report_empty

    return report_empty(
        args.events,
        by,
        as_json=args.json,
        as_csv=args.csv,
        skip_unreadable=args.skip_unreadable,
        out=sys.stdout,
        err=sys.stderr,
    )


def _report_remembered(
    args: argparse.Namespace,
    by: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> int | None:
    """``spanledger report`` answered with what the same report printed over the same
    unchanged logs, without importing the reader; ``None`` when it must run (a page, no
    cache, a log changed or skipped, nothing kept)."""
    if args.html is not None or args.no_cache:
        return None
    from spanledger.fleet.remembered import answer_remembered

    return answer_remembered(
        args.events,
        args.prices,
        by,
        since,
        until,
        form="json" if args.json else "csv" if args.csv else "text",
        skip_unreadable=args.skip_unreadable,
        out=sys.stdout,
        err=sys.stderr,
    )


def _configuration_error() -> tuple[type[Exception], ...]:
    """``ConfigurationError`` for ``main`` to catch, read from ``spanledger.errors`` only if
    something imported it (nothing else can have raised one), so that a command that needs no
    more than the standard library does not import it for its error handling."""
    errors = sys.modules.get("spanledger.errors")
    return (errors.ConfigurationError,) if errors is not None else ()


def _prog(args: argparse.Namespace) -> str:
    """The (sub)command the parsed ``args`` ran, as its usage names it: ``spanledger prices
    check``."""
    words = (getattr(args, "command", None), getattr(args, "prices_command", None))
    return " ".join(["spanledger", *(word for word in words if word)])


def _fail(line: str, *, status: int = 1) -> int:
    """Say what went wrong in one line on standard error, after what was already printed."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return status


def _describe_os_error(error: OSError) -> str:
    """``path: reason`` from an ``OSError``, in the system's words."""
    reason = error.strerror or type(error).__name__
    return f"{error.filename}: {reason}" if error.filename is not None else reason


def _stop_writing_to_stdout() -> None:
    """The reader of standard output went away (``spanledger report | head``): point stdout at
    the null device so the interpreter's final flush does not fail again on exit."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
