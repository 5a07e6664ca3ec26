"""A backend that refuses connections, or accepts them and never answers, costs the calls
nothing, loses nothing uncounted, and holds neither shutdown nor exit for long.

Both pipelines spanledger builds are exercised together, as ``configure()`` builds them: OTLP
spans and metrics, and a Langfuse client, all pointed at the dead backend. The issue measured
5,200 spans; so do these tests (a few hundred real provider calls over loopback, timed, and the
rest as recorded events).
"""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

import pytest

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage, Recorder
from spanledger.events import Event
from spanledger.exporters.delivery import DeliveryStats
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.exporters.conftest import Providers, SilentServer, closed_port, unique_public_key

TIMED_CALLS = 300
SPANS = 5_200
SHUTDOWN_LIMIT = 5.0 + 1.0
"""The default shutdown timeout, and a second of slack for a loaded machine."""
EXIT_LIMIT = 6.5
"""Seconds from a process's last call to its exit, without a shutdown: the 5-second default
bound, interpreter teardown, and slack."""
CALL_PATH_SLACK = 0.002
"""Seconds the median call may exceed the no-exporter median by (what rendering a span and an
observation costs on a loaded machine; a call that waited for the backend would take 1-10 s)."""
SLOWEST_CALL = 0.25


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def providers(standin: StandIn) -> Iterator[Providers]:
    built = Providers(standin)
    yield built
    built.close()


def refused() -> AbstractContextManager[str]:
    return nullcontext(f"http://127.0.0.1:{closed_port()}")


class Silent:
    """A backend that accepts connections and never answers, as a context of its URL."""

    def __init__(self) -> None:
        self.server = SilentServer()

    def __enter__(self) -> str:
        return self.server.__enter__().url

    def __exit__(self, *exc_info: object) -> None:
        self.server.__exit__(None, None, None)


BACKENDS: dict[str, Callable[[], AbstractContextManager[str]]] = {
    "refused": refused,
    "silent": Silent,
}


def environ(url: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "LANGFUSE_PUBLIC_KEY": unique_public_key(),
        "LANGFUSE_SECRET_KEY": "sk-lf-test",
        "LANGFUSE_HOST": url,
    }


def timed_calls(providers: Providers, recorder: Recorder) -> list[float]:
    """Each call's duration. What the suite imported before (every SDK and framework) is
    frozen out of the collector first: a full collection of that heap can pause one call for
    a second, and it is the test process's cost, not the exporters'."""
    embedder = providers.embedder("cohere", "embed-v4.0", recorder)
    durations = []
    gc.collect()
    gc.freeze()
    try:
        for number in range(TIMED_CALLS):
            started = time.perf_counter()
            embedder.embed([f"text {number}"])
            durations.append(time.perf_counter() - started)
    finally:
        gc.unfreeze()
    return durations


def event(number: int) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"call-{number}",
        provider="cohere",
        model="embed-v4.0",
        started_at=datetime.now(UTC),
        latency_ms=3.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=2),
    )


def sinks(recorder: Recorder) -> tuple[OtelExporter, LangfuseExporter]:
    (otel,) = [sink for sink in recorder.sinks if isinstance(sink, OtelExporter)]
    (langfuse,) = [sink for sink in recorder.sinks if isinstance(sink, LangfuseExporter)]
    return otel, langfuse


def assert_all_lost_and_counted(stats: DeliveryStats | None, produced: int | None) -> None:
    assert stats is not None
    assert stats.balanced, stats
    assert stats.pending == 0, stats
    assert stats.exported == 0, stats
    if produced is not None:
        assert stats.produced == produced, stats
    print(f"  {stats}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_dead_backend_costs_the_call_nothing_and_every_loss_is_counted(
    backend: str, providers: Providers, caplog: pytest.LogCaptureFixture
) -> None:
    kept: list[Event] = []
    baseline_recorder = Recorder([kept.append])
    timed_calls(providers, baseline_recorder)  # warm the connection and the code
    baseline = timed_calls(providers, baseline_recorder)

    with BACKENDS[backend]() as url:
        recorder = spanledger.configure(environ=environ(url), install=False)
        otel, langfuse = sinks(recorder)
        with_exporters = timed_calls(providers, recorder)
        for number in range(SPANS - TIMED_CALLS):
            recorder.emit(event(number))
        started = time.perf_counter()
        recorder.shutdown()
        shutdown_seconds = time.perf_counter() - started

    print(
        f"\n{backend}: median call {statistics.median(baseline) * 1e6:.0f} us without exporters,"
        f" {statistics.median(with_exporters) * 1e6:.0f} us with; shutdown {shutdown_seconds:.2f} s"
    )
    assert statistics.median(with_exporters) < statistics.median(baseline) + CALL_PATH_SLACK
    assert max(with_exporters) < SLOWEST_CALL
    assert shutdown_seconds < SHUTDOWN_LIMIT
    assert_all_lost_and_counted(otel.delivery, SPANS)
    assert_all_lost_and_counted(otel.metric_delivery, None)
    assert_all_lost_and_counted(langfuse.delivery, SPANS)
    assert [s.failed for s in recorder.stats.values()] == [0, 0]  # no sink raised
    sdk_records = [
        r for r in caplog.records if r.name.split(".")[0] in ("opentelemetry", "langfuse")
    ]
    assert sdk_records == [], [r.getMessage() for r in sdk_records]


EXITING = textwrap.dedent(
    """
    import atexit
    import sys
    from datetime import UTC, datetime

    sinks = []

    def report():  # registered first, so it runs after spanledger's own exit handler
        with open(sys.argv[3], "w") as out:
            for sink in sinks:
                stats = sink.delivery
                out.write(f"delivery {stats.balanced} {stats.pending} {stats.produced}\\n")

    atexit.register(report)

    import spanledger
    from spanledger import EmbeddingEvent

    url, public_key = sys.argv[1], sys.argv[2]
    recorder = spanledger.configure(
        environ={
            "OTEL_EXPORTER_OTLP_ENDPOINT": url,
            "LANGFUSE_PUBLIC_KEY": public_key,
            "LANGFUSE_SECRET_KEY": "sk-lf-test",
            "LANGFUSE_HOST": url,
        },
        install=False,
    )
    sinks.extend(recorder.sinks)
    for number in range(1000):
        recorder.emit(
            EmbeddingEvent(
                call_id=f"call-{number}", provider="cohere", model="embed-v4.0",
                started_at=datetime.now(UTC), latency_ms=1.0, input_count=1,
            )
        )
    langfuse = sinks[1].client  # its score thread fails against the dead host too
    langfuse.create_score(name="share", value=0.5, trace_id="ab" * 16, data_type="NUMERIC")
    print("recorded", flush=True)
    """
)


class Exiting:
    """A process running ``EXITING`` against ``url``, and when it recorded and when it exited
    (watched on a thread of its own, so two processes are timed side by side)."""

    def __init__(self, url: str, report: Path) -> None:
        self.report = report
        self.process = subprocess.Popen(
            [sys.executable, "-c", EXITING, url, unique_public_key(), str(report)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.seconds = float("inf")
        self.stdout = self.stderr = ""
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "recorded":
                break
        recorded = time.perf_counter()
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            return
        self.seconds = time.perf_counter() - recorded

    def wait(self) -> None:
        self._watcher.join(60)


def test_a_process_that_exits_without_shutdown_is_not_held_by_a_dead_backend(
    tmp_path: Path,
) -> None:
    with refused() as dead, Silent() as silent:
        exiting = {
            "refused": Exiting(dead, tmp_path / "refused.txt"),
            "silent": Exiting(silent, tmp_path / "silent.txt"),
        }
        for process in exiting.values():
            process.wait()

    for name, process in exiting.items():
        print(f"\n{name}: exit {process.seconds:.2f} s after the last call")
        assert process.process.returncode == 0, process.stderr
        assert process.seconds < EXIT_LIMIT, (name, process.seconds)
        # spanledger's own log lines only (stdlib logging's last resort, on standard error):
        # no traceback, and nothing on standard output
        complaints = process.stderr.splitlines()
        assert all(line.startswith(("export_sdk_message ", "export_lost ")) for line in complaints)
        assert process.stdout == "", (name, process.stdout)
        if name == "refused":  # the SDKs did complain, through spanledger's logging
            assert any("source='langfuse'" in line for line in complaints)  # its score thread
        reports = process.report.read_text().splitlines()
        assert reports == ["delivery True 0 1000"] * 2, reports  # spans and Langfuse, at exit
