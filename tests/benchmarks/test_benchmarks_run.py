"""Every benchmark still runs, once, on a small size.

The figures of so small a run mean nothing and are not read: this only keeps the scripts
working as the library changes under them (an import that moved, a renamed helper, an argument
that changed). A benchmark exits 0, or 1 when it printed that a target was missed, which at
these sizes is noise; it never ends in a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

SMALL_RUNS: dict[str, tuple[str, ...]] = {
    "bench_attribution.py": ("1000",),
    "bench_bedrock.py": ("2", "5"),
    "bench_capture.py": ("3", "5"),
    "bench_capture_sdks.py": ("2", "3"),
    "bench_chain.py": ("3", "10"),
    "bench_cli_startup.py": ("3",),
    "bench_cloud_sdks.py": ("3", "5"),
    "bench_export.py": ("--lines", "2000"),
    "bench_haystack_tracer.py": (),
    "bench_http_switch.py": ("3", "10"),
    "bench_instrument.py": ("3", "10"),
    "bench_langchain_handler.py": (),
    "bench_ledger.py": ("2000",),
    "bench_llama_index_handlers.py": (),
    "bench_local_models.py": ("1", "3"),
    "bench_matching.py": ("20",),
    "bench_overhead.py": ("3",),
    "bench_parse.py": ("1",),
    "bench_peers.py": ("1", "3"),
    "bench_process_wide.py": ("3", "10"),
    "bench_report.py": ("2000",),
    "bench_report_html.py": ("2000",),
    "bench_request_span.py": ("10", "3"),
    "bench_rotation.py": ("3", "500"),
    "soak.py": ("6000", "500"),
}
"""Each benchmark script and the arguments of its small run."""

NOT_BENCHMARKS = {"framework_texts.py", "peer_calls.py"}
"""Modules of the benchmarks folder that other scripts import and that run nothing."""


def test_every_benchmark_has_a_small_run() -> None:
    scripts = {path.name for path in BENCHMARKS.glob("*.py")} - NOT_BENCHMARKS
    assert scripts == set(SMALL_RUNS)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("script", "arguments"), sorted(SMALL_RUNS.items()))
def test_the_benchmark_runs_to_its_end(
    script: str, arguments: tuple[str, ...], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *arguments],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=tmp_path,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert done.stdout.strip(), "the benchmark printed nothing"
    if done.returncode == 1:
        assert "MISS" in done.stdout.upper() or "OVER" in done.stdout, done.stdout[-2000:]
