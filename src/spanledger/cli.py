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
        "demo", help="drive every provider against a local stand-in server, offline"
    )
    demo.add_argument(
        "--events",
        type=Path,
        default=Path("spanledger-events.jsonl"),
        help="where to append the JSONL event log (default: ./spanledger-events.jsonl)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from spanledger.demo import run_demo

        return run_demo(args.events, sys.stdout)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    raise SystemExit(main())
