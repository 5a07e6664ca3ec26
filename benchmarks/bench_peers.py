"""spanledger against the cheapest peer recording the same SDK call, each in a fresh interpreter.

Calls: Voyage embed and rerank, OpenAI embeddings, Cohere embed and rerank, each with one short
input and with 32 inputs of 400 characters (``peer_calls.py``). Peers: OpenLLMetry
(``opentelemetry-instrumentation-voyageai``, ``-openai``, ``-cohere``) and OpenInference
(``openinference-instrumentation-openai``, ``-cohere``). They are in no extra of ours; a peer
that is not installed, or that records no span of a call (OpenLLMetry's cohere instrumentor on
cohere 7.x), is skipped with the reason printed::

    python benchmarks/bench_peers.py [rounds] [calls] [--passes N] [--clock cpu|wall]
                                     [--baseline SRC] [--only WORDS]

Each library runs in a child interpreter of its own, so that no library's patches or caches
reach another's figures. A child builds the same OTel SDK pipeline (a batch span processor into
memory, an in-memory metric reader), times the bare call and the call with its library on,
interleaved batch by batch, and reports every batch; the parent prints the medians of the
round-by-round differences (with ``--passes N`` every child runs N times, in turn with the
others, and the rounds are pooled). Time is the process's CPU time by default, every thread of
it (the span export thread's too), so other processes on a shared machine do not inflate it;
``--clock wall`` times elapsed time instead. Every batch ends, inside its timing, by flushing
the spans and collecting the metrics, so what a library records at collection is charged to its
calls. A peer is switched by swapping the methods its ``instrument()`` replaced
(``PeerSwitch``), never by ``uninstrument()``; spanledger instruments a client of its own beside
the bare one. The spanledger child also times its calls with the OTel metrics off
(``enable_metrics=False``: the same spans, no histograms or counters), the like-for-like figure
against a peer that records a span and no metric, and the hand span: the bare call inside a
current span with twelve attributes set by hand, the floor of what a span costs here.
``--baseline SRC`` runs spanledger once more from another source tree (a copy of ``src`` before
a change), for before and after in one run. ``--only voyage,openai embeddings`` times only the
calls whose SDK is one of the comma-separated words or whose name starts with one (here every
Voyage call and the sync OpenAI ones), and runs only the peers that trace one of them.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OURS = "spanledger"
BASELINE = "spanledger before"
Samples = dict[str, dict[str, list[float]]]
"""Seconds per call of each case's variants, one figure per round."""


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
"""``cpu``: the process's CPU time, all its threads (the span export thread's too), which other
processes on a shared machine do not inflate; ``wall``: elapsed time."""
clock = CLOCKS["cpu"]


def timed(
    call: Callable[[], object],
    calls: int,
    finish: Callable[[], object],
    scope: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> float:
    """Seconds per call, ``finish`` (span flush and metric collection) inside the timing.
    Each batch starts from a collected heap, so the collections inside it are its own."""
    gc.collect()
    with scope():
        start = clock()
        for _ in range(calls):
            call()
        finish()
        elapsed = clock() - start
    return elapsed / calls


def chosen(case_sdk: str, case_name: str, only: list[str]) -> bool:
    """Whether ``--only`` keeps the call (every call when it names nothing)."""
    return not only or any(case_sdk == word or case_name.startswith(word) for word in only)


def child(library: str, rounds: int, calls: int, only: list[str] | None = None) -> dict[str, Any]:
    """Time every call this library records (those ``only`` keeps), bare and with the library
    on, interleaved."""
    import bench_instrument as bench
    import peer_calls

    words = only or []
    cases = [case for case in peer_calls.cases() if chosen(case.sdk, case.name, words)]
    peer_calls.answer_voyage_in_process()
    rig = bench.otel_rig()
    tracer_provider, meter_provider = rig.recorder.sinks[0]._providers  # type: ignore[union-attr]

    def finish() -> None:
        rig.flush_spans()
        rig.collect_metrics()

    def spans_made(call: Callable[[], object]) -> int:
        finish()
        rig.spans.clear()
        call()
        finish()
        made = len(rig.spans.get_finished_spans())
        rig.spans.clear()
        return made

    variants: dict[str, dict[str, Callable[[], float]]] = {}
    skipped: dict[str, str] = {}
    if library in (OURS, BASELINE):
        import spanledger
        from spanledger.exporters.otel import OtelExporter

        spans_only = spanledger.Recorder(
            [
                OtelExporter(
                    tracer_provider=tracer_provider,
                    meter_provider=meter_provider,
                    enable_metrics=False,
                )
            ]
        )

        def ours_on() -> AbstractContextManager[Any]:
            return spanledger.use(rig.recorder)

        def spans_only_on() -> AbstractContextManager[Any]:
            return spanledger.use(spans_only)

        for case in cases:
            bare = case.call(case.make(), case.texts)
            ours = case.call(spanledger.instrument(case.make()), case.texts)
            with ours_on():
                made = spans_made(ours)
            if made != 1:
                skipped[case.name] = f"made {made} spans of one call"
                continue
            hand = rig.current_around(bare)
            variants[case.name] = {
                "bare": partial(timed, bare, calls, finish),
                "on": partial(timed, ours, calls, finish, ours_on),
            }
            if library == OURS:
                variants[case.name]["hand"] = partial(timed, hand, calls, finish)
                variants[case.name]["spans"] = partial(timed, ours, calls, finish, spans_only_on)
    else:
        specs = peer_calls.PEERS[library]
        made_calls = {case.name: case.call(case.make(), case.texts) for case in cases}
        for call in made_calls.values():
            call()  # the SDK's lazily imported modules, before the switch notes its methods
        switch = peer_calls.PeerSwitch()
        switched: set[str] = set()
        for sdk, spec in specs.items():
            try:
                peer_calls.instrumentor(spec).instrument(
                    tracer_provider=tracer_provider, meter_provider=meter_provider
                )
            except ImportError as exc:
                skipped[sdk] = f"{spec.split(':')[0]} is not installed ({exc.name})"
                continue
            switched.add(sdk)
        switch.after()
        for case in cases:
            if case.sdk not in specs:
                continue
            if case.sdk not in switched:
                skipped[case.name] = skipped[case.sdk]
                continue
            call = made_calls[case.name]
            switch.off()
            made_off = spans_made(call)
            switch.on()
            made_on = spans_made(call)
            switch.off()
            if made_on < 1 or made_off:
                skipped[case.name] = f"made {made_on} span(s) switched on, {made_off} off"
                continue

            def peer_batch(call: Callable[[], object] = call) -> float:
                switch.on()
                try:
                    return timed(call, calls, finish)
                finally:
                    switch.off()

            variants[case.name] = {
                "bare": partial(timed, call, calls, finish),
                "on": peer_batch,
            }
    samples: Samples = {name: {variant: [] for variant in runs} for name, runs in variants.items()}
    for round_number in range(rounds + 1):  # round 0 warms up
        for name, runs in variants.items():
            for variant, run in runs.items():
                seconds = run()
                if round_number:
                    samples[name][variant].append(seconds)
            rig.spans.clear()
    return {"samples": samples, "skipped": skipped}


def run_child(
    library: str,
    rounds: int,
    calls: int,
    clock_name: str,
    source: str | None = None,
    only: str = "",
) -> dict[str, Any]:
    """One library's figures from a fresh interpreter (``source``: a spanledger tree to import
    instead of the installed one; ``only``: the ``--only`` words)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    script = str(Path(__file__).resolve())
    done = subprocess.run(
        [sys.executable, script, "--child", library, str(rounds), str(calls), clock_name, only],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"samples": {}, "skipped": {"*": f"the child failed: {tail[0]}"}}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def added(samples: dict[str, list[float]], variant: str = "on") -> float:
    """Median of the round-by-round differences against the bare call, in seconds."""
    return statistics.median(a - b for a, b in zip(samples[variant], samples["bare"], strict=True))


def only_words(text: str) -> list[str]:
    """The comma-separated words of ``--only`` (none: every call)."""
    return [word.strip() for word in text.split(",") if word.strip()]


def main(arguments: list[str]) -> int:
    global clock
    if arguments[:1] == ["--child"]:
        library, rounds, calls = arguments[1], int(arguments[2]), int(arguments[3])
        clock = CLOCKS[arguments[4]]
        only = only_words(arguments[5]) if len(arguments) > 5 else []
        print(json.dumps(child(library, rounds, calls, only)))
        return 0
    options = {"--baseline": "", "--passes": "1", "--clock": "cpu", "--only": ""}
    for option in options:
        if option in arguments:
            at = arguments.index(option)
            options[option] = arguments[at + 1]
            del arguments[at : at + 2]
    rounds = int(arguments[0]) if arguments else 5
    calls = int(arguments[1]) if len(arguments) > 1 else 50
    passes, clock_name = int(options["--passes"]), options["--clock"]
    import peer_calls

    words = only_words(options["--only"])
    kept = [case for case in peer_calls.cases() if chosen(case.sdk, case.name, words)]
    if not kept:
        print(f"--only {options['--only']!r} keeps no call")
        return 2
    sdks = {case.sdk for case in kept}
    libraries = [OURS, *(peer for peer, specs in peer_calls.PEERS.items() if sdks & set(specs))]
    sources: dict[str, str | None] = dict.fromkeys(libraries)
    if options["--baseline"]:
        libraries.insert(1, BASELINE)
        sources[BASELINE] = options["--baseline"]
    results: dict[str, dict[str, Any]] = {}
    for _ in range(passes):  # the children in turn, pass after pass: drift is shared
        for library in libraries:
            got = run_child(library, rounds, calls, clock_name, sources[library], options["--only"])
            pooled = results.setdefault(library, {"samples": {}, "skipped": {}})
            pooled["skipped"].update(got["skipped"])
            for name, variants in got["samples"].items():
                for variant, seconds in variants.items():
                    pooled["samples"].setdefault(name, {}).setdefault(variant, []).extend(seconds)
    for library in libraries:
        for what, reason in results[library]["skipped"].items():
            print(f"{library}: {what}: skipped, {reason}")
    report(results, libraries, f"{passes} x {rounds} x {calls} calls, {clock_name} time")
    return 0


def report(results: dict[str, dict[str, Any]], libraries: list[str], how: str) -> None:
    """One line per call: the bare call, what each library adds, and spanledger's ratio to the
    cheapest peer (and the hand span's)."""
    peers = [library for library in libraries if library not in (OURS, BASELINE)]
    ours: Samples = results[OURS]["samples"]
    print()
    print(f"added per call with OTel export on, same pipeline, medians of {how}")
    header = f"{'call':40s} {'bare':>8s} {OURS:>11s}"
    if BASELINE in libraries:
        header += f" {'before':>9s}"
    header += "".join(f" {peer:>13s}" for peer in peers)
    header += f" {'cheapest':>13s} {'ratio':>6s} {'spans only':>11s} {'/peer':>6s}"
    header += f" {'hand span':>10s} {'/peer':>6s}"
    print(header)
    for name, got in ours.items():
        line = (
            f"{name:40s} {statistics.median(got['bare']) * 1e6:6.1f}us {added(got) * 1e6:+9.1f}us"
        )
        if BASELINE in libraries:
            before = results[BASELINE]["samples"].get(name)
            line += f" {added(before) * 1e6:+7.1f}us" if before else f" {'-':>9s}"
        costs: dict[str, float] = {}
        for peer in peers:
            theirs = results[peer]["samples"].get(name)
            if theirs:
                costs[peer] = added(theirs)
                line += f" {costs[peer] * 1e6:+11.1f}us"
            else:
                line += f" {'-':>13s}"
        hand, spans = added(got, "hand"), added(got, "spans")
        if costs:
            cheapest = min(costs, key=costs.__getitem__)
            floor = costs[cheapest]
            line += f" {cheapest:>13s} {added(got) / floor:6.2f}"
            line += f" {spans * 1e6:+9.1f}us {spans / floor:6.2f}"
            line += f" {hand * 1e6:+8.1f}us {hand / floor:6.2f}"
        else:
            line += f" {'no peer':>13s} {'-':>6s} {spans * 1e6:+9.1f}us {'-':>6s}"
            line += f" {hand * 1e6:+8.1f}us {'-':>6s}"
        print(line)
    print()
    print(
        "ratio: spanledger's added time over the cheapest peer's; spans only: spanledger with"
        " its OTel metrics off (enable_metrics=False), every span attribute kept, and its ratio;"
        " hand span: the bare call in a current span with twelve attributes set by hand, and"
        " its ratio to the cheapest peer"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main(sys.argv[1:]))
