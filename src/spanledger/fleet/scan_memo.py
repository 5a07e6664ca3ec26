"""A scan's result remembered, so that a report over logs unchanged since the last one is
answered without reading them again, nor starting DuckDB.

The result is keyed by everything it depends on: each file as the report cache covers it
(path, device, inode, size, modification time, the digest of its last bytes and the lines
found there), in the order given, and the scan's options. A log that changed in any way
(grown, truncated, replaced, touched) no longer matches its cache entry, so the scan is run
and its result remembered under the new key. A result is written whole under a temporary name
and moved into place; one of another format or version, whose bytes do not match the digest
it carries, or whose fields are not of their types, is ignored, never trusted. Only the
newest results are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from spanledger.fleet.report_cache import CacheEntry, ReportCache, entry_key, write_atomically

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["KEPT", "KEPT_BYTES", "LARGEST", "ScanOptions", "prune_results", "recall", "remember"]

FORMAT = 1
"""The layout of a remembered result; one of another format is ignored."""
KEPT = 32
"""How many results are kept at most: the newest, by when they were last written or used."""
KEPT_BYTES = 64 << 20
"""How many bytes of results are kept at most (the newest first)."""
LARGEST = 16 << 20
"""A result larger than this (a report by request over many requests) is not remembered:
reading it back would save little over the scan, and it would crowd out the others."""
_FOLDER = "scans"
Result = TypeVar("Result")


@dataclass(frozen=True)
class ScanOptions:
    """What a scan was asked, besides the files: any difference is another result."""

    by: tuple[str, ...]
    since: datetime | None
    until: datetime | None
    windows: tuple[datetime, ...]
    recorded_costs: bool
    daily: bool

    def described(self) -> dict[str, Any]:
        """The options as JSON values (instants in ISO 8601, with their offset)."""
        return {
            "by": list(self.by),
            "since": _instant(self.since),
            "until": _instant(self.until),
            "windows": [_instant(moment) for moment in sorted(set(self.windows))],
            "recorded_costs": self.recorded_costs,
            "daily": self.daily,
        }


def recall(
    store: ReportCache, files: Sequence[Path], options: ScanOptions, kind: type[Result]
) -> Result | None:
    """The result (a ``kind``: the scan's dataclass) remembered for ``files`` as they are now
    and ``options``; ``None`` when any file changed since it was cached, or no sound result
    is kept for them."""
    entries: list[CacheEntry] = []
    for path in files:
        entry = store.unchanged(path)
        if entry is None:
            return None
        entries.append(entry)
    key = _key(entries, options)
    where = store.root / _FOLDER / f"{key}.json"
    try:
        stored = where.read_bytes()
    except OSError:
        return None
    scan = _sound(stored, key, store.version, kind)
    if scan is not None:
        with contextlib.suppress(OSError):  # a read-only cache still answers
            os.utime(where)
    return scan


def remember(
    store: ReportCache, entries: Sequence[CacheEntry], options: ScanOptions, scan: object
) -> None:
    """Keep ``scan`` as the result for the files ``entries`` describe (as the scan read them)
    and ``options``; a cache that cannot be written is said once by ``store``."""
    if not store.writable:
        return
    key = _key(entries, options)
    payload = _adapter(type(scan)).dump_json(scan)
    if len(payload) > LARGEST:
        return
    header = {
        "format": FORMAT,
        "version": store.version,
        "key": key,
        "digest": hashlib.sha256(payload).hexdigest(),
        "entries": sorted({entry_key(entry.device, entry.inode) for entry in entries}),
    }
    folder = store.root / _FOLDER
    try:
        folder.mkdir(exist_ok=True)
        write_atomically(folder / f"{key}.json", json.dumps(header).encode() + b"\n" + payload)
    except OSError as error:
        store.unwritable(error)


def _sound(stored: bytes, key: str, version: str, kind: type[Result]) -> Result | None:
    """The result ``stored`` holds (a header line, then the scan as JSON), if it is one this
    version wrote under ``key``, intact and of its types."""
    from pydantic import ValidationError

    head, _, payload = stored.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    if header.get("key") != key or header.get("version") != version:
        return None
    if header.get("digest") != hashlib.sha256(payload).hexdigest():
        return None
    try:
        return _adapter(kind).validate_json(payload, strict=True)
    except ValidationError:
        return None


def prune_results(store: ReportCache) -> None:
    """Remove the results that depend on a file the cache no longer has an entry for, then
    all but the newest within ``KEPT`` and ``KEPT_BYTES``."""
    folder = store.root / _FOLDER
    if not store.writable:
        return
    try:
        names = [name for name in os.listdir(folder) if name.endswith(".json")]
        entries = {name[: -len(".json")] for name in os.listdir(store.root)}
    except OSError:
        return
    dated: list[tuple[int, int, str]] = []
    for name in names:
        try:
            with (folder / name).open("rb") as result:
                needs = json.loads(result.readline()).get("entries")
                status = os.fstat(result.fileno())
        except (OSError, ValueError, AttributeError):
            needs = None
        if not isinstance(needs, list) or not entries.issuperset(map(str, needs)):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
            continue
        dated.append((status.st_mtime_ns, status.st_size, name))
    dated.sort(reverse=True)
    total = 0
    for count, (_, size, name) in enumerate(dated):
        total += size
        if count >= KEPT or total > KEPT_BYTES:
            with contextlib.suppress(OSError):
                (folder / name).unlink()


def _key(entries: Sequence[CacheEntry], options: ScanOptions) -> str:
    described = {
        "files": [
            [
                entry.path,
                entry.device,
                entry.inode,
                entry.covered,
                entry.mtime_ns,
                entry.tail,
                entry.lines,
            ]
            for entry in entries
        ],
        "options": options.described(),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _instant(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


_adapters: dict[type, Any] = {}
"""Each result type's adapter, built when first needed."""


def _adapter(kind: type[Result]) -> TypeAdapter[Result]:
    """``kind``'s JSON form, typed both ways."""
    adapter = _adapters.get(kind)
    if adapter is None:
        from pydantic import TypeAdapter

        adapter = _adapters[kind] = TypeAdapter(kind)
    return cast("TypeAdapter[Result]", adapter)
