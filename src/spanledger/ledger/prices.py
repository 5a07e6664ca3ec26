"""Price tables: per-provider, per-model rates with validity windows, from TOML, JSON or a dict.

No price ships inside the library and nothing is fetched: the caller supplies the table. Rates
are ``Decimal``. A table that cannot be trusted is refused at load, naming the file, the entry
and the field. Lookup prefers an exact model name over a glob, and a more specific glob over a
less specific one; two equally specific entries with different rates are ambiguous, and the
ledger reports such a model as unpriced rather than guessing.

Every value is bounded (see ``MAX_RATE``): a table is configuration, and configuration that no
real price list could hold is refused with a sentence, never carried into the arithmetic.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from fnmatch import fnmatchcase
from os import PathLike
from pathlib import Path
from typing import Any

from spanledger._logs import get_logger
from spanledger.errors import ConfigurationError
from spanledger.ledger.currencies import is_currency
from spanledger.provider_ids import PROVIDER_IDS, nearest

__all__ = [
    "LOOKUP_CACHE_SIZE",
    "MAX_RATE",
    "MAX_RATE_DIGITS",
    "MAX_RATE_PLACES",
    "RATE_FIELDS",
    "Lookup",
    "PriceEntry",
    "PriceTable",
    "PriceTableError",
    "example_prices_path",
]

RATE_FIELDS = (
    "input_per_mtok",
    "input_per_kchar",
    "per_search_unit",
    "per_request",
    "per_compute_second",
)
_ENTRY_FIELDS = frozenset(
    {"provider", "model", "currency", "valid_from", "valid_until", "checked", "note", *RATE_FIELDS}
)
_TABLE_FIELDS = frozenset({"currency", "prices", "custom_providers"})
_GLOB_CHARS = frozenset("*?[")
_MILLION = Decimal(1_000_000)
_THOUSAND = Decimal(1_000)
_CURRENCY = re.compile(r"[A-Z]{3}")
_UNREAD_FORMATS = {".yaml": "YAML", ".yml": "YAML"}
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_log = get_logger("spanledger.ledger")

MAX_RATE = Decimal(1_000_000)
"""The largest rate accepted, per million tokens, per 1,000 characters, per search unit, per
request or per second of compute.

Real list prices are cents to a few dollars; a rate a million times the dearest one is a typo
or hostile input. With ``MAX_RATE_DIGITS`` and ``MAX_RATE_PLACES`` it keeps a rate, its
per-token form and its products with real counts far inside ``Decimal``'s default context,
where an absurd value would otherwise overflow (``1e999999999``) or round to zero while
pricing, long after the table was loaded."""
MAX_RATE_DIGITS = 20
"""Significant digits a rate may have (trailing zeros aside): list prices use a handful."""
MAX_RATE_PLACES = 24
"""Decimal places a rate may have: the smallest step is 10**-24 of the currency unit."""
FLOAT_DIGITS = 17
"""Significant digits a rate written as a plain (unquoted) number may have: a float holds only
15 to 17 exactly, so a longer one must be quoted as a string to be read as written."""
LOOKUP_CACHE_SIZE = 4096
"""Distinct (provider, model) pairs whose lookup a table remembers. When the cache is full it
is emptied and starts again: the few models a deployment uses re-resolve at once, and a flood
of caller-chosen model names costs at most this many entries of memory."""


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
    per_compute_second: Decimal | None = None
    """A rate for your own compute: per second of a call's ``latency_ms`` (a local model)."""
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    checked: date | None = None
    note: str | None = None
    input_per_kchar: Decimal | None = None
    """A rate per 1,000 input characters the provider reports billing (Vertex AI's
    ``billableCharacterCount``): an entry with it bills characters, and records tokens."""
    label: str = field(init=False, compare=False)
    """``provider/model``, for reasons and reports."""
    per_token: Decimal | None = field(init=False, compare=False, repr=False)
    """``input_per_mtok`` divided by a million, computed once."""
    per_character: Decimal | None = field(init=False, compare=False, repr=False)
    """``input_per_kchar`` divided by a thousand, computed once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "label", f"{self.provider}/{self.model}")
        rate = self.input_per_mtok
        object.__setattr__(self, "per_token", rate / _MILLION if rate is not None else None)
        kchar = self.input_per_kchar
        object.__setattr__(self, "per_character", kchar / _THOUSAND if kchar is not None else None)

    @property
    def is_glob(self) -> bool:
        return any(char in _GLOB_CHARS for char in self.model)

    @property
    def specificity(self) -> int:
        """Literal characters in the pattern: more means more specific."""
        return sum(1 for char in self.model if char not in "*?")

    def rates(self) -> tuple[object, ...]:
        """What two entries must share to price a model the same way."""
        return (
            self.input_per_mtok,
            self.input_per_kchar,
            self.per_search_unit,
            self.per_request,
            self.per_compute_second,
            self.currency,
        )

    def matches(self, provider: str, model: str) -> bool:
        """The exact name, or else the pattern (a model may itself contain ``[`` or ``*``)."""
        if provider != self.provider:
            return False
        return model == self.model or (self.is_glob and fnmatchcase(model, self.model))

    def valid_at(self, moment: datetime) -> bool:
        """Whether the entry applies at ``moment``: ``valid_from`` inclusive, ``valid_until``
        exclusive, an open end when either is unset."""
        if self.valid_from is not None and moment < self.valid_from:
            return False
        return self.valid_until is None or moment < self.valid_until

    def overlaps(self, other: PriceEntry) -> bool:
        """Whether the two entries' validity windows share a moment."""
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


@dataclass(frozen=True)
class _Resolution:
    """The entries matching one (provider, model), and the lookup itself when none of them has
    a validity window (then the answer is the same at every moment)."""

    matching: tuple[PriceEntry, ...]
    timeless: Lookup | None


@dataclass
class PriceTable:
    """A validated list of price entries."""

    entries: list[PriceEntry] = field(default_factory=list)
    currency: str = "USD"
    source: str = "<dict>"
    _resolutions: dict[tuple[str, str], _Resolution] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def load(cls, path: str | PathLike[str]) -> PriceTable:
        """Read a ``.json`` table, or a TOML one (any other suffix but YAML's, which is
        refused by name rather than misread as TOML)."""
        location = Path(path)
        try:
            raw = location.read_bytes()
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise PriceTableError(f"{location}: cannot read ({reason})") from None
        except ValueError:
            raise PriceTableError(f"{location}: cannot read (not a usable path)") from None
        suffix = location.suffix.lower()
        if suffix in _UNREAD_FORMATS:
            raise PriceTableError(
                f"{location}: {_UNREAD_FORMATS[suffix]} is not a price-table format; write the "
                "table as TOML (.toml) or JSON (.json), as `spanledger prices example` shows"
            )
        return cls.from_dict(_parse(raw, suffix == ".json", location), source=str(location))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> PriceTable:
        """Build a table from the file format's shape: ``{currency, prices: [...]}``."""
        if not isinstance(data, Mapping):
            raise PriceTableError(f"{source}: the table must be an object with a 'prices' list")
        unknown = sorted(str(key) for key in set(data) - _TABLE_FIELDS)
        if unknown:
            raise PriceTableError(f"{source}: unknown top-level field {brief_repr(unknown[0])}")
        currency = _currency(data.get("currency", "USD"), f"{source}: field 'currency'")
        rows = data.get("prices", [])
        if not isinstance(rows, Sequence) or isinstance(rows, str):
            raise PriceTableError(f"{source}: field 'prices' must be a list of entries")
        entries = [_entry(row, i, currency, source) for i, row in enumerate(rows)]
        custom = _custom_providers(data.get("custom_providers", []), source)
        _check_providers(entries, custom, source)
        table = cls(entries, currency, source)
        table._check_overlaps()
        if not entries:
            _log.warning(
                "price_table_empty",
                source=source,
                reason="the table has no entries, so no call will be priced",
            )
        return table

    def _check_overlaps(self) -> None:
        """Entries for the same provider and pattern must not share a moment (compared within
        each pattern only, so a long table loads in linear time)."""
        positions: dict[tuple[str, str], list[int]] = {}
        for index, entry in enumerate(self.entries):
            positions.setdefault((entry.provider, entry.model), []).append(index)
        for indices in positions.values():
            for n, i in enumerate(indices):
                for j in indices[n + 1 :]:
                    if self.entries[i].overlaps(self.entries[j]):
                        raise PriceTableError(
                            f"{self.source}: prices[{i}] and prices[{j}] "
                            f"({self.entries[i].label}): validity windows overlap"
                        )

    def boundaries(self) -> tuple[datetime, ...]:
        """Every moment an entry starts or stops being valid, in order: between two of them,
        each (provider, model) looks up the same entry."""
        moments = {
            moment
            for entry in self.entries
            for moment in (entry.valid_from, entry.valid_until)
            if moment is not None
        }
        return tuple(sorted(moments))

    def lookup(self, provider: str, model: str, at: datetime) -> Lookup:
        """The entry for ``model`` at ``at``: exact name first, then the most specific glob.

        Matching is resolved once per (provider, model) and remembered in a bounded cache
        (``LOOKUP_CACHE_SIZE``); a model whose entries carry no validity window gets its
        answer remembered whole.
        """
        key = (provider, model)
        resolution = self._resolutions.get(key)
        if resolution is None:
            resolution = self._resolve(provider, model)
            if len(self._resolutions) >= LOOKUP_CACHE_SIZE:
                self._resolutions.clear()
            self._resolutions[key] = resolution
        if resolution.timeless is not None:
            return resolution.timeless
        return self._choose([entry for entry in resolution.matching if entry.valid_at(at)], model)

    @property
    def cached_lookups(self) -> int:
        """How many (provider, model) lookups are remembered (at most ``LOOKUP_CACHE_SIZE``)."""
        return len(self._resolutions)

    def _resolve(self, provider: str, model: str) -> _Resolution:
        matching = tuple(entry for entry in self.entries if entry.matches(provider, model))
        timeless = all(entry.valid_from is None and entry.valid_until is None for entry in matching)
        return _Resolution(matching, self._choose(list(matching), model) if timeless else None)

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


def _custom_providers(value: object, source: str) -> frozenset[str]:
    """The providers of the user's own a table declares (``custom_providers``)."""
    where = f"{source}: field 'custom_providers'"
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise PriceTableError(f"{where} must be a list of provider names")
    for name in value:
        if not isinstance(name, str) or not name:
            raise PriceTableError(f"{where} must be a list of non-empty strings")
        if name in PROVIDER_IDS:
            raise PriceTableError(
                f"{where}: {name!r} is a provider spanledger records already; leave it out"
            )
    return frozenset(value)


def _check_providers(entries: Sequence[PriceEntry], custom: frozenset[str], source: str) -> None:
    """Refuse an entry whose provider is none an event carries (a misspelling prices nothing,
    silently), naming the id it was probably meant to be; declared providers pass."""
    unknown = [
        (index, entry)
        for index, entry in enumerate(entries)
        if entry.provider not in PROVIDER_IDS and entry.provider not in custom
    ]
    if not unknown:
        return
    index, entry = unknown[0]
    meant = nearest(entry.provider)
    hint = f"Did you mean {meant!r}? " if meant is not None else ""
    others = len({e.provider for _, e in unknown} - {entry.provider})
    more = f" ({others} other unknown provider{'s' if others != 1 else ''} too)" if others else ""
    raise PriceTableError(
        f"{source}: prices[{index}] ({entry.label}): provider {entry.provider!r} is not one "
        f"spanledger records, so the entry would price nothing{more}. {hint}A provider of "
        "your own (events you record under that name) goes in the table's custom_providers list."
    )


def _entry(row: object, index: int, currency: str, source: str) -> PriceEntry:
    where = f"{source}: prices[{index}]"
    if not isinstance(row, Mapping):
        raise PriceTableError(f"{where}: an entry must be a table/object")
    where = f"{where} ({_name_part(row.get('provider'))}/{_name_part(row.get('model'))})"
    unknown = sorted(str(key) for key in set(row) - _ENTRY_FIELDS)
    if unknown:
        raise PriceTableError(f"{where}: unknown field {brief_repr(unknown[0])}")
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
    entry_currency = _currency(row.get("currency", currency), f"{where}: field 'currency'")
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


class _WrittenFloat(float):
    """A plain number read from a table file, with the text it was written as."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> _WrittenFloat:
        number = super().__new__(cls, text)
        number.text = text
        return number


def _rate(value: object, where: str) -> Decimal:
    """A finite, non-negative rate within ``MAX_RATE``, ``MAX_RATE_DIGITS`` and
    ``MAX_RATE_PLACES``, read exactly (a float through its shortest decimal form; one written
    in a file as a plain number with more than ``FLOAT_DIGITS`` digits is refused)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise PriceTableError(f"{where}: a rate must be a number or a numeric string")
    if isinstance(value, _WrittenFloat):
        _check_float_digits(value.text, where)
    if isinstance(value, int) and abs(value) > MAX_RATE:
        raise PriceTableError(f"{where}: a rate must be at most {MAX_RATE:,}")
    try:
        rate = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
    except InvalidOperation:
        raise PriceTableError(f"{where}: {brief_repr(value)} is not a number") from None
    if not rate.is_finite():
        raise PriceTableError(f"{where}: a rate must be finite")
    if rate < 0:
        raise PriceTableError(f"{where}: a rate must not be negative")
    if rate > MAX_RATE:
        raise PriceTableError(f"{where}: a rate must be at most {MAX_RATE:,}")
    if rate.is_zero():
        return Decimal(0)
    digits, places = _digits_and_places(rate)
    if digits > MAX_RATE_DIGITS:
        raise PriceTableError(
            f"{where}: a rate may have at most {MAX_RATE_DIGITS} significant digits, not {digits}"
        )
    if places > MAX_RATE_PLACES:
        raise PriceTableError(
            f"{where}: a rate may have at most {MAX_RATE_PLACES} decimal places, not {places}"
        )
    return rate


def _check_float_digits(text: str, where: str) -> None:
    """Refuse a plain number written with more significant digits than a float holds."""
    try:
        written = Decimal(text.strip())
    except InvalidOperation:
        return
    if not written.is_finite() or written.is_zero():
        return
    digits, _ = _digits_and_places(written)
    if digits > MAX_RATE_DIGITS:
        raise PriceTableError(
            f"{where}: a rate may have at most {MAX_RATE_DIGITS} significant digits, not {digits}"
        )
    if digits > FLOAT_DIGITS:
        shown = text.strip() if len(text.strip()) <= 40 else f"{text.strip()[:37]}..."
        raise PriceTableError(
            f"{where}: {shown} has {digits} significant digits, more than a plain number keeps "
            f'(a float is exact to only about 15-17); quote it as a string ("{shown}") to keep '
            "every digit"
        )


def _digits_and_places(rate: Decimal) -> tuple[int, int]:
    """Significant digits and decimal places of a finite non-zero rate, trailing zeros aside."""
    _, digits, exponent = rate.as_tuple()
    text = "".join(map(str, digits)).rstrip("0")
    trailing = len(digits) - len(text)
    power = exponent if isinstance(exponent, int) else 0
    return len(text.lstrip("0")), max(0, -(power + trailing))


def _currency(value: object, where: str) -> str:
    """An ISO 4217 code: three capital ASCII letters (``USD``, ``EUR``) on the ISO list."""
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        raise PriceTableError(
            f"{where} must be an ISO 4217 currency code (three capital letters such as 'USD'), "
            f"not {brief_repr(value)}"
        )
    if not is_currency(value):
        raise PriceTableError(
            f"{where} must be an ISO 4217 currency code such as 'USD' or 'EUR'; "
            f"{value!r} is not on the ISO 4217 list"
        )
    return value


def _name_part(value: object) -> str:
    """A provider or model name for a message: the string itself (shortened), else ``?``."""
    if not isinstance(value, str) or not value:
        return "?"
    return value if len(value) <= 60 else value[:57] + "..."


def brief_repr(value: object, limit: int = 40) -> str:
    """A short ``repr`` for an error message, so an error never dumps a file's content (not for
    secrets, which are never shown at all)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parse(raw: bytes, is_json: bool, location: Path) -> Any:
    """The document in ``raw``, or a ``PriceTableError`` naming the file (and the line, when
    the parser gives one) without quoting the content."""
    kind = "JSON" if is_json else "TOML"
    try:
        if is_json:
            return json.loads(raw, parse_float=_WrittenFloat)
        return tomllib.loads(raw.decode("utf-8"), parse_float=_WrittenFloat)
    except RecursionError:
        reason = "it is nested too deeply for a price table"
    except UnicodeDecodeError as error:
        reason = f"it is not UTF-8 text (bad byte at offset {error.start})"
    except json.JSONDecodeError as error:
        reason = f"{error.msg.lower()} at line {error.lineno}, column {error.colno}"
    except tomllib.TOMLDecodeError as error:
        reason = _toml_reason(str(error))
    except ValueError:
        reason = "a value in it cannot be read"
    raise PriceTableError(f"{location}: not valid {kind}: {reason}")


def _toml_reason(message: str) -> str:
    """``tomllib``'s message with its position moved to the end, in our words."""
    position = _TOML_POSITION.search(message)
    if position is None:
        return message[:80]
    what = message[: position.start()][:80]
    return f"{what[:1].lower()}{what[1:]} at line {position[1]}, column {position[2]}"


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
