"""The ``spanledger`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spanledger", description="Tracing and cost accounting for retrieval calls."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="a retrieval-augmented turn end to end against a local stand-in, offline"
    )
    demo.add_argument(
        "--tour", action="store_true", help="instead, drive every provider class once"
    )
    demo.add_argument(
        "--events",
        type=Path,
        default=Path("spanledger-events.jsonl"),
        help="where to append the JSONL event log (default: ./spanledger-events.jsonl)",
    )
    report = commands.add_parser("report", help="spend per provider and model from an event log")
    report.add_argument("events", type=Path, help="a JSONL event log")
    report.add_argument("--prices", type=Path, help="price table (TOML or JSON) to price with")
    report.add_argument("--json", action="store_true", help="print JSON instead of a table")
    prices = commands.add_parser("prices", help="work with price tables")
    prices_commands = prices.add_subparsers(dest="prices_command", required=True)
    check = prices_commands.add_parser("check", help="validate a price table")
    check.add_argument("table", type=Path)
    check.add_argument(
        "--stale-days",
        type=int,
        default=90,
        help="report entries whose 'checked' date is older than this (default 90)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from spanledger.demo import run_demo, run_tour

        return (run_tour if args.tour else run_demo)(args.events, sys.stdout)
    if args.command == "report":
        from spanledger.reporting import run_report

        return run_report(args.events, args.prices, as_json=args.json, out=sys.stdout)
    if args.command == "prices":
        from spanledger.reporting import run_prices_check

        return run_prices_check(args.table, stale_days=args.stale_days, out=sys.stdout)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    raise SystemExit(main())
