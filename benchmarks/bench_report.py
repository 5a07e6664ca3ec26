"""``spanledger report`` over a generated fleet-sized log, against DuckDB's bare group-by.

Generates a log of N events (default 1,000,000; a quarter of its requests also carry an
attribution record), then, in the same run:

- the baseline: DuckDB's ``read_json`` with a group-by over provider and model, summing tokens;
- ``spanledger report <log> --prices <table>``, run as the CLI in a child process, its wall
  time and peak RSS.

With a second size (``python benchmarks/bench_report.py 1000000 4000000``) it also prints the
time per event and the peak RSS of each size, to show time linear and memory flat.

Targets: report <= 3 x the bare group-by; peak RSS <= 300 MB and flat from 1 M to 4 M events.

    python benchmarks/bench_report.py [events ...]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
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


def generate(path: Path, events: int) -> None:
    *calls, attribution = templates()
    step = timedelta(days=30) / events
    with path.open("w", encoding="utf-8") as out:
        chunk: list[str] = []
        for number in range(events):
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


def report(path: Path) -> tuple[float, float, dict[str, object]]:
    """The CLI's wall time, the child's peak RSS in MB, and its JSON."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spanledger.cli",
            "report",
            str(path),
            "--prices",
            str(PRICES),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024, json.loads(done.stdout)


def main() -> int:
    sizes = [int(arg) for arg in sys.argv[1:]] or [1_000_000]
    print("spanledger report against DuckDB's bare group-by over the same file, same run")
    print(
        f"{'events':>10} {'MB':>7} {'bare':>7} {'report':>7} {'ratio':>6} {'us/event':>9} "
        f"{'peak RSS':>9}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            path = Path(folder) / f"log-{size}.jsonl"
            generate(path, size)
            bare = min(bare_group_by(path) for _ in range(2))
            runs = [report(path) for _ in range(2)]
            wall = min(run[0] for run in runs)
            rss = max(run[1] for run in runs)
            data = runs[0][2]
            assert data["events"] == size, data["events"]
            print(
                f"{size:>10} {path.stat().st_size / 2**20:>7.0f} {bare:>6.2f}s {wall:>6.2f}s "
                f"{wall / bare:>5.2f}x {wall / size * 1e6:>8.2f} {rss:>7.0f}MB"
                "  (targets: <= 3x, <= 300 MB)"
            )
            os.unlink(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
