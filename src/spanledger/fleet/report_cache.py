"""The report's columnar cache: per log file, the records a report kept, as Parquet.

An event log only grows, so what one report judged need not be judged again. Each file read
gets an entry named by its (device, inode): a manifest (what was covered: size, modification
time, a digest of the last bytes covered, the lines and the problems by reason found there)
and the Parquet parts holding the kept records. A file found unchanged is read from its parts
only; one that grew is read from them plus its appended bytes; anything else (truncated,
replaced, a digest that no longer matches) is read afresh. A renamed (rotated) file keeps its
inode and so its entry. Nothing in an entry is trusted unchecked: a manifest of another
format, version or file, or a part whose bytes or columns are not those recorded, is ignored
and rebuilt. Every file is written whole under a temporary name and moved into place, so two
reports at once never see half an entry. A cache that cannot be written is said once, and the
report goes on without it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "TAIL_BYTES",
    "CacheEntry",
    "Part",
    "Planned",
    "ReportCache",
    "cache_root",
    "cache_version",
    "entry_key",
    "source_digest",
    "working_directory",
    "write_atomically",
]

FORMAT = 1
"""The layout of an entry; an entry of another format is rebuilt."""
TAIL_BYTES = 4096
"""How many of the last bytes covered the digest checks."""
_ORPHAN_SECONDS = 600
"""A part no manifest names is removed once this old (a report may be writing its manifest)."""
_MAX_PARTS = 16
"""Past this many parts, an entry's parts are merged into one when it next grows."""
_CHUNK = 1 << 20


def working_directory() -> Path:
    """Where the fleet commands keep their working files: ``$XDG_CACHE_HOME/spanledger`` (else
    ``~/.cache/spanledger``), on disk rather than in a ``/tmp`` that may live in memory."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "spanledger"


def cache_root() -> Path:
    """``report-cache`` in the fleet commands' working directory."""
    return working_directory() / "report-cache"


@functools.cache
def cache_version() -> str:
    """spanledger's version and its installed files' (a development install changes them
    under the same version), and DuckDB's: any of them may change how a log is judged, a part
    read or a report printed. Found without importing DuckDB, which a report answered from
    the cache never starts."""
    from spanledger._version import __version__

    package = Path(__file__).resolve().parents[1]
    return f"{__version__}+{source_digest(package)}/duckdb-{_duckdb_version()}"


def source_digest(root: Path) -> str:
    """A short digest of every file under ``root`` (its path, size and modification time;
    ``__pycache__`` left out): it changes when a file is edited, added or removed, for a
    listing of a couple of hundred files (about 2 ms) rather than reading them."""
    listed: list[str] = []
    folders = [root]
    while folders:
        folder = folders.pop()
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(Path(entry.path))
                    continue
                with contextlib.suppress(OSError):
                    status = entry.stat()
                    where = os.path.relpath(entry.path, root)
                    listed.append(f"{where}\0{status.st_size}\0{status.st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(listed)).encode()).hexdigest()[:16]


def _duckdb_version() -> str:
    """DuckDB's version as the ``.dist-info`` folder its installer left beside it names it
    (a listing, where ``importlib.metadata`` costs a fifth of an answered report's time);
    else as its metadata says; else, installed some other way, as it says itself."""
    found = importlib.util.find_spec("duckdb")
    locations = found.submodule_search_locations if found is not None else None
    if locations:
        folder = os.path.dirname(next(iter(locations)))
        with contextlib.suppress(OSError):
            named = [
                entry[len("duckdb-") : -len(".dist-info")]
                for entry in os.listdir(folder)
                if entry.startswith("duckdb-") and entry.endswith(".dist-info")
            ]
            if len(named) == 1:
                return named[0]
    from importlib import metadata

    try:
        return metadata.version("duckdb")
    except metadata.PackageNotFoundError:
        import duckdb

        return str(duckdb.__version__)


@dataclass(frozen=True)
class Part:
    """One Parquet file of an entry: its name in the cache, its rows and its bytes' digest."""

    name: str
    rows: int
    digest: str


@dataclass
class CacheEntry:
    """A manifest: which file, how much of it is covered, and what reading it found there."""

    path: str
    device: int
    inode: int
    covered: int
    mtime_ns: int
    tail: str
    whole_lines: bool
    """The covered bytes end with a newline, so appended bytes start a line."""
    lines: int
    problems: dict[str, int]
    parts: list[Part]
    format: int = FORMAT
    version: str = field(default_factory=cache_version)


@dataclass
class Planned:
    """How one file is read: its cached parts (linked into the working directory), what they
    cover, and from which byte on it must be read afresh (``None``: not at all)."""

    path: Path
    parts: list[Path] = field(default_factory=list)
    lines: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    start: int | None = 0
    entry: CacheEntry | None = None
    status: os.stat_result | None = None
    """The file as planned: what a new entry covers."""


class ReportCache:
    """The cache under ``root``; ``warn`` is told, once, when it cannot be written."""

    def __init__(self, root: Path, warn: Callable[[str], object]) -> None:
        self.root = root
        self.warn = warn
        self.writable = True
        self.used: set[str] = set()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            self.unwritable(error)

    def plan(
        self, files: Sequence[Path], workdir: Path, columns: Callable[[Path, int], bool]
    ) -> list[Planned]:
        """Each file's plan; ``columns(part, rows)`` says whether a part has the expected
        columns and ``rows`` rows (asked of DuckDB by the caller)."""
        return [self._plan_one(path, workdir, number, columns) for number, path in enumerate(files)]

    @property
    def version(self) -> str:
        """The versions an entry or result written now carries."""
        return cache_version()

    def unchanged(self, path: Path) -> CacheEntry | None:
        """The entry covering all of ``path`` as it is now (same size, modification time and
        last bytes); ``None`` when there is none, the file changed, or it cannot be read."""
        try:
            status = path.stat()
            key = entry_key(status.st_dev, status.st_ino)
            entry = self._load(key, status.st_dev, status.st_ino)
            if entry is None or status.st_size != entry.covered:
                return None
            if not self._covers(path, status, entry):
                return None
        except OSError:
            return None
        self.used.add(key)
        return entry

    def _plan_one(
        self, path: Path, workdir: Path, number: int, columns: Callable[[Path, int], bool]
    ) -> Planned:
        status = path.stat()
        planned = Planned(path, status=status)
        key = entry_key(status.st_dev, status.st_ino)
        entry = self._load(key, status.st_dev, status.st_ino)
        if entry is None or not self._covers(path, status, entry):
            return planned
        linked: list[Path] = []
        for index, part in enumerate(entry.parts):
            here = self._link(part, workdir / f"cached-{number:06d}-{index:04d}.parquet")
            if here is None or _digest_of(here) != part.digest or not columns(here, part.rows):
                return planned
            linked.append(here)
        self.used.add(key)
        planned.parts = linked
        planned.lines = entry.lines
        planned.problems = dict(entry.problems)
        planned.entry = entry
        planned.start = entry.covered if status.st_size > entry.covered else None
        return planned

    def _covers(self, path: Path, status: os.stat_result, entry: CacheEntry) -> bool:
        """The entry still describes the start of the file: unchanged, or grown by appending
        whole lines after what it covers."""
        if status.st_size < entry.covered:
            return False
        if status.st_size == entry.covered and status.st_mtime_ns != entry.mtime_ns:
            return False
        if status.st_size > entry.covered and not entry.whole_lines:
            return False
        try:
            return tail_digest(path, entry.covered) == entry.tail
        except OSError:
            return False

    def _load(self, key: str, device: int, inode: int) -> CacheEntry | None:
        """The entry for (``device``, ``inode``), ``None`` when missing, unreadable or not
        one this version wrote for that file."""
        try:
            data = json.loads((self.root / f"{key}.json").read_bytes())
            entry = CacheEntry(
                **{name: value for name, value in data.items() if name != "parts"},
                parts=[Part(**part) for part in data["parts"]],
            )
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        fits = _sound(entry, key, device, inode)
        return entry if fits else None

    def _link(self, part: Part, here: Path) -> Path | None:
        """The cached part linked into the working directory, so that another report
        replacing the entry meanwhile cannot take it away; the cached path itself where a
        link cannot be made; ``None`` when it is gone."""
        there = self.root / Path(part.name).name
        try:
            os.link(there, here)
        except FileNotFoundError:
            return None
        except OSError:
            return there if there.is_file() else None
        return here

    def save(
        self,
        planned: Planned,
        fresh: Path | None,
        rows: int,
        lines: int,
        problems: Mapping[str, int],
        *,
        merged: bool = False,
    ) -> CacheEntry | None:
        """Record what reading ``planned`` found: its cached parts plus ``fresh`` (the
        Parquet of the bytes read afresh, ``rows`` records), covering up to the size it had
        when planned; ``merged``: ``fresh`` holds the cached parts' records too. The entry
        as kept; ``None`` when the cache cannot be written."""
        if not self.writable:
            return None
        try:
            return self._save(planned, fresh, rows, lines, problems, merged)
        except OSError as error:
            self.unwritable(error)
            return None

    def _save(
        self,
        planned: Planned,
        fresh: Path | None,
        rows: int,
        lines: int,
        problems: Mapping[str, int],
        merged: bool,
    ) -> CacheEntry:
        status = planned.status
        assert status is not None
        key = entry_key(status.st_dev, status.st_ino)
        old = planned.entry
        parts = list(old.parts) if old is not None and not merged else []
        if fresh is not None:
            name = f"{key}-{uuid.uuid4().hex}.parquet"
            _place(fresh, self.root / name)
            parts.append(Part(name, rows, _digest_of(fresh)))
        found = dict(planned.problems)
        for reason, count in problems.items():
            found[reason] = found.get(reason, 0) + count
        covered = status.st_size
        entry = CacheEntry(
            path=str(planned.path),
            device=status.st_dev,
            inode=status.st_ino,
            covered=covered,
            mtime_ns=status.st_mtime_ns,
            tail=tail_digest(planned.path, covered),
            whole_lines=_ends_line(planned.path, covered),
            lines=planned.lines + lines,
            problems=found,
            parts=parts,
        )
        if old is not None and old == entry:
            return old
        write_atomically(self.root / f"{key}.json", json.dumps(asdict(entry)).encode())
        self.used.add(key)
        return entry

    def prune(self, keep: Iterable[Path]) -> None:
        """Remove the entries of files that no longer exist where they were last read (and
        are not among ``keep``), and parts no manifest names."""
        if not self.writable:
            return
        kept = set(self.used)
        for path in keep:
            with contextlib.suppress(OSError):
                status = path.stat()
                kept.add(entry_key(status.st_dev, status.st_ino))
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        named: set[str] = set()
        for name in names:
            if not name.endswith(".json"):
                continue
            key = name[: -len(".json")]
            if key not in kept and not _still_there(self.root / name, key):
                with contextlib.suppress(OSError):
                    (self.root / name).unlink()
                for part in names:  # its parts go with it
                    if part.startswith(f"{key}-") and part.endswith(".parquet"):
                        with contextlib.suppress(OSError):
                            (self.root / part).unlink()
                continue
            with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
                data = json.loads((self.root / name).read_bytes())
                named.update(str(part["name"]) for part in data["parts"])
        now = time.time()
        for name in names:
            if name.endswith(".json") or name in named or (self.root / name).is_dir():
                continue
            with contextlib.suppress(OSError):
                if now - (self.root / name).stat().st_mtime > _ORPHAN_SECONDS:
                    (self.root / name).unlink()

    def unwritable(self, error: OSError) -> None:
        if self.writable:
            cause = error.strerror or type(error).__name__
            self.warn(
                f"report cache {self.root} cannot be written ({cause}): "
                "reading every log afresh, figures unchanged"
            )
        self.writable = False


def _sound(entry: CacheEntry, key: str, device: int, inode: int) -> bool:
    """Whether a manifest read back is one this version wrote for this file, every field of
    its type: a foreign or hand-edited one is not trusted."""
    if not isinstance(entry.problems, dict) or not isinstance(entry.parts, list):
        return False
    counts = [entry.covered, entry.lines, *entry.problems.values()]
    counts += [part.rows for part in entry.parts]
    texts = [entry.path, entry.tail, *entry.problems]
    texts += [text for part in entry.parts for text in (part.name, part.digest)]
    return (
        entry.format == FORMAT
        and entry.version == cache_version()
        and (entry.device, entry.inode) == (device, inode)
        and all(type(count) is int and count >= 0 for count in counts)
        and type(entry.mtime_ns) is int
        and type(entry.whole_lines) is bool
        and all(isinstance(text, str) for text in texts)
        and all(part.name.startswith(f"{key}-") and "/" not in part.name for part in entry.parts)
    )


def too_many_parts(planned: Planned) -> bool:
    """Whether ``planned``'s parts should be merged into one as it is read."""
    return len(planned.parts) >= _MAX_PARTS


def tail_digest(path: Path, covered: int) -> str:
    """The digest of the ``TAIL_BYTES`` before byte ``covered`` of ``path``."""
    start = max(0, covered - TAIL_BYTES)
    with path.open("rb") as log:
        log.seek(start)
        data = log.read(covered - start)
    if len(data) != covered - start:
        return ""
    return hashlib.sha256(data).hexdigest()


def _ends_line(path: Path, covered: int) -> bool:
    if covered == 0:
        return True
    with path.open("rb") as log:
        log.seek(covered - 1)
        return log.read(1) == b"\n"


def _still_there(manifest: Path, key: str) -> bool:
    """Whether the file a manifest was written for is still at the path it names."""
    try:
        data: Any = json.loads(manifest.read_bytes())
        status = Path(str(data["path"])).stat()
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return entry_key(status.st_dev, status.st_ino) == key


def entry_key(device: int, inode: int) -> str:
    return f"{device:x}-{inode:x}"


def _digest_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as part:
        while chunk := part.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _place(source: Path, target: Path) -> None:
    """``source`` at ``target``, appearing there whole: linked, else copied then moved."""
    try:
        os.link(source, target)
    except OSError:
        temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            shutil.copyfile(source, temporary)
            os.replace(temporary, target)
        finally:
            with contextlib.suppress(OSError):
                temporary.unlink()


def write_atomically(target: Path, data: bytes) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
