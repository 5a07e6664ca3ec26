"""The files ``spanledger report`` and ``spanledger export`` read: names taken literally when
they exist (the shell has expanded the user's patterns already), patterns expanded once, by
spanledger, directories matched by a pattern read whole, each file once however it is reached,
and what cannot be read named: a failure, or skipped and counted with ``--skip-unreadable``.

Permissions are tested twice: in process, with the system's refusal stood in for (``os.scandir``
and ``os.open`` raising ``PermissionError`` for chosen paths, which works under any user), and
for real, in a subprocess where mode bits bind (as root, with the capabilities that bypass them
dropped by ``setpriv``; skipped, saying why, where that cannot be done)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spanledger.cli import main
from spanledger.errors import ConfigurationError
from spanledger.eventlog import event_line
from spanledger.fleet.sources import LogFiles, describe_unreadable, log_files
from tests.ledger.conftest import REPO_ROOT, embedding_event


def log(path: Path, calls: int = 1) -> Path:
    """An event log of ``calls`` embedding calls (each its own call id) at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(event_line(embedding_event()) for _ in range(calls)))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def names(found: LogFiles) -> list[str]:
    return [path.name for path in found.files]


def named_as_skipped(err: str) -> list[str]:
    """The paths standard error's one line says were skipped as unreadable, sorted."""
    line, *rest = err.splitlines()
    said, _, listed = line.partition(": ")
    assert (said, rest) == (f"skipped {len(listed.split(', '))} unreadable paths", [])
    return sorted(listed.split(", "))


# --------------------------------------------------------------------------- names and patterns


def test_an_existing_name_is_taken_literally_whatever_characters_it_holds(
    tmp_path: Path,
) -> None:
    bracketed = log(tmp_path / "a[1].jsonl")
    log(tmp_path / "a1.jsonl")  # what a[1].jsonl matches as a pattern
    starred = log(tmp_path / "c*.jsonl")
    log(tmp_path / "c-other.jsonl")  # what c*.jsonl matches besides itself

    assert log_files([bracketed]).files == (bracketed.resolve(),)
    assert log_files([str(starred)]).files == (starred.resolve(),)


def test_names_the_shell_expanded_are_read_once_each(tmp_path: Path) -> None:
    """``spanledger report dir/*`` in a directory holding ``c*.jsonl``: the shell passes both
    names; ``c*.jsonl`` is one of them, not a pattern to expand again."""
    log(tmp_path / "c*.jsonl")
    log(tmp_path / "c-other.jsonl")
    expanded = sorted(str(path) for path in tmp_path.iterdir())

    assert names(log_files(expanded)) == ["c*.jsonl", "c-other.jsonl"]


def test_a_name_that_does_not_exist_is_a_pattern_expanded_once(tmp_path: Path) -> None:
    log(tmp_path / "c*.jsonl")
    log(tmp_path / "c-other.jsonl")
    log(tmp_path / "d.jsonl")

    assert names(log_files([str(tmp_path / "c?*")])) == ["c*.jsonl", "c-other.jsonl"]
    assert names(log_files([str(tmp_path / "[cd]-*.jsonl"), str(tmp_path / "d*")])) == [
        "c-other.jsonl",
        "d.jsonl",
    ]


def test_a_pattern_reads_the_directories_it_matches_whole(tmp_path: Path) -> None:
    """``'logs/host-*'`` matching a host's directory and another host's single file reads
    both: the file, and every ``*.jsonl`` under the directory, rotated ones included."""
    log(tmp_path / "logs" / "host-a" / "events.jsonl")
    log(tmp_path / "logs" / "host-a" / "old" / "events.jsonl.20261103T000000Z.jsonl")
    (tmp_path / "logs" / "host-a" / "notes.txt").write_text("not a log")
    log(tmp_path / "logs" / "host-b.jsonl")

    found = log_files([str(tmp_path / "logs" / "host-*")])

    assert [path.relative_to(tmp_path.resolve()) for path in found.files] == [
        Path("logs/host-b.jsonl"),  # by folder, then name
        Path("logs/host-a/events.jsonl"),
        Path("logs/host-a/old/events.jsonl.20261103T000000Z.jsonl"),
    ]


def test_a_double_star_is_any_depth_and_a_star_skips_hidden_names(tmp_path: Path) -> None:
    log(tmp_path / "top.jsonl")
    log(tmp_path / "a" / "b" / "deep.jsonl")
    log(tmp_path / ".hidden.jsonl")
    log(tmp_path / ".cache" / "inside.jsonl")

    assert names(log_files([str(tmp_path / "**" / "*.jsonl")])) == ["top.jsonl", "deep.jsonl"]
    assert names(log_files([str(tmp_path / ".h*")])) == [".hidden.jsonl"]


def test_a_pattern_that_matches_no_log_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty-dir").mkdir()

    with pytest.raises(ConfigurationError, match="no file matches this pattern"):
        log_files([str(tmp_path / "nothing-*")])
    with pytest.raises(ConfigurationError, match="nothing this pattern matches is a file"):
        log_files([str(tmp_path / "empty-*")])


# --------------------------------------------------------------------------- each file once


def test_each_file_is_read_once_however_many_names_reach_it(tmp_path: Path) -> None:
    events = log(tmp_path / "logs" / "events.jsonl")
    (tmp_path / "link.jsonl").symlink_to(events)
    os.link(events, tmp_path / "hard.jsonl")  # another name of the same inode

    found = log_files(
        [
            events,
            str(events),
            tmp_path / "link.jsonl",
            tmp_path / "hard.jsonl",
            tmp_path / "logs",
            str(tmp_path / "logs" / "*.jsonl"),
            str(tmp_path / "*" / "events.*"),
        ]
    )

    assert found.files == (events.resolve(),)


def test_a_link_back_up_a_directory_does_not_loop(tmp_path: Path) -> None:
    log(tmp_path / "logs" / "events.jsonl")
    (tmp_path / "logs" / "again").symlink_to(tmp_path / "logs")

    assert names(log_files([tmp_path / "logs", str(tmp_path / "logs" / "**")])) == ["events.jsonl"]


# --------------------------------------------------------------------------- unreadable (stand-in)


def refuse(monkeypatch: pytest.MonkeyPatch, *refused: Path) -> None:
    """``os.scandir`` and ``os.open`` refuse the ``refused`` paths as the system refuses one
    without permission (root included); every other path goes to the real calls."""
    real_scandir, real_open = os.scandir, os.open
    denied = {str(path) for path in refused}

    def check(path: Any) -> None:
        if not isinstance(path, int) and os.fspath(path) in denied:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

    def scandir(path: Any = ".") -> Any:
        check(path)
        return real_scandir(path)

    def open_(path: Any, flags: int, mode: int = 0o777, **more: Any) -> int:
        check(path)
        return real_open(path, flags, mode, **more)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "open", open_)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A host's log directory: two readable logs (3 and 2 calls), a log and a directory at
    depth that the stand-in refuses."""
    root = tmp_path / "host"
    log(root / "events.jsonl", 3)
    log(root / "locked.jsonl")
    log(root / "deep" / "er" / "events.jsonl", 2)
    log(root / "deep" / "er" / "private" / "events.jsonl", 5)
    return root


def test_what_cannot_be_read_fails_naming_it_at_any_depth(
    monkeypatch: pytest.MonkeyPatch, host: Path
) -> None:
    for refused in (host / "locked.jsonl", host / "deep" / "er" / "private", host):
        with monkeypatch.context() as patched:
            refuse(patched, refused)
            with pytest.raises(PermissionError) as raised:
                log_files([host])
        assert raised.value.filename == str(refused)


def test_what_cannot_be_read_is_skipped_and_listed_when_asked(
    monkeypatch: pytest.MonkeyPatch, host: Path
) -> None:
    private = host / "deep" / "er" / "private"
    refuse(monkeypatch, host / "locked.jsonl", private)

    found = log_files(
        [host, host / "locked.jsonl", str(host / "deep" / "*" / "*")], skip_unreadable=True
    )

    assert names(found) == ["events.jsonl", "events.jsonl"]
    assert sorted(found.unreadable) == [private, host / "locked.jsonl"]  # each once


def test_a_directory_a_pattern_must_list_is_named_when_it_cannot_be(
    monkeypatch: pytest.MonkeyPatch, host: Path
) -> None:
    refuse(monkeypatch, host / "deep")
    pattern = str(host / "*" / "*" / "*.jsonl")

    with pytest.raises(PermissionError) as raised:
        log_files([pattern])
    assert raised.value.filename == str(host / "deep")
    assert log_files([pattern, host / "events.jsonl"], skip_unreadable=True).unreadable == (
        host / "deep",
    )


def test_a_named_path_under_a_directory_that_cannot_be_searched_is_unreadable(
    monkeypatch: pytest.MonkeyPatch, host: Path
) -> None:
    real_stat = os.stat
    hidden = str(host / "deep" / "er" / "events.jsonl")

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if not isinstance(path, int) and os.fspath(path) == hidden:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), hidden)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)

    with pytest.raises(PermissionError):
        log_files([hidden])
    assert log_files([hidden, host / "events.jsonl"], skip_unreadable=True).unreadable == (
        Path(hidden),
    )


def test_nothing_readable_at_all_is_an_error_even_when_skipping(
    monkeypatch: pytest.MonkeyPatch, host: Path
) -> None:
    refuse(monkeypatch, host)

    with pytest.raises(ConfigurationError) as raised:
        log_files([host], skip_unreadable=True)
    assert str(raised.value) == f"no log can be read: 1 unreadable path: {host}"
    with pytest.raises(ConfigurationError, match=r"^no log can be read$"):
        log_files([])


def test_unreadable_paths_are_counted_and_named_in_one_line() -> None:
    paths = [Path(f"p{n}") for n in range(12)]

    assert describe_unreadable(paths[:1]) == "1 unreadable path: p0"
    assert describe_unreadable(paths[:2]) == "2 unreadable paths: p0, p1"
    assert describe_unreadable(paths) == (
        "12 unreadable paths: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 2 more"
    )


def test_report_fails_naming_what_it_cannot_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], host: Path
) -> None:
    refuse(monkeypatch, host / "deep" / "er" / "private")

    status, out, err = run(capsys, "report", str(host), "--json")

    assert (status, out) == (1, "")
    assert err == f"error: {host / 'deep' / 'er' / 'private'}: Permission denied\n"


def test_report_and_export_skip_and_name_what_they_cannot_read_when_asked(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    host: Path,
    tmp_path: Path,
) -> None:
    refused = [host / "deep" / "er" / "private", host / "locked.jsonl"]
    refuse(monkeypatch, *refused)

    status, out, err = run(capsys, "report", str(host), "--json", "--skip-unreadable")
    assert status == 0
    assert json.loads(out)["events"] == 5  # 3 + 2: what could be read
    assert named_as_skipped(err) == [str(path) for path in refused]

    target = tmp_path / "parquet"
    status, out, err = run(
        capsys, "export", str(host), "--parquet", str(target), "--skip-unreadable"
    )
    assert status == 0
    assert out.startswith("exported 5 events ")
    assert named_as_skipped(err) == [str(path) for path in refused]


# --------------------------------------------------------------------------- unreadable (for real)


@pytest.fixture
def locked_host(tmp_path: Path) -> Iterator[Path]:
    """A host's logs with a mode-000 log, a mode-000 directory at depth and a link to a log
    in it (modes restored after, so the directory can be removed)."""
    root = tmp_path / "host"
    log(root / "events.jsonl", 3)
    locked = [log(root / "locked.jsonl"), root / "deep" / "private"]
    log(locked[1] / "events.jsonl", 5)
    (root / "linked.jsonl").symlink_to(locked[1] / "events.jsonl")  # into a locked directory
    for path in locked:
        path.chmod(0)
    yield root
    for path in locked:
        path.chmod(0o755)


def spanledger(prefix: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "spanledger.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        check=False,
    )


def test_a_log_or_directory_the_system_refuses_fails_the_run_naming_it(
    where_modes_bind: list[str], locked_host: Path
) -> None:
    done = spanledger(where_modes_bind, "report", str(locked_host), "--json")

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr in {
        f"error: {locked_host / name}: Permission denied\n"
        for name in ("locked.jsonl", "deep/private", "linked.jsonl")
    }


def test_a_log_or_directory_the_system_refuses_is_skipped_and_named_when_asked(
    where_modes_bind: list[str], locked_host: Path
) -> None:
    done = spanledger(where_modes_bind, "report", str(locked_host), "--json", "--skip-unreadable")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["events"] == 3
    assert named_as_skipped(done.stderr) == [
        str(locked_host / "deep" / "private"),
        str(locked_host / "linked.jsonl"),
        str(locked_host / "locked.jsonl"),
    ]
