"""``spanledger export`` of a generated fleet-sized log, against baselines in the same run.

Generates a log of N calls (default 10,000,000) in /tmp, in one of two shapes:

- ``demo``: the lines ``spanledger demo`` writes (two embeddings, a failed and a successful
  rerank, each with its cost line, and the request's attribution record after every four
  calls), templated with a fresh ``call_id``, ``request_id`` and time;
- ``minimal``: the line the library writes for an embedding with only its required fields;

every line on one UTC day (times spread over the day), or with ``--days D`` spread over D days:
in time order, as a process writes its log, or with ``--interleaved`` the days taking turns
line by line (every day has rows all along the file). Then, each in a child process whose own
peak RSS is read from the kernel (``VmHWM``, Linux):

- the baseline: DuckDB's bare ``COPY (SELECT * FROM read_json(...)) TO ... (FORMAT PARQUET)``
  over the same file (no classes, casts or partitions; DuckDB's default settings);
- ``spanledger report <log> --json`` over the same file;
- ``spanledger export <log> --parquet <dir>``, whose row counts are checked.

Printed: each one's wall time and peak RSS, and export's time as a ratio of each baseline's.
Target: export's peak RSS <= 300 MB (``report``'s own bound), whatever N and D. The log and the
export are deleted after each run.

    python benchmarks/bench_export.py [--lines N] [--shape demo|minimal] [--days D ...]
        [--interleaved] [--no-baselines]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb

from spanledger.costs import CostLine, CostStatus
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

DAY = datetime(2026, 11, 3, tzinfo=UTC)
TARGET_MB = 300
_STAMP = "2026-11-03T00:00:00Z"
_MICROS_A_DAY = 86_400_000_000
_CHUNK = 100_000


def _cost(amount: str, entry: str, status: CostStatus = CostStatus.PRICED) -> CostLine:
    return CostLine(
        status,
        Decimal(amount),
        "USD",
        dimensions={"input_tokens": Decimal(amount)},
        price_entry=entry,
    )


def demo_templates() -> tuple[list[str], str]:
    """The four calls and the attribution record of a demo turn, as ``%``-format strings
    taking (call id, request id, time) and (request id, time)."""
    common = {
        "call_id": "@ID@",
        "request_id": "@REQ@",
        "started_at": DAY,
        "server_address": "127.0.0.1",
        "server_port": 37129,
    }
    calls: list[EmbeddingEvent | RerankEvent | RerankFailedEvent] = [
        EmbeddingEvent(
            provider="cohere",
            model="embed-v4.0",
            billing="tokens",
            latency_ms=3.4271990007255226,
            request_params={"input_type": "document"},
            cost=_cost("0.00001776", "cohere/embed-v4.0"),
            response_id="standin-3369c7bdfb1b",
            input_count=8,
            input_type="document",
            usage=EmbeddingUsage(input_tokens=148),
            dimensions=16,
            **common,
        ),
        EmbeddingEvent(
            provider="cohere",
            model="embed-v4.0",
            billing="tokens",
            latency_ms=1.2912509992020205,
            request_params={"input_type": "query"},
            cost=_cost("0.00000096", "cohere/embed-v4.0"),
            response_id="standin-35b43a32db8f",
            input_count=1,
            input_type="query",
            usage=EmbeddingUsage(input_tokens=8),
            dimensions=16,
            **common,
        ),
        RerankFailedEvent(
            provider="voyageai",
            model="rerank-2.5",
            billing="tokens",
            latency_ms=502.33680900055333,
            cost=_cost("0.00000795", "voyageai/rerank-2.5", CostStatus.ESTIMATED),
            error_category=ErrorCategory.UNAVAILABLE,
            error_type="ReadTimeout",
            error_message="provider_unavailable: timed out",
            query_length=32,
            document_count=6,
            top_k=3,
            estimated_usage=RerankUsage(input_tokens=159),
            **common,
        ),
        RerankEvent(
            provider="cohere",
            model="rerank-v3.5",
            billing="search_units",
            latency_ms=2.267593998112716,
            cost=_cost("0.002", "cohere/rerank-v3.5"),
            response_id="standin-rerank",
            query_length=32,
            document_count=6,
            top_k=3,
            result_count=3,
            usage=RerankUsage(search_units=1),
            **common,
        ),
    ]
    record = AttributionRecord(
        request_id="@REQ@",
        at=DAY,
        frames_served=6,
        frames_rendered=3,
        frames_cited=2,
        rendered_tokens=60,
        cited_tokens=42,
        uncited_rendered_tokens=18,
        cited_token_share=0.7,
        reconcilable=True,
        calls=4,
        billed_input_tokens=156,
        billed_search_units=1,
        calls_without_usage=0,
        spend=Decimal("0.00202667"),
        currency="USD",
        spend_complete=True,
        spend_per_cited_token=Decimal("0.00004825404761904761904761904762"),
        calls_by_status={"priced": 3, "estimated": 1},
        spend_by_status={"priced": Decimal("0.00201872"), "estimated": Decimal("0.00000795")},
        chains_by_status={"degraded": 1},
        model_calls=1,
        quoted_tokens=0,
        cited_by={"prompt_label": 2},
        context_spend=Decimal("0.000008914678899083"),
        cited_context_spend=Decimal("0.000006206422018349"),
        unused_context_spend=Decimal("0.000002708256880734"),
        context_currency="USD",
    )
    return [_template(event_line(call)) for call in calls], _template(event_line(record))


def minimal_template() -> str:
    """The line of an embedding with only its required fields, taking (call id, time)."""
    call = EmbeddingEvent(
        call_id="@ID@", provider="openai", model="m", started_at=DAY, latency_ms=1.0, input_count=1
    )
    return _template(event_line(call))


def _template(line: bytes) -> str:
    text = line.decode().replace("%", "%%").replace(_STAMP, "@AT@")
    return text.replace("@ID@", "%s").replace("@REQ@", "%s").replace("@AT@", "%s")


def _moment(number: int, calls: int, days: int, interleaved: bool) -> str:
    """The time of call ``number`` of ``calls`` over ``days`` UTC days: in order (as one
    process's log is written), or with ``interleaved`` the days taking turns line by line (so
    every day has rows all along the file), each day's calls spread over its 24 hours."""
    if interleaved:
        day, rank = number % days, number // days
        micros = rank * _MICROS_A_DAY // max(1, -(-calls // days))
    else:
        day, micros = divmod(number * days * _MICROS_A_DAY // calls, _MICROS_A_DAY)
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    date = (DAY + timedelta(days=day)).strftime("%Y-%m-%d")
    return f"{date}T{hour:02d}:{minute:02d}:{second:02d}.{micro:06d}Z"


def generate(path: Path, calls: int, shape: str, days: int, interleaved: bool = False) -> int:
    """Write ``calls`` calls of ``shape`` over ``days`` UTC days to ``path`` (``_moment``);
    the lines written."""
    written = 0
    with path.open("w", encoding="utf-8") as out:
        if shape == "minimal":
            line = minimal_template()
            for start in range(0, calls, _CHUNK):
                numbers = range(start, min(calls, start + _CHUNK))
                out.write(
                    "".join(
                        line % (f"{n:032x}", _moment(n, calls, days, interleaved)) for n in numbers
                    )
                )
                written += len(numbers)
            return written
        turn, record = demo_templates()
        chunk: list[str] = []
        for number in range(calls):
            at = _moment(number, calls, days, interleaved)
            request = f"req-{number // 4:x}"
            chunk.append(turn[number % 4] % (f"{number:032x}", request, at))
            if number % 4 == 3:
                chunk.append(record % (request, at))
            if len(chunk) >= _CHUNK:
                out.write("".join(chunk))
                written += len(chunk)
                chunk.clear()
        out.write("".join(chunk))
        return written + len(chunk)


@dataclass(frozen=True)
class Run:
    """A child process's wall time, peak RSS and standard output."""

    seconds: float
    peak_mb: float
    out: str
    failed: str | None


PEAK = """
import runpy, sys
peak, how, what, *arguments = sys.argv[1:]
sys.argv = [what, *arguments]
try:
    if how == "-m":
        runpy.run_module(what, run_name="__main__", alter_sys=True)
    else:
        exec(compile(what, "<bench>", "exec"), {"__name__": "__main__"})
finally:
    with open("/proc/self/status") as status, open(peak, "w") as out:
        out.write(status.read().split("VmHWM:")[1].split()[0])
"""
"""Runs a module (``-m``) or code (``-c``) and writes the process's peak RSS (KiB) to a file.

The kernel's high-water mark of the process's own memory (``VmHWM``), not ``ru_maxrss``: a
child's ``ru_maxrss`` starts from the RSS of the process that forked it (the generator here,
some 250 MB), so it would report that, not the export's own peak."""


def measured(how: str, what: str, *arguments: str) -> Run:
    """Run ``python -m what`` or ``python -c what`` with ``arguments`` as a child: its wall
    time, its own peak RSS, its output and, when it failed, the last line it said."""
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        argv = [sys.executable, "-c", PEAK, peak.name, how, what, *arguments]
        started = time.perf_counter()
        status = subprocess.run(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL).returncode
        elapsed = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        said = err.read().strip().splitlines() or ["?"]
        failed = None if status == 0 else f"exit {status}: {said[-1][:160]}"
        return Run(elapsed, int(peak.read() or 0) / 1024, out.read(), failed)


BARE_COPY = """
import sys, duckdb
log, target = sys.argv[1:]
duckdb.sql(
    f"COPY (SELECT * FROM read_json('{log}', format='newline_delimited')) "
    f"TO '{target}' (FORMAT PARQUET)"
)
"""
"""DuckDB's own copy of a log to one Parquet file: no classes, casts or partitions."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000, help="calls in the log")
    parser.add_argument("--shape", choices=("demo", "minimal"), default="minimal")
    parser.add_argument("--days", type=int, nargs="+", default=[1], help="UTC days in the log")
    parser.add_argument(
        "--interleaved", action="store_true", help="the days take turns line by line"
    )
    parser.add_argument("--no-baselines", action="store_true", help="export only")
    options = parser.parse_args()
    print(f"spanledger export of {options.lines:,} {options.shape} calls, same-run baselines")
    met = True
    for days in options.days:
        with tempfile.TemporaryDirectory(prefix="bench-export-") as folder:
            log = Path(folder) / "log.jsonl"
            started = time.perf_counter()
            lines = generate(log, options.lines, options.shape, days, options.interleaved)
            size = log.stat().st_size / 2**20
            print(
                f"\n{days} day{'s' if days != 1 else ''}: {lines:,} lines, {size:,.0f} MB "
                f"(generated in {time.perf_counter() - started:.0f}s)"
            )
            runs: dict[str, Run] = {}
            if not options.no_baselines:
                runs["bare COPY"] = measured("-c", BARE_COPY, str(log), f"{folder}/bare.parquet")
                (Path(folder) / "bare.parquet").unlink(missing_ok=True)
                runs["report"] = measured("-m", "spanledger.cli", "report", str(log), "--json")
            target = Path(folder) / "export"
            runs["export"] = measured(
                "-m", "spanledger.cli", "export", str(log), "--parquet", str(target)
            )
            export = runs["export"]
            if export.failed is None:
                counted = _counted(target)
                want = options.lines, lines - options.lines
                export_ok = counted == want
                if not export_ok:
                    print(f"  row counts {counted}, expected {want}")
            else:
                export_ok = False
            shutil.rmtree(target, ignore_errors=True)
            for name, run in runs.items():
                ratio = (
                    ""
                    if name == "export" or run.failed
                    else (f"  export/{name} {export.seconds / run.seconds:.2f}x time")
                )
                state = f"  FAILED: {run.failed}" if run.failed else ""
                print(f"  {name:<10} {run.seconds:7.1f}s {run.peak_mb:7.0f} MB peak{ratio}{state}")
            within = export_ok and export.peak_mb <= TARGET_MB
            print(f"  target (export peak <= {TARGET_MB} MB): {'met' if within else 'MISSED'}")
            met = met and within
    return 0 if met else 1


def _counted(target: Path) -> tuple[int, int]:
    """The rows of each table of an export."""
    connection = duckdb.connect()
    try:
        found = [
            connection.execute(
                f"SELECT count(*) FROM read_parquet('{target / table}/**/*.parquet')"
            ).fetchall()[0][0]
            for table in ("events", "attribution")
        ]
    finally:
        connection.close()
    return int(found[0]), int(found[1])


if __name__ == "__main__":
    raise SystemExit(main())
