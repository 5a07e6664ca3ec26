"""An attribution report over 100,000 served frames and uses, against a floor in the same run.

The floor is one pass that sums the same token costs from a prepared dict. The report joins
uses to the usage report by identity, merges duplicate uses, and computes cited tokens,
uncited rendered tokens, the cited token share and reconcilability. Target: at most 3x.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from spanledger.attribution import (
    AttributionReport,
    ContextUse,
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
)


def build(count: int) -> tuple[list[ServedFrame], list[ContextUse], UsageReport]:
    served = [
        ServedFrame(FrameId("search", f"doc-{i}", f"sha256:{i:064x}"), 50 + i % 400)
        for i in range(count)
    ]
    uses = [
        ContextUse(frame.frame, selected=True, rendered=i % 3 != 0, cited=i % 3 == 1)
        for i, frame in enumerate(served)
    ]
    usage = UsageReport.of(
        [ProviderUsage.of("search", served)], as_of=datetime(2026, 11, 30, tzinfo=UTC)
    )
    return served, uses, usage


def median_time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    served, uses, usage = build(count)
    costs = {frame.frame: frame.token_cost for frame in served}

    def floor() -> tuple[int, int]:
        cited = rendered = 0
        for use in uses:
            if use.rendered:
                cost = costs[use.frame]
                rendered += cost
                if use.cited:
                    cited += cost
        return cited, rendered

    def report() -> tuple[float | None, int, bool]:
        built = AttributionReport.of(uses, usage)
        return built.cited_token_share(), built.uncited_rendered_tokens(), built.is_reconcilable()

    cited, rendered = floor()
    share, uncited, reconcilable = report()
    assert share == cited / rendered
    assert uncited == rendered - cited
    assert reconcilable
    floor_s = median_time(floor, 7)
    report_s = median_time(report, 7)
    ratio = report_s / floor_s
    print(f"{count:,} served frames and uses")
    print(f"floor (one pass over a prepared cost dict)  {floor_s * 1e3:8.1f} ms")
    print(f"AttributionReport (share, uncited, reconcilable)  {report_s * 1e3:8.1f} ms")
    print(f"ratio {ratio:.2f}x floor (target <= 3x); cited token share {share:.4f}")
    print("target met" if ratio <= 3 else "TARGET MISSED")
    return 0 if ratio <= 3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
