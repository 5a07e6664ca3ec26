"""One identity per frame (a retrieved passage), and the usage report of what was served.

``FrameId`` names one frame's exact content: the provider it came from, its id there, and a
SHA-256 digest of its text. The same identity keys billing, dedup and attribution.
``token_cost`` is an accounting unit, ``ceil(utf8_bytes / 4)``, kept apart from the tokens a
provider billed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import total_ordering
from operator import attrgetter

from spanledger.estimates import token_cost

__all__ = ["FrameId", "ProviderUsage", "ServedFrame", "UsageReport", "token_cost"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COST = attrgetter("token_cost")


@total_ordering
@dataclass(frozen=True, eq=False)
class FrameId:
    """``(provider_id, frame_id, content_digest)``; ordered with a missing digest first."""

    provider_id: str
    frame_id: str
    content_digest: str | None = None
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if type(self.provider_id) is not str or type(self.frame_id) is not str:
            raise ValueError("provider_id and frame_id must be strings")
        if not self.provider_id or not self.frame_id:
            raise ValueError("a FrameId needs a provider_id and a frame_id")
        digest = self.content_digest
        if digest is not None and (type(digest) is not str or not _DIGEST.fullmatch(digest)):
            raise ValueError("content_digest must be 'sha256:' and 64 lowercase hex digits")
        identity = (self.provider_id, self.frame_id, self.content_digest)
        object.__setattr__(self, "_hash", hash(identity))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameId):
            return NotImplemented
        return self._hash == other._hash and (
            self.provider_id == other.provider_id
            and self.frame_id == other.frame_id
            and self.content_digest == other.content_digest
        )

    @classmethod
    def of(cls, provider_id: str, frame_id: str, content: str) -> FrameId:
        """The identity of ``content`` as served by ``provider_id`` under ``frame_id``."""
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
        return cls(provider_id, frame_id, f"sha256:{digest}")

    def _key(self) -> tuple[str, str, bool, str]:
        return (
            self.provider_id,
            self.frame_id,
            self.content_digest is not None,
            self.content_digest or "",
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, FrameId):
            return NotImplemented
        return self._key() < other._key()

    def __str__(self) -> str:
        return f"{self.provider_id}/{self.frame_id}"


@dataclass(frozen=True)
class ServedFrame:
    """A frame a provider served for a request, with its accounting cost."""

    frame: FrameId
    token_cost: int

    def __post_init__(self) -> None:
        if type(self.token_cost) is not int or self.token_cost < 0:
            raise ValueError("token_cost must be a non-negative integer")

    @classmethod
    def of(cls, provider_id: str, frame_id: str, content: str) -> ServedFrame:
        """``content`` served under its identity, with its accounting cost in tokens."""
        return cls(FrameId.of(provider_id, frame_id, content), token_cost(content))


@dataclass(frozen=True)
class ProviderUsage:
    """One provider's line of a usage report."""

    provider_id: str
    frames_served: int
    frames_rejected: int
    token_cost: int
    served_frames: tuple[ServedFrame, ...] = ()

    @classmethod
    def of(
        cls, provider_id: str, served: Iterable[ServedFrame], rejected: int = 0
    ) -> ProviderUsage:
        """One provider's line: the frames it served (and how many it rejected), summed."""
        frames = tuple(served)
        return cls(provider_id, len(frames), rejected, sum(f.token_cost for f in frames), frames)

    def is_consistent(self) -> bool:
        """The counts and the cost re-sum from the line items."""
        return self.frames_served == len(self.served_frames) and self.token_cost == sum(
            map(_COST, self.served_frames)
        )


@dataclass(frozen=True)
class UsageReport:
    """What a request consumed, by provider, stamped with when the accounting was done."""

    budget_requested: int | None
    budget_consumed: int
    as_of: datetime
    providers: tuple[ProviderUsage, ...] = field(default=())

    @classmethod
    def of(
        cls,
        providers: Iterable[ProviderUsage],
        *,
        as_of: datetime,
        budget_requested: int | None = None,
    ) -> UsageReport:
        """A report over these provider lines, its consumption their summed cost."""
        rows = tuple(providers)
        return cls(budget_requested, sum(row.token_cost for row in rows), as_of, rows)

    def is_consistent(self) -> bool:
        """``budget_consumed`` equals the providers' costs, and every provider line re-sums."""
        return self.budget_consumed == sum(row.token_cost for row in self.providers) and all(
            row.is_consistent() for row in self.providers
        )

    def within_budget(self) -> bool | None:
        """Whether consumption stayed within the requested budget (``None``: no budget set)."""
        if self.budget_requested is None:
            return None
        return self.budget_consumed <= self.budget_requested

    def served_frames(self) -> Iterable[ServedFrame]:
        """Every frame served, provider by provider."""
        for row in self.providers:
            yield from row.served_frames
