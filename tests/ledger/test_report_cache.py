"""The report's columnar cache: a report served from it says exactly what ``--no-cache`` says.

Unchanged files are read from the cache, appended lines are read and counted, a truncated,
replaced or rewritten file is read afresh, a rotated (renamed) file keeps its entry, and a
cache entry that is corrupt, foreign or cannot be written is never trusted and never stops
the report.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanledger.eventlog import TRUNCATED, event_line
from spanledger.events import AttributionRecord
from spanledger.fleet import report_cache
from spanledger.fleet.lines import Span, read_spans
from spanledger.reporting import run_report
from tests.ledger.conftest import REPO_ROOT, embedding_event, rerank_event
from tests.ledger.test_one_reader import SENTINEL, _line

DAY = datetime(2026, 11, 3, tzinfo=UTC)


pytestmark = pytest.mark.usefixtures("cache_dir")


def lines(first: int, count: int) -> bytes:
    """``count`` calls numbered from ``first`` (each its own call id, a rerank every third),
    an attribution record every fourth."""
    out = []
    for number in range(first, first + count):
        at = DAY + timedelta(minutes=number)
        if number % 3 == 0:
            event: Any = rerank_event(call_id=f"call-{number}", started_at=at)
        else:
            event = embedding_event(call_id=f"call-{number}", started_at=at, tokens=number)
        out.append(event_line(event))
        if number % 4 == 0:
            out.append(event_line(_record(f"req-{number}", at)))
    return b"".join(out)


def _record(request: str, at: datetime) -> AttributionRecord:
    return AttributionRecord(
        request_id=request,
        at=at,
        frames_served=2,
        frames_rendered=2,
        frames_cited=1,
        rendered_tokens=10,
        cited_tokens=5,
        uncited_rendered_tokens=5,
        cited_token_share=0.5,
        reconcilable=True,
        calls=1,
        billed_input_tokens=7,
        billed_search_units=0,
        calls_without_usage=0,
        spend="0.001",
        currency="USD",
        spend_complete=True,
    )


def report(*paths: Path, cache: bool = True, by: tuple[str, ...] = ("provider", "model")) -> Any:
    """The ``--json`` report over ``paths``; the cache is not warned about."""
    data, err = report_and_warnings(*paths, cache=cache, by=by)
    assert "cache" not in err, err
    return data


def report_and_warnings(
    *paths: Path, cache: bool = True, by: tuple[str, ...] = ("provider", "model")
) -> tuple[Any, str]:
    out, err = io.StringIO(), io.StringIO()
    run_report(
        [str(path) for path in paths],
        None,
        as_json=True,
        by=by,  # type: ignore[arg-type]
        cache=cache,
        out=out,
        err=err,
    )
    return json.loads(out.getvalue()), err.getvalue()


def same_both_ways(*paths: Path) -> Any:
    """The cached report, checked equal to one read afresh; the cached one."""
    cached = report(*paths)
    assert cached == report(*paths, cache=False)
    return cached


def entries(cache_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(path.read_bytes()) for path in sorted(cache_dir.glob("*.json"))]


def test_a_second_report_is_served_from_the_cache_with_the_same_figures(
    tmp_path: Path, cache_dir: Path
) -> None:
    log = tmp_path / "events.jsonl"
    other = tmp_path / "other.jsonl"
    log.write_bytes(lines(0, 30) + b"not json\n" + lines(10, 5))  # five repeated call ids
    other.write_bytes(lines(28, 4) + b'{"schema": 1}\n')  # repeats across files too
    fresh = report(log, other, cache=False)
    assert not cache_dir.exists()  # --no-cache writes nothing
    first = report(log, other)
    assert sorted(entry["covered"] for entry in entries(cache_dir)) == sorted(
        path.stat().st_size for path in (log, other)
    )
    second = report(log, other)
    assert first == second == fresh
    assert first["duplicate_calls_dropped"] == 7
    assert first["skipped_lines"] == {"not valid JSON": 1, "unknown record kind": 1}
    assert first["attribution"]["requests"] > 0
    assert report(log, other, by=("request",)) == report(log, other, by=("request",), cache=False)


def test_an_unchanged_file_is_not_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 20))
    first = report(log)
    judged: list[Span] = []

    def counting(spans: list[Span], *args: Any, **kwargs: Any) -> Any:
        judged.extend(spans)
        return read_spans(spans, *args, **kwargs)

    monkeypatch.setattr("spanledger.fleet.scan.read_spans", counting)
    assert report(log) == first
    assert judged == []
    with log.open("ab") as out:
        out.write(lines(20, 3))
    grown = report(log)
    assert [(span.start, span.end) for span in judged] == [(len(lines(0, 20)), log.stat().st_size)]
    assert grown["events"] == 23


def test_appended_lines_are_counted(tmp_path: Path, cache_dir: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 10))
    assert same_both_ways(log)["events"] == 10
    with log.open("ab") as out:
        out.write(lines(10, 5) + b"garbage\n" + lines(3, 1))  # a repeat of an earlier call
    grown = same_both_ways(log)
    assert grown["events"] == 15
    assert grown["duplicate_calls_dropped"] == 1
    assert grown["skipped_lines"] == {"not valid JSON": 1}
    [entry] = entries(cache_dir)
    assert len(entry["parts"]) == 2  # the appended bytes were read on their own
    assert entry["covered"] == log.stat().st_size


def test_a_line_still_being_written_is_read_whole_once_finished(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    whole = lines(0, 4)
    log.write_bytes(whole[:-20])
    assert same_both_ways(log)["skipped_lines"] == {TRUNCATED: 1}
    with log.open("ab") as out:  # the writer finishes its line, then writes one more
        out.write(whole[-20:] + lines(4, 1))
    finished = same_both_ways(log)
    assert (finished["events"], finished["skipped_lines"]) == (5, {})


def test_a_truncated_file_is_read_afresh(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 10))
    report(log)
    log.write_bytes(lines(0, 4))
    assert same_both_ways(log)["events"] == 4


def test_a_replaced_file_of_the_same_size_is_read_afresh(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 10))
    first = report(log)
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(lines(0, 10).replace(b"3-small", b"3-large"))
    os.replace(replacement, log)
    replaced = same_both_ways(log)
    assert replaced != first
    assert {row["model"] for row in replaced["rows"]} == {"rerank-v3.5", "text-embedding-3-large"}
    assert len(log.read_bytes()) > report_cache.TAIL_BYTES + 200
    with log.open("r+b") as out:  # rewritten in place, same size, before the digested tail
        out.write(lines(0, 1).replace(b"rerank-v3.5", b"rerank-v9.9"))
    os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns + 10**9))
    rewritten = same_both_ways(log)
    assert "rerank-v9.9" in {row["model"] for row in rewritten["rows"]}


def test_a_file_rewritten_in_place_and_longer_is_read_afresh(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 10))
    report(log)
    log.write_bytes((lines(0, 10) + lines(10, 2)).replace(b"3-small", b"3-large"))
    rewritten = same_both_ways(log)
    assert "text-embedding-3-small" not in {row["model"] for row in rewritten["rows"]}


def test_a_rotated_file_keeps_its_entry_and_is_not_counted_twice(
    tmp_path: Path, cache_dir: Path
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 10))
    report(tmp_path)
    [before] = entries(cache_dir)
    log.rename(tmp_path / "events.jsonl.1.jsonl")
    log.write_bytes(lines(10, 3))  # a new file at the old path
    rotated = same_both_ways(tmp_path)
    assert rotated["events"] == 13
    assert rotated["duplicate_calls_dropped"] == 0
    found = {entry["inode"]: entry for entry in entries(cache_dir)}
    assert found[before["inode"]]["parts"] == before["parts"]  # served, not read again
    assert found[before["inode"]]["path"].endswith("events.jsonl.1.jsonl")
    assert len(found) == 2


def test_entries_of_files_that_are_gone_are_pruned(tmp_path: Path, cache_dir: Path) -> None:
    gone, kept = tmp_path / "gone.jsonl", tmp_path / "kept.jsonl"
    gone.write_bytes(lines(0, 5))
    kept.write_bytes(lines(5, 5))
    report(gone, kept)
    assert len(entries(cache_dir)) == 2
    parts = {part["name"] for entry in entries(cache_dir) for part in entry["parts"]}
    gone.unlink()
    report(kept)
    [entry] = entries(cache_dir)
    assert entry["path"] == str(kept)
    left = {path.name for path in cache_dir.iterdir()}
    kept_entry = next(cache_dir.glob("*.json")).name
    assert left == {kept_entry, entry["parts"][0]["name"], "scans", "answers"}
    assert len(parts) == 2
    # the pair's scan and answer went with it
    assert len(list((cache_dir / "scans").iterdir())) == 1
    assert len(list((cache_dir / "answers").iterdir())) == 1


@pytest.mark.parametrize(
    "damage",
    [
        "garbage part",
        "cut part",
        "foreign part",
        "garbage manifest",
        "mistyped manifest",
        "other version",
        "other file",
    ],
)
def test_a_corrupt_or_foreign_cache_is_rebuilt(
    tmp_path: Path, cache_dir: Path, damage: str
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 12))
    expected = report(log, cache=False)
    report(log)
    shutil.rmtree(cache_dir / "scans")  # so that the report reads the parts
    [manifest] = cache_dir.glob("*.json")
    entry = json.loads(manifest.read_bytes())
    part = cache_dir / entry["parts"][0]["name"]
    if damage == "garbage part":
        part.write_bytes(b"PAR1" + os.urandom(200) + b"PAR1")
    elif damage == "cut part":
        part.write_bytes(part.read_bytes()[:-100])
    elif damage == "foreign part":  # well-formed Parquet, and a manifest that vouches for it
        import duckdb

        foreign = tmp_path / "foreign.parquet"
        duckdb.sql(f"COPY (SELECT 1 AS kind) TO '{foreign}' (FORMAT parquet)")
        part.write_bytes(foreign.read_bytes())
        entry["parts"][0]["digest"] = report_cache._digest_of(part)
        entry["parts"][0]["rows"] = 1
        manifest.write_text(json.dumps(entry))
    elif damage == "garbage manifest":
        manifest.write_bytes(b"\x00{not json")
    elif damage == "mistyped manifest":
        manifest.write_text(json.dumps({**entry, "problems": {"not valid JSON": "1"}}))
    elif damage == "other version":
        manifest.write_text(json.dumps({**entry, "format": report_cache.FORMAT + 1}))
    else:  # another file's entry under this file's key: same size, time and last bytes
        other = tmp_path / "other.jsonl"
        other.write_bytes(lines(0, 12).replace(b"rerank-v3.5", b"rerank-v9.9", 1))
        report(other)
        [theirs] = [each for each in entries(cache_dir) if each["inode"] == other.stat().st_ino]
        for part in theirs["parts"]:
            name = manifest.stem + "-" + part["name"].rsplit("-", 1)[1]
            (cache_dir / part["name"]).rename(cache_dir / name)
            part["name"] = name
        theirs["mtime_ns"] = log.stat().st_mtime_ns
        manifest.write_text(json.dumps(theirs))
        other.unlink()
    assert report(log) == expected
    [rebuilt] = entries(cache_dir)
    assert rebuilt["inode"] == log.stat().st_ino
    assert report(log) == expected


def test_an_unwritable_cache_is_one_warning_and_the_same_report(
    tmp_path: Path, cache_dir: Path, where_modes_bind: list[str]
) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(lines(0, 12))
    expected = report(log, cache=False)
    cache_dir.mkdir(parents=True)
    cache_dir.chmod(0o500)
    other = tmp_path / "other.jsonl"
    other.write_bytes(lines(20, 3))
    try:
        done = subprocess.run(
            [
                *where_modes_bind,
                sys.executable,
                "-m",
                "spanledger.cli",
                "report",
                str(log),
                str(other),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO_ROOT,
            env={**os.environ, "XDG_CACHE_HOME": str(cache_dir.parent.parent)},
        )
    finally:
        cache_dir.chmod(0o700)
    assert done.returncode == 0, done.stderr
    warnings = done.stderr.splitlines()
    assert len(warnings) == 1, warnings
    assert "report cache" in warnings[0]
    assert "cannot be written" in warnings[0]
    both = report(log, other, cache=False)
    assert json.loads(done.stdout) == both
    assert (expected["events"], both["events"]) == (12, 15)
    assert list(cache_dir.iterdir()) == []


def test_two_reports_at_once_leave_a_sound_cache(tmp_path: Path, cache_dir: Path) -> None:
    logs = []
    for index in range(3):
        log = tmp_path / f"host-{index}.jsonl"
        log.write_bytes(lines(index * 100, 60))
        logs.append(log)
    expected = report(*logs, cache=False)
    command = [sys.executable, "-m", "spanledger.cli", "report", *map(str, logs), "--json"]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_dir.parent.parent)}
    for _ in range(2):
        running = [
            subprocess.Popen(command, stdout=subprocess.PIPE, env=env, cwd=REPO_ROOT)
            for _ in range(2)
        ]
        outputs = [process.communicate()[0] for process in running]
        assert [process.returncode for process in running] == [0, 0]
        assert [json.loads(output) for output in outputs] == [expected, expected]
        with logs[0].open("ab") as out:
            out.write(lines(1000, 2))
        expected = report(*logs, cache=False)
    assert report(*logs) == expected
    assert not list(cache_dir.glob(".*.tmp"))


_STEPS = st.lists(
    st.tuples(st.sampled_from(["append", "truncate", "rotate", "rewrite"]), st.integers(0, 6)),
    min_size=1,
    max_size=5,
)


@pytest.mark.slow
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=_STEPS, data=st.data())
def test_any_sequence_of_appends_truncations_and_rotations_reports_as_no_cache(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]], data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("logs")
    logs = folder / "logs"
    logs.mkdir()
    log = logs / "events.jsonl"
    numbers = iter(range(100_000))
    log.write_bytes(b"".join(data.draw(_line(next(numbers))) for _ in range(3)))
    for step, count in steps:
        added = b"".join(data.draw(_line(next(numbers))) for _ in range(count))
        if step == "append":
            with log.open("ab") as out:
                out.write(added)
        elif step == "truncate":
            log.write_bytes(log.read_bytes()[: len(log.read_bytes()) // 2])
        elif step == "rotate":
            log.rename(logs / f"events-{next(numbers)}.jsonl")
            log.write_bytes(added)
        else:
            log.write_bytes(added)
        cached, err = report_and_warnings(logs)
        assert "cache" not in err
        assert SENTINEL not in json.dumps(cached)
        assert cached == report_and_warnings(logs, cache=False)[0]


def test_duckdb_s_version_is_read_from_its_install_without_importing_it() -> None:
    from importlib import metadata

    report_cache.cache_version.cache_clear()
    assert report_cache._duckdb_version() == metadata.version("duckdb")
    assert report_cache.cache_version().endswith(f"/duckdb-{metadata.version('duckdb')}")


@pytest.mark.parametrize(
    ("folders", "expected"),
    [
        (["duckdb-9.9.9.dist-info"], "9.9.9"),
        (["duckdb-9.9.9.dist-info", "duckdb-1.0.dist-info"], None),
    ],
)
def test_duckdb_s_version_is_one_clear_answer_or_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folders: list[str], expected: str | None
) -> None:
    from importlib import machinery, metadata, util

    for name in ["duckdb", *folders]:
        (tmp_path / name).mkdir()
    spec = machinery.ModuleSpec("duckdb", None, is_package=True)
    spec.submodule_search_locations = [str(tmp_path / "duckdb")]
    monkeypatch.setattr(util, "find_spec", lambda name: spec if name == "duckdb" else None)
    found = report_cache._duckdb_version()
    assert found == (expected if expected is not None else metadata.version("duckdb"))


def test_the_cache_version_changes_with_the_installed_files(tmp_path: Path) -> None:
    package = tmp_path / "package"
    (package / "fleet" / "__pycache__").mkdir(parents=True)
    (package / "fleet" / "scan.py").write_text("judged = 1\n")
    (package / "data.toml").write_text("a = 1\n")
    first = report_cache.source_digest(package)
    assert report_cache.source_digest(package) == first
    (package / "fleet" / "__pycache__" / "scan.cpython-311.pyc").write_bytes(b"\0")
    assert report_cache.source_digest(package) == first  # compiled files are not sources
    scan = package / "fleet" / "scan.py"
    stamp = scan.stat().st_mtime_ns
    scan.write_text("judged = 2\n")  # an edit of the same size
    os.utime(scan, ns=(stamp + 1_000_000, stamp + 1_000_000))
    edited = report_cache.source_digest(package)
    assert edited != first
    (package / "fleet" / "new.py").write_text("")
    added = report_cache.source_digest(package)
    assert added not in (first, edited)
    (package / "fleet" / "new.py").unlink()
    assert report_cache.source_digest(package) == edited
    report_cache.cache_version.cache_clear()
    root = Path(report_cache.__file__).resolve().parents[1]
    assert f"+{report_cache.source_digest(root)}/" in report_cache.cache_version()
