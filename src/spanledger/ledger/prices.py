"""Price tables: per-provider, per-model rates with validity windows, from TOML, JSON or a dict.

No price ships inside the library and nothing is fetched: the caller supplies the table. Rates
are ``Decimal``. A table that cannot be trusted is refused at load, naming the file, the entry
and the field. Lookup prefers an exact model name over a glob, and a more specific glob over a
less specific one; two equally specific entries with different rates are ambiguous, and the
ledger reports such a model as unpriced rather than guessing.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from fnmatch import fnmatchcase
from os import PathLike
from pathlib import Path
from typing import Any

from spanledger.errors import ConfigurationError

__all__ = [
    "RATE_FIELDS",
    "Lookup",
    "PriceEntry",
    "PriceTable",
    "PriceTableError",
    "example_prices_path",
]

RATE_FIELDS = ("input_per_mtok", "per_search_unit", "per_request")
_ENTRY_FIELDS = frozenset(
    {"provider", "model", "currency", "valid_from", "valid_until", "checked", "note", *RATE_FIELDS}
)
_TABLE_FIELDS = frozenset({"currency", "prices"})
_GLOB_CHARS = frozenset("*?[")
_MILLION = Decimal(1_000_000)


class PriceTableError(ConfigurationError):
    """A price table that cannot be used; the message names file, entry and field."""


def _moment(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.combine(value, time.min, tzinfo=UTC)


@dataclass(frozen=True)
class PriceEntry:
    """Rates for one provider and model pattern, valid from ``valid_from`` (inclusive) until
    ``valid_until`` (exclusive). A missing rate is unknown; an explicit ``0`` is free."""

    provider: str
    model: str
    currency: str
    input_per_mtok: Decimal | None = None
    per_search_unit: Decimal | None = None
    per_request: Decimal | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    checked: date | None = None
    note: str | None = None
    label: str = field(init=False, compare=False)
    """``provider/model``, for reasons and reports."""
    per_token: Decimal | None = field(init=False, compare=False, repr=False)
    """``input_per_mtok`` divided by a million, computed once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", f"{self.provider}/{self.model}")
        rate = self.input_per_mtok
        object.__setattr__(self, "per_token", rate / _MILLION if rate is not None else None)

    @property
    def is_glob(self) -> bool:
        return any(char in _GLOB_CHARS for char in self.model)

    @property
    def specificity(self) -> int:
        """Literal characters in the pattern: more means more specific."""
        return sum(1 for char in self.model if char not in "*?")

    def rates(self) -> tuple[object, ...]:
        """What two entries must share to price a model the same way."""
        return (self.input_per_mtok, self.per_search_unit, self.per_request, self.currency)

    def matches(self, provider: str, model: str) -> bool:
        """The exact name, or else the pattern (a model may itself contain ``[`` or ``*``)."""
        if provider != self.provider:
            return False
        return model == self.model or (self.is_glob and fnmatchcase(model, self.model))

    def valid_at(self, moment: datetime) -> bool:
        if self.valid_from is not None and moment < self.valid_from:
            return False
        return self.valid_until is None or moment < self.valid_until

    def overlaps(self, other: PriceEntry) -> bool:
        start = max(self.valid_from or datetime.min.replace(tzinfo=UTC),
                    other.valid_from or datetime.min.replace(tzinfo=UTC))  # fmt: skip
        end = min(self.valid_until or datetime.max.replace(tzinfo=UTC),
                  other.valid_until or datetime.max.replace(tzinfo=UTC))  # fmt: skip
        return start < end


@dataclass(frozen=True)
class Lookup:
    """The entry that prices a model at a moment, or why there is none."""

    entry: PriceEntry | None
    ambiguous: tuple[PriceEntry, ...] = ()


@dataclass
class PriceTable:
    """A validated list of price entries."""

    entries: list[PriceEntry] = field(default_factory=list)
    currency: str = "USD"
    source: str = "<dict>"
    _matching: dict[tuple[str, str], list[PriceEntry]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _resolved: dict[tuple[str, str], Lookup] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def load(cls, path: str | PathLike[str]) -> PriceTable:
        """Read a ``.toml`` or ``.json`` table."""
        location = Path(path)
        try:
            raw = location.read_bytes()
        except OSError as error:
            raise PriceTableError(f"{location}: cannot read ({error.strerror})") from None
        try:
            if location.suffix.lower() == ".json":
                data = json.loads(raw)
            else:
                data = tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise PriceTableError(
                f"{location}: not valid {location.suffix[1:] or 'TOML'}: {error}"
            ) from None
        return cls.from_dict(data, source=str(location))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> PriceTable:
        """Build a table from the file format's shape: ``{currency, prices: [...]}``."""
        if not isinstance(data, Mapping):
            raise PriceTableError(f"{source}: the table must be an object with a 'prices' list")
        unknown = sorted(set(data) - _TABLE_FIELDS)
        if unknown:
            raise PriceTableError(f"{source}: unknown top-level field {unknown[0]!r}")
        currency = data.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            raise PriceTableError(f"{source}: field 'currency' must be a non-empty string")
        rows = data.get("prices", [])
        if not isinstance(rows, Sequence) or isinstance(rows, str):
            raise PriceTableError(f"{source}: field 'prices' must be a list of entries")
        entries = [_entry(row, i, currency, source) for i, row in enumerate(rows)]
        table = cls(entries, currency, source)
        table._check_overlaps()
        return table

    def _check_overlaps(self) -> None:
        for i, first in enumerate(self.entries):
            for j in range(i + 1, len(self.entries)):
                second = self.entries[j]
                same = (first.provider, first.model) == (second.provider, second.model)
                if same and first.overlaps(second):
                    raise PriceTableError(
                        f"{self.source}: prices[{i}] and prices[{j}] ({first.label}): "
                        "validity windows overlap"
                    )

    def lookup(self, provider: str, model: str, at: datetime) -> Lookup:
        """The entry for ``model`` at ``at``: exact name first, then the most specific glob.

        Matching is resolved once per (provider, model); a model whose entries carry no
        validity window gets its answer cached whole.
        """
        key = (provider, model)
        cached = self._resolved.get(key)
        if cached is not None:
            return cached
        matching = self._matching.get(key)
        if matching is None:
            matching = [entry for entry in self.entries if entry.matches(provider, model)]
            self._matching[key] = matching
        result = self._choose([entry for entry in matching if entry.valid_at(at)], model)
        if all(entry.valid_from is None and entry.valid_until is None for entry in matching):
            self._resolved[key] = result
        return result

    @staticmethod
    def _choose(candidates: list[PriceEntry], model: str) -> Lookup:
        if not candidates:
            return Lookup(None)
        exact = [entry for entry in candidates if entry.model == model]
        pool = exact or candidates
        best = max(entry.specificity for entry in pool)
        top = [entry for entry in pool if entry.specificity == best]
        if len({entry.rates() for entry in top}) > 1:
            return Lookup(None, tuple(top))
        return Lookup(top[0])

    def overlapping_patterns(self) -> list[tuple[PriceEntry, PriceEntry]]:
        """Pairs of entries for one provider whose patterns can match the same model name
        (an exact name inside a glob, or two globs), for ``prices check`` to report."""
        pairs = []
        for i, first in enumerate(self.entries):
            for second in self.entries[i + 1 :]:
                if first.provider != second.provider or first.model == second.model:
                    continue
                if _patterns_meet(first, second) and first.overlaps(second):
                    pairs.append((first, second))
        return pairs

    def stale(self, *, older_than: timedelta, today: date | None = None) -> list[PriceEntry]:
        """Entries whose ``checked`` date is missing or older than ``older_than``."""
        reference = today if today is not None else datetime.now(UTC).date()
        return [
            entry
            for entry in self.entries
            if entry.checked is None or reference - entry.checked > older_than
        ]


def _patterns_meet(first: PriceEntry, second: PriceEntry) -> bool:
    if not first.is_glob:
        return second.is_glob and fnmatchcase(first.model, second.model)
    if not second.is_glob:
        return fnmatchcase(second.model, first.model)
    prefix_a = first.model.split("*", 1)[0].split("?", 1)[0]
    prefix_b = second.model.split("*", 1)[0].split("?", 1)[0]
    return prefix_a.startswith(prefix_b) or prefix_b.startswith(prefix_a)


def _entry(row: object, index: int, currency: str, source: str) -> PriceEntry:
    where = f"{source}: prices[{index}]"
    if not isinstance(row, Mapping):
        raise PriceTableError(f"{where}: an entry must be a table/object")
    name = f"{row.get('provider', '?')}/{row.get('model', '?')}"
    where = f"{where} ({name})"
    unknown = sorted(set(row) - _ENTRY_FIELDS)
    if unknown:
        raise PriceTableError(f"{where}: unknown field {unknown[0]!r}")
    for required in ("provider", "model"):
        value = row.get(required)
        if not isinstance(value, str) or not value:
            raise PriceTableError(f"{where}: field {required!r} must be a non-empty string")
    rates = {key: _rate(row[key], f"{where}: field {key!r}") for key in RATE_FIELDS if key in row}
    if not rates:
        raise PriceTableError(f"{where}: no rate given (one of {', '.join(RATE_FIELDS)})")
    valid_from = _when(row.get("valid_from"), f"{where}: field 'valid_from'")
    valid_until = _when(row.get("valid_until"), f"{where}: field 'valid_until'")
    if valid_from and valid_until and valid_from >= valid_until:
        raise PriceTableError(f"{where}: field 'valid_until' must be after 'valid_from'")
    checked = row.get("checked")
    if checked is not None:
        checked = _day(checked, f"{where}: field 'checked'")
    entry_currency = row.get("currency", currency)
    if not isinstance(entry_currency, str) or not entry_currency:
        raise PriceTableError(f"{where}: field 'currency' must be a non-empty string")
    note = row.get("note")
    if note is not None and not isinstance(note, str):
        raise PriceTableError(f"{where}: field 'note' must be a string")
    return PriceEntry(
        provider=row["provider"],
        model=row["model"],
        currency=entry_currency,
        valid_from=valid_from,
        valid_until=valid_until,
        checked=checked,
        note=note,
        **rates,
    )


def _rate(value: object, where: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise PriceTableError(f"{where}: a rate must be a number or a numeric string")
    try:
        rate = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise PriceTableError(f"{where}: {value!r} is not a number") from None
    if not rate.is_finite():
        raise PriceTableError(f"{where}: a rate must be finite")
    if rate < 0:
        raise PriceTableError(f"{where}: a rate must not be negative")
    return rate


def _when(value: object, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime | date):
        return _moment(value)
    if isinstance(value, str):
        try:
            return _moment(datetime.fromisoformat(value))
        except ValueError:
            pass
    raise PriceTableError(f"{where}: expected a date (YYYY-MM-DD) or an ISO date-time")


def _day(value: object, where: str) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise PriceTableError(f"{where}: expected a date (YYYY-MM-DD)")


def example_prices_path() -> Path:
    """The example table shipped with spanledger (dated list prices, for the demo and docs)."""
    return Path(__file__).resolve().parent.parent / "data" / "example-prices.toml"
