"""What rotation costs per event: ``JsonlSink`` on a file that never rotates, against a directory
sink (its size and age checked on every line) and one rotating every ~4 MB. Rounds are
interleaved and the medians of the round-by-round ratios printed. Target: <= 1.05 x.

    python benchmarks/bench_rotation.py [rounds] [events]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.exporters.jsonl import JsonlSink


def event(number: int) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"{number:032x}",
        request_id="req-1",
        provider="openai",
        model="text-embedding-3-small",
        started_at=datetime(2026, 11, 1, tzinfo=UTC),
        latency_ms=3.5,
        input_count=8,
        usage=EmbeddingUsage(input_tokens=100 + number % 500),
        dimensions=1536,
    )


def timed(sink: JsonlSink, events: list[EmbeddingEvent]) -> float:
    started = time.perf_counter()
    for one in events:
        sink.emit(one)
    return time.perf_counter() - started


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    events = [event(n) for n in range(count)]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        sinks: dict[str, Callable[[], JsonlSink]] = {
            "file, no rotation": lambda: JsonlSink(root / "plain" / "events.jsonl"),
            "directory, defaults": lambda: JsonlSink(root / "dir" / ""),
            "file, rotating at 4 MB": lambda: JsonlSink(
                root / "small" / "events.jsonl", max_bytes=4 * 2**20
            ),
        }
        made = {name: make() for name, make in sinks.items()}
        samples: dict[str, list[float]] = {name: [] for name in made}
        for _ in range(rounds):
            for name, sink in made.items():
                samples[name].append(timed(sink, events))
        for sink in made.values():
            sink.shutdown()
        rotated = len(list((root / "small").iterdir()))
    base = samples["file, no rotation"]
    print(f"JsonlSink.emit, {count} events a round, {rounds} rounds, same run")
    for name, times in samples.items():
        ratio = statistics.median(t / b for t, b in zip(times, base, strict=True))
        print(
            f"{name:24s} {statistics.median(times) / count * 1e6:6.2f} us/event  "
            f"{ratio:5.3f}x (target <= 1.05x)"
        )
    print(f"(the 4 MB sink wrote {rotated} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
