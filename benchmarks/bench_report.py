"""``spanledger report`` over a generated fleet-sized log, against DuckDB's bare group-by.

Generates a log of N events (a quarter of its requests also carry an attribution record),
then, in the same run, interleaved, medians over the rounds:

- the baseline: DuckDB's ``read_json`` with a group-by over provider and model, summing tokens;
- the first report (an empty report cache), the CLI in a child process;
- the second report over the same unchanged file, asking the same (answered with what the
  first printed);
- the same with the remembered answer removed (priced from the remembered scan);
- the same with the remembered scan removed too (read from the cache's Parquet parts);
- ``--no-cache`` (everything judged afresh, nothing written);
- the report after 1 % more lines are appended (only those are judged; the figures must
  include them);

and the report process's peak RSS (its own ``VmHWM``) and its judging workers' largest. The
three reports must print the same JSON as ``--no-cache``.

Targets (issue 37): first <= 1.5 x the bare group-by; second <= 0.5 x; peak RSS <= 300 MB and
flat from 1 M to 10 M events.

    python benchmarks/bench_report.py [events ...] [--baseline SRC]
                                                  (default: 100000, a quick check)
    python benchmarks/bench_report.py 1000000 10000000

``--baseline SRC`` also runs the reports with another spanledger's source folder (say, an
earlier commit's ``src`` from ``git archive``) first on ``PYTHONPATH``, in the same rounds, and
prints its line below (with its own cache folder).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from spanledger.errors import ErrorCategory
from spanledger.eventlog import event_line
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingUsage,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
)

PRICES = Path(__file__).resolve().parents[1] / "src" / "spanledger" / "data" / "example-prices.toml"
START = datetime(2026, 11, 1, tzinfo=UTC)
MODELS = [
    ("openai", "text-embedding-3-small"),
    ("cohere", "embed-v4.0"),
    ("voyageai", "voyage-3.5"),
]


def templates() -> list[str]:
    """One line of each kind, with ``@ID@``, ``@REQ@``, ``@AT@`` and ``@N@`` to fill in."""
    at = START
    common = {"call_id": "@ID@", "request_id": "@REQ@", "started_at": at, "latency_ms": 3.5}
    lines = [
        event_line(
            EmbeddingEvent(
                provider=provider,
                model=model,
                input_count=8,
                dimensions=1024,
                usage=EmbeddingUsage(input_tokens=4321),
                **common,
            )
        )
        for provider, model in MODELS
    ]
    lines.append(
        event_line(
            RerankEvent(
                provider="cohere",
                model="rerank-v3.5",
                query_length=30,
                document_count=40,
                result_count=10,
                usage=RerankUsage(search_units=1),
                **common,
            )
        )
    )
    lines.append(
        event_line(
            RerankFailedEvent(
                provider="voyageai",
                model="rerank-2.5",
                query_length=30,
                document_count=40,
                error_category=ErrorCategory.UNAVAILABLE,
                error_type="ReadTimeout",
                estimated_usage=RerankUsage(input_tokens=1234),
                **common,
            )
        )
    )
    attribution = event_line(
        AttributionRecord(
            request_id="@REQ@",
            at=at,
            frames_served=8,
            frames_rendered=6,
            frames_cited=3,
            rendered_tokens=900,
            cited_tokens=400,
            uncited_rendered_tokens=500,
            cited_token_share=0.4444,
            reconcilable=True,
            calls=4,
            billed_input_tokens=4321,
            billed_search_units=1,
            calls_without_usage=0,
            spend="0.0021",
            currency="USD",
            spend_complete=True,
            spend_per_cited_token="0.00000525",
        )
    )
    stamp = at.isoformat().replace("+00:00", "Z")
    filled = [line.decode().replace(stamp, "@AT@").replace("4321", "@N@") for line in lines]
    return [*filled, attribution.decode().replace(stamp, "@AT@")]


def generate(path: Path, events: int, first: int = 0) -> None:
    """``events`` calls numbered from ``first`` appended to ``path``."""
    *calls, attribution = templates()
    step = timedelta(days=30) / max(events + first, 1)
    with path.open("a", encoding="utf-8") as out:
        chunk: list[str] = []
        for number in range(first, first + events):
            at = (START + step * number).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            request = f"req-{number // 4}"
            line = calls[number % len(calls)]
            chunk.append(
                line.replace("@ID@", f"{number:032x}")
                .replace("@REQ@", request)
                .replace("@AT@", at)
                .replace("@N@", str(100 + number % 5000))
            )
            if number % 16 == 3:
                chunk.append(attribution.replace("@REQ@", request).replace("@AT@", at))
            if len(chunk) >= 20000:
                out.write("".join(chunk))
                chunk.clear()
        out.write("".join(chunk))


def bare_group_by(path: Path) -> float:
    connection = duckdb.connect()
    started = time.perf_counter()
    connection.execute(
        "SELECT provider, model, count(*), sum(usage.input_tokens) "
        f"FROM read_json('{path}', format='newline_delimited') GROUP BY ALL"
    ).fetchall()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


_CHILD = """
import resource, sys
from spanledger.cli import main
try:
    status = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as own:
        peak = next(int(line.split()[1]) for line in own if line.startswith("VmHWM"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    sys.stderr.write(f"\\nPEAK {peak} {workers}\\n")
raise SystemExit(status)
"""


@dataclass
class Run:
    seconds: float
    peak_mb: float
    workers_mb: float
    data: dict[str, object]


def report(path: Path, cache_home: Path, *extra: str, source: str | None = None) -> Run:
    """The CLI's wall time, its own peak RSS and its workers' largest (MB), and its JSON;
    ``source``: a spanledger source folder to run instead of the installed one."""
    command = [sys.executable, "-c", _CHILD, "report", str(path), "--prices", str(PRICES)]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--json", *extra],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    elapsed = time.perf_counter() - started
    peak, workers = done.stderr.strip().splitlines()[-1].split()[1:]
    return Run(elapsed, int(peak) / 1024, int(workers) / 1024, json.loads(done.stdout))


@dataclass
class Timings:
    """One spanledger's reports over a log, round by round."""

    first: list[Run]
    second: list[Run]
    scan: list[Run]
    parts: list[Run]
    fresh: list[Run]

    def every(self) -> list[Run]:
        return self.first + self.second + self.scan + self.parts + self.fresh


def measure(path: Path, cache: Path, timings: Timings, source: str | None) -> None:
    """One round: the first report, the second, the second priced from the remembered scan,
    the second read from the parts, and ``--no-cache``, from an empty cache."""
    shutil.rmtree(cache, ignore_errors=True)
    timings.first.append(report(path, cache, source=source))
    timings.second.append(report(path, cache, source=source))
    remembered = cache / "spanledger" / "report-cache"
    shutil.rmtree(remembered / "answers", ignore_errors=True)
    timings.scan.append(report(path, cache, source=source))
    shutil.rmtree(remembered / "answers", ignore_errors=True)
    shutil.rmtree(remembered / "scans", ignore_errors=True)
    timings.parts.append(report(path, cache, source=source))
    timings.fresh.append(report(path, cache, "--no-cache", source=source))


def main() -> int:
    arguments = sys.argv[1:]
    baseline: str | None = None
    if "--baseline" in arguments:
        at = arguments.index("--baseline")
        baseline = arguments[at + 1]
        del arguments[at : at + 2]
    sizes = [int(arg) for arg in arguments] or [100_000]
    print("spanledger report against DuckDB's bare group-by over the same file, same run")
    print(
        f"{'events':>10} {'MB':>6} {'bare':>7} {'first':>7} {'second':>7} {'scan':>7} "
        f"{'parts':>7} {'append':>7} {'nocache':>7} {'first/b':>7} {'second/b':>8} "
        f"{'scan/b':>7} {'parts/b':>7} "
        f"{'peak RSS':>9} {'workers':>8}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            path = Path(folder) / f"log-{size}.jsonl"
            cache = Path(folder) / "cache"
            generate(path, size)
            rounds = 3 if size < 5_000_000 else 1
            bare: list[float] = []
            now = Timings([], [], [], [], [])
            before = Timings([], [], [], [], [])
            for _ in range(rounds):
                bare.append(bare_group_by(path))
                measure(path, cache, now, None)
                if baseline is not None:
                    measure(path, Path(folder) / "baseline-cache", before, baseline)
            expected = _same(now.fresh[0])
            assert expected["events"] == size, expected["events"]
            for run in now.every() + before.every():
                assert _same(run) == expected, "a report differs from --no-cache"
            added = max(size // 100, 1)
            generate(path, added, first=size)
            appended = report(path, cache)
            after = report(path, cache, "--no-cache")
            assert appended.data["events"] == size + added, appended.data["events"]
            assert _same(appended) == _same(after), "the appended report differs"
            base = statistics.median(bare)
            print(_line(f"{size:>10}", path, base, now, [appended, after]))
            if baseline is not None:
                grown = report(path, Path(folder) / "baseline-cache", source=baseline)
                assert _same(grown) == _same(after), "the baseline's appended report differs"
                print(_line(f"{'baseline':>10}", path, base, before, [grown]))
            os.unlink(path)
    print("targets: first <= 1.5x, second <= 0.5x the bare group-by; peak RSS <= 300 MB, flat")
    return 0


def _line(label: str, path: Path, base: float, timings: Timings, appended: list[Run]) -> str:
    """One printed row: the timings' medians, their ratios to ``base``, and peak RSS."""
    every = timings.every() + appended
    return (
        f"{label} {path.stat().st_size / 2**20:>6.0f} {base:>6.2f}s "
        f"{_median(timings.first):>6.2f}s {_median(timings.second):>6.2f}s "
        f"{_median(timings.scan):>6.2f}s {_median(timings.parts):>6.2f}s "
        f"{appended[0].seconds:>6.2f}s {_median(timings.fresh):>6.2f}s "
        f"{_median(timings.first) / base:>6.2f}x {_median(timings.second) / base:>7.2f}x "
        f"{_median(timings.scan) / base:>6.2f}x {_median(timings.parts) / base:>6.2f}x "
        f"{max(run.peak_mb for run in every):>7.0f}MB "
        f"{max(run.workers_mb for run in every):>6.0f}MB"
    )


def _same(run: Run) -> dict[str, object]:
    """A report's JSON, for comparing runs."""
    return run.data


def _median(runs: list[Run]) -> float:
    return statistics.median(run.seconds for run in runs)


if __name__ == "__main__":
    raise SystemExit(main())
