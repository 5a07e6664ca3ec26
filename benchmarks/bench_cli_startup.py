"""How long the ``spanledger`` command takes to start when it has nothing to read.

Runs, in one process, R rounds (default 21) of each of these child processes, interleaved so
that the machine's load falls on all of them alike, and prints each one's median wall time:

- the baseline: ``python -c pass``, the interpreter alone;
- ``spanledger --help``;
- ``spanledger report <empty log>``, ``spanledger report <empty log> --json`` and
  ``spanledger report <empty directory>``.

Each command's median minus the baseline's is what spanledger's imports (and its little work)
cost. The command is the console script beside this interpreter, else the same entry point
run with ``-c``. Given another copy of the package (the folder holding its ``spanledger``, as
``src`` does), each command also runs against it, interleaved with the rest: a before and
after measured under the same load.

Target: each command <= 0.15 s above the baseline.

    python benchmarks/bench_cli_startup.py [rounds] [other-src]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 0.15


def command() -> list[str]:
    """How to run ``spanledger``: its console script, or its entry point if there is none."""
    script = Path(sys.executable).parent / "spanledger"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from spanledger.cli import main; sys.exit(main())"]


def wall(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Seconds from starting ``argv`` to its exit, its output thrown away."""
    started = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - started


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    other = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else None
    spanledger = command()
    here = dict(os.environ)
    there = {**here, "PYTHONPATH": str(other)} if other is not None else None
    with tempfile.TemporaryDirectory() as folder:
        where = Path(folder)
        (where / "empty.jsonl").write_bytes(b"")
        (where / "none").mkdir()
        commands = {
            "spanledger --help": [*spanledger, "--help"],
            "spanledger report <empty log>": [*spanledger, "report", "empty.jsonl"],
            "spanledger report <empty log> --json": [
                *spanledger,
                "report",
                "empty.jsonl",
                "--json",
            ],
            "spanledger report <empty directory>": [*spanledger, "report", "none"],
        }
        runs = {"python -c pass (baseline)": ([sys.executable, "-c", "pass"], here)}
        runs.update({name: (argv, here) for name, argv in commands.items()})
        if there is not None:
            runs.update({f"{name} [other]": (argv, there) for name, argv in commands.items()})
        for argv, env in runs.values():  # warm the file cache and the bytecode
            wall(argv, where, env)
        times: dict[str, list[float]] = {name: [] for name in runs}
        for round_ in range(rounds):
            names = list(runs)
            shift = round_ % len(names)  # a different command goes first each round
            for name in names[shift:] + names[:shift]:
                argv, env = runs[name]
                times[name].append(wall(argv, where, env))
    medians = {name: statistics.median(seconds) for name, seconds in times.items()}
    baseline = next(iter(medians.values()))
    print(f"{rounds} interleaved rounds, medians; spanledger: {' '.join(spanledger)}")
    if other is not None:
        print(f"[other]: the same command importing spanledger from {other}")
    print(f"{'command':<48} {'wall ms':>9} {'- baseline ms':>14}  target <= 150 ms")
    for name, seconds in medians.items():
        if name == next(iter(medians)):
            print(f"{name:<48} {seconds * 1000:>9.1f}")
            continue
        above = seconds - baseline
        verdict = "ok" if above <= TARGET_SECONDS else "OVER"
        print(f"{name:<48} {seconds * 1000:>9.1f} {above * 1000:>14.1f}  {verdict}")


if __name__ == "__main__":
    main()
