"""``spanledger report --html`` against the text report over the same generated log, same run.

Generates the log ``bench_report.py`` uses (default 1,000,000 events over 30 days, a quarter
of its requests with an attribution record), then runs the CLI (start-up included) in child
processes, alternating: the text report, and the report written as an HTML page. Prints each
one's best wall time, their ratio and the page's size.

Targets: ``--html`` <= 1.2 x the text report; the page under 2 MB at any size.

    python benchmarks/bench_report_html.py [events ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import PRICES, generate  # the same log, beside this script

RUNS = 3


def timed(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "spanledger.cli", "report", *args, "--prices", str(PRICES)],
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started


def main() -> int:
    sizes = [int(arg) for arg in sys.argv[1:]] or [1_000_000]
    print("spanledger report --html against the text report over the same file, same run")
    print(f"{'events':>10} {'log MB':>7} {'text':>7} {'html':>7} {'ratio':>6} {'page KB':>8}")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            log = Path(folder) / f"log-{size}.jsonl"
            page = Path(folder) / f"report-{size}.html"
            generate(log, size)
            text: list[float] = []
            html: list[float] = []
            for _ in range(RUNS):  # alternated, so both see the same machine
                text.append(timed(str(log)))
                html.append(timed(str(log), "--html", str(page)))
            best_text, best_html = min(text), min(html)
            print(
                f"{size:>10} {log.stat().st_size / 2**20:>7.0f} {best_text:>6.2f}s "
                f"{best_html:>6.2f}s {best_html / best_text:>5.2f}x "
                f"{page.stat().st_size / 1024:>8.0f}  (targets: <= 1.2x, < 2048 KB)"
            )
            os.unlink(log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
