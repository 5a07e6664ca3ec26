"""Shared rigs for the cost-ledger tests: event builders, tables, a list sink, the stand-in.

Events are built directly where the rule is about pricing; provider calls go to the stand-in
server on 127.0.0.1 where the rule involves what a provider reports (or fails to report).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from spanledger.errors import ErrorCategory
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
)
from spanledger.fleet import scan_memo
from spanledger.ledger import PriceTable, pricing
from spanledger.provider_ids import PROVIDER_IDS
from spanledger.testing import StandIn

REPO_ROOT = Path(__file__).resolve().parents[2]
_EXAMPLE_LOCATIONS = (
    REPO_ROOT / "prices" / "example-prices.toml",
    REPO_ROOT / "src" / "spanledger" / "data" / "example-prices.toml",  # shipped in the package
)
EXAMPLE_PRICES = next((p for p in _EXAMPLE_LOCATIONS if p.is_file()), _EXAMPLE_LOCATIONS[0])
WHEN = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)

_counter = iter(range(1, 10**9))
_counter_lock = threading.Lock()


def _call_id() -> str:
    with _counter_lock:
        return f"call-{next(_counter)}"


def embedding_event(
    model: str = "text-embedding-3-small",
    *,
    provider: str = "openai",
    tokens: int | None = 10,
    **overrides: Any,
) -> EmbeddingEvent:
    """A finished embedding call; ``tokens=None`` means the provider reported no usage."""
    fields: dict[str, Any] = {
        "call_id": _call_id(),
        "provider": provider,
        "model": model,
        "started_at": WHEN,
        "latency_ms": 5.0,
        "input_count": 1,
        "usage": EmbeddingUsage(input_tokens=tokens) if tokens is not None else None,
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def rerank_event(
    model: str = "rerank-v3.5",
    *,
    provider: str = "cohere",
    usage: RerankUsage | None = None,
    **overrides: Any,
) -> RerankEvent:
    fields: dict[str, Any] = {
        "call_id": _call_id(),
        "provider": provider,
        "model": model,
        "started_at": WHEN,
        "latency_ms": 5.0,
        "query_length": 5,
        "document_count": 3,
        "result_count": 3,
        "usage": usage,
    }
    fields.update(overrides)
    return RerankEvent(**fields)


def embedding_failed_event(
    model: str = "text-embedding-3-small",
    *,
    provider: str = "openai",
    estimated: EmbeddingUsage | None = None,
    category: ErrorCategory = ErrorCategory.UNAVAILABLE,
    **overrides: Any,
) -> EmbeddingFailedEvent:
    fields: dict[str, Any] = {
        "call_id": _call_id(),
        "provider": provider,
        "model": model,
        "started_at": WHEN,
        "latency_ms": 5.0,
        "input_count": 1,
        "error_category": category,
        "error_type": "ReadTimeout" if estimated is not None else "http_503",
        "estimated_usage": estimated,
    }
    fields.update(overrides)
    return EmbeddingFailedEvent(**fields)


def rerank_failed_event(
    model: str = "rerank-v3.5",
    *,
    provider: str = "cohere",
    estimated: RerankUsage | None = None,
    category: ErrorCategory = ErrorCategory.UNAVAILABLE,
    **overrides: Any,
) -> RerankFailedEvent:
    fields: dict[str, Any] = {
        "call_id": _call_id(),
        "provider": provider,
        "model": model,
        "started_at": WHEN,
        "latency_ms": 5.0,
        "query_length": 5,
        "document_count": 3,
        "error_category": category,
        "error_type": "ReadTimeout" if estimated is not None else "http_503",
        "estimated_usage": estimated,
    }
    fields.update(overrides)
    return RerankFailedEvent(**fields)


def entry(provider: str, model: str, **fields: Any) -> dict[str, Any]:
    """One price-table row in the file format's shape."""
    return {"provider": provider, "model": model, **fields}


def table(*entries: dict[str, Any], currency: str = "USD") -> PriceTable:
    """A table of ``entries``; providers of the tests' own making are declared as custom."""
    custom = sorted({row["provider"] for row in entries} - PROVIDER_IDS)
    data = {"currency": currency, "prices": list(entries), "custom_providers": custom}
    return PriceTable.from_dict(data)


class ListSink:
    """Keeps every event it is given; safe for concurrent emitters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []

    def emit(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[Event]:
        with self._lock:
            return list(self._events)


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    """The ledger's warn-once set is process-wide: start and leave every test with it empty."""
    pricing._forget_warnings()
    yield
    pricing._forget_warnings()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own report cache (``$XDG_CACHE_HOME/spanledger/report-cache``), empty; a
    module of report tests uses it for every test with ``pytest.mark.usefixtures``."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "spanledger" / "report-cache"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


def rewrite_memo(where: Path, header: dict[str, Any], payload: bytes, *, vouch: bool) -> None:
    """Writes a remembered scan or answer back as ``header`` and ``payload``; with ``vouch``
    the header's digest is made to match the payload, as a forger would."""
    if vouch:
        header = {**header, "digest": hashlib.sha256(payload).hexdigest()}
    where.write_bytes(json.dumps(header).encode() + b"\n" + payload)


COMMON_MEMO_DAMAGE = ("garbage", "empty", "cut", "other format", "other version")


def damage_memo(where: Path, damage: str) -> None:
    """Damages a remembered scan or answer in one of the ways both kinds must notice:
    bytes that are not one, nothing, a cut end, another format or another version."""
    head, _, payload = where.read_bytes().partition(b"\n")
    header = json.loads(head)
    if damage == "garbage":
        where.write_bytes(os.urandom(300))
    elif damage == "empty":
        where.write_bytes(b"")
    elif damage == "cut":
        where.write_bytes(where.read_bytes()[:-40])
    elif damage == "other format":
        rewrite_memo(where, {**header, "format": scan_memo.FORMAT + 1}, payload, vouch=False)
    elif damage == "other version":
        rewrite_memo(where, {**header, "version": "0.0.1/duckdb-0.0.1"}, payload, vouch=False)
    else:
        raise ValueError(f"no such damage: {damage}")


LOG_CHANGES = ("append", "touch", "same size", "truncate", "rotate")


def change_log(log: Path, change: str, appended: bytes) -> None:
    """Changes a log the ways a cached report must notice: ``appended`` written at its end, a
    newer modification time, the same size with other bytes (on a clock of coarse ticks), cut
    in half, or rotated away with a new log in its place."""
    if change == "append":
        with log.open("ab") as out:
            out.write(appended)
    elif change == "touch":
        os.utime(log, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns + 1_000_000))
    elif change == "same size":
        stamp = log.stat().st_mtime_ns
        log.write_bytes(log.read_bytes().replace(b"rerank-v3.5", b"rerank-v9.9", 1))
        os.utime(log, ns=(stamp + 1_000_000, stamp + 1_000_000))
    elif change == "truncate":
        log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    elif change == "rotate":
        log.rename(log.with_name(f"{log.stem}-1{log.suffix}"))
        log.write_bytes(appended * 2)
    else:
        raise ValueError(f"no such change: {change}")
