"""What a report over logs unchanged since the last one found, remembered, so that it is
answered without reading them again, nor starting DuckDB: the scan's result (the figures
before pricing) and the answer printed from it (the text, the warnings and the status).

Each is keyed by everything it depends on: each file as the report cache covers it (path,
device, inode, size, modification time, the digest of its last bytes and the lines found
there), in the order given, and what was asked: the scan's options, or for an answer the
command's question (groupings, window, output form, the price table's bytes). A log that
changed in any way (grown, truncated, replaced, touched) no longer matches its cache entry, so
the report is run and remembered under the new key. A result is written whole under a
temporary name and moved into place; one of another format or version, whose bytes do not
match the digest it carries, or whose fields are not of their types, is ignored, never
trusted. Only the newest results are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from spanledger.fleet.report_cache import CacheEntry, ReportCache, entry_key, write_atomically

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "KEPT",
    "KEPT_BYTES",
    "LARGEST",
    "Answer",
    "ScanOptions",
    "instant",
    "prune_results",
    "recall",
    "recall_answer",
    "remember",
    "remember_answer",
    "unchanged_entries",
]

FORMAT = 1
"""The layout of a remembered result; one of another format is ignored."""
KEPT = 32
"""How many results of each kind are kept at most: the newest, by when they were last written
or used."""
KEPT_BYTES = 64 << 20
"""How many bytes of results of each kind are kept at most (the newest first)."""
LARGEST = 16 << 20
"""A result larger than this (a report by request over many requests) is not remembered:
reading it back would save little over the scan, and it would crowd out the others."""
_SCANS = "scans"
_ANSWERS = "answers"
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
            "since": instant(self.since),
            "until": instant(self.until),
            "windows": [instant(moment) for moment in sorted(set(self.windows))],
            "recorded_costs": self.recorded_costs,
            "daily": self.daily,
        }


@dataclass(frozen=True)
class Answer:
    """What a report printed: its standard output, its warnings and its exit status."""

    out: str
    err: str
    status: int


def unchanged_entries(store: ReportCache, files: Sequence[Path]) -> list[CacheEntry] | None:
    """Each of ``files``' cache entry, in order, when every one covers its file as it is now;
    ``None`` when any file changed since it was cached, or has no entry."""
    entries: list[CacheEntry] = []
    for path in files:
        entry = store.unchanged(path)
        if entry is None:
            return None
        entries.append(entry)
    return entries


def recall(
    store: ReportCache, entries: Sequence[CacheEntry], options: ScanOptions, kind: type[Result]
) -> Result | None:
    """The result (a ``kind``: the scan's dataclass) remembered for the files ``entries``
    cover and ``options``; ``None`` when no sound result is kept for them."""
    from pydantic import ValidationError

    payload = _recalled(store, _SCANS, _key(entries, "options", options.described()))
    if payload is None:
        return None
    try:
        return _adapter(kind).validate_json(payload, strict=True)
    except ValidationError:
        return None


def remember(
    store: ReportCache, entries: Sequence[CacheEntry], options: ScanOptions, scan: object
) -> None:
    """Keep ``scan`` as the result for the files ``entries`` describe (as the scan read them)
    and ``options``; a cache that cannot be written is said once by ``store``."""
    if store.writable:
        key = _key(entries, "options", options.described())
        _keep(store, _SCANS, key, entries, _adapter(type(scan)).dump_json(scan))


def recall_answer(
    store: ReportCache, entries: Sequence[CacheEntry], question: Mapping[str, Any]
) -> Answer | None:
    """The answer remembered for the files ``entries`` cover and ``question`` (JSON values:
    what the command asked), read with the standard library alone; ``None`` when no sound
    one is kept."""
    payload = _recalled(store, _ANSWERS, _key(entries, "question", question))
    if payload is None:
        return None
    try:
        stored = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(stored, dict) or stored.keys() != {"out", "err", "status"}:
        return None
    out, err, status = stored["out"], stored["err"], stored["status"]
    if type(out) is not str or type(err) is not str or type(status) is not int:
        return None
    return Answer(out, err, status)


def remember_answer(
    store: ReportCache, entries: Sequence[CacheEntry], question: Mapping[str, Any], answer: Answer
) -> None:
    """Keep ``answer`` as what the report asked ``question`` printed over the files
    ``entries`` describe (as its scan read them)."""
    if store.writable:
        payload = json.dumps({"out": answer.out, "err": answer.err, "status": answer.status})
        _keep(store, _ANSWERS, _key(entries, "question", question), entries, payload.encode())


def _recalled(store: ReportCache, folder: str, key: str) -> bytes | None:
    """The payload kept under ``key`` in ``folder``, if this version wrote it there under that
    key and its bytes are intact; marked as used (a read-only cache still answers)."""
    where = store.root / folder / f"{key}.json"
    try:
        stored = where.read_bytes()
    except OSError:
        return None
    head, _, payload = stored.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    if header.get("key") != key or header.get("version") != store.version:
        return None
    if header.get("digest") != hashlib.sha256(payload).hexdigest():
        return None
    with contextlib.suppress(OSError):
        os.utime(where)
    return payload


def _keep(
    store: ReportCache, folder: str, key: str, entries: Sequence[CacheEntry], payload: bytes
) -> None:
    """Write ``payload`` under ``key`` in ``folder``, after a header line naming its format,
    version, key, digest and the entries it depends on; one over ``LARGEST`` is not kept."""
    if len(payload) > LARGEST:
        return
    header = {
        "format": FORMAT,
        "version": store.version,
        "key": key,
        "digest": hashlib.sha256(payload).hexdigest(),
        "entries": sorted({entry_key(entry.device, entry.inode) for entry in entries}),
    }
    where = store.root / folder
    try:
        where.mkdir(exist_ok=True)
        write_atomically(where / f"{key}.json", json.dumps(header).encode() + b"\n" + payload)
    except OSError as error:
        store.unwritable(error)


def prune_results(store: ReportCache) -> None:
    """Remove the results that depend on a file the cache no longer has an entry for, then
    all but the newest of each kind within ``KEPT`` and ``KEPT_BYTES``."""
    if not store.writable:
        return
    try:
        entries = {name[: -len(".json")] for name in os.listdir(store.root)}
    except OSError:
        return
    for folder in (_SCANS, _ANSWERS):
        _prune_folder(store.root / folder, entries)


def _prune_folder(folder: Path, entries: set[str]) -> None:
    try:
        names = [name for name in os.listdir(folder) if name.endswith(".json")]
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


def _key(entries: Sequence[CacheEntry], name: str, asked: Mapping[str, Any]) -> str:
    """The digest of the files as ``entries`` cover them and of what was asked."""
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
        name: asked,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def instant(moment: datetime | None) -> str | None:
    """``moment`` in ISO 8601 with its offset, for a key."""
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
