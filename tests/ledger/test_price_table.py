"""Price tables: loading (TOML, JSON, dict), Decimal rates, validity windows, refusal of bad
tables with file/entry/field named, and lookup precedence."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spanledger.events import EmbeddingUsage
from spanledger.ledger import Ledger, PriceTable, PriceTableError, price_usage

from .conftest import EXAMPLE_PRICES, WHEN, entry, table

TOML_TABLE = """
currency = "EUR"

[[prices]]
provider = "openai"
model = "text-embedding-3-small"
input_per_mtok = "0.02"
checked = 2025-05-01

[[prices]]
provider = "cohere"
model = "rerank-*"
per_search_unit = 0.002
per_request = 1
currency = "USD"
valid_from = 2025-01-01
valid_until = 2026-01-01
note = "glob"
"""

JSON_TABLE = {
    "currency": "EUR",
    "prices": [
        {
            "provider": "openai",
            "model": "text-embedding-3-small",
            "input_per_mtok": "0.02",
            "checked": "2025-05-01",
        },
        {
            "provider": "cohere",
            "model": "rerank-*",
            "per_search_unit": 0.002,
            "per_request": 1,
            "currency": "USD",
            "valid_from": "2025-01-01",
            "valid_until": "2026-01-01",
            "note": "glob",
        },
    ],
}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _json_file(tmp_path: Path, data: Any, name: str = "prices.json") -> Path:
    return _write(tmp_path, name, json.dumps(data))


# --------------------------------------------------------------------------- loading


def test_toml_json_and_dict_of_the_same_shape_load_the_same_entries(tmp_path: Path) -> None:
    from_toml = PriceTable.load(_write(tmp_path, "prices.toml", TOML_TABLE))
    from_json = PriceTable.load(_json_file(tmp_path, JSON_TABLE))
    from_dict = PriceTable.from_dict(JSON_TABLE)

    assert from_toml.entries == from_json.entries == from_dict.entries
    assert from_toml.currency == from_json.currency == from_dict.currency == "EUR"
    assert from_toml.source.endswith("prices.toml")
    assert from_json.source.endswith("prices.json")

    openai, cohere = from_toml.entries
    assert (openai.provider, openai.model) == ("openai", "text-embedding-3-small")
    assert openai.currency == "EUR"  # the table's currency
    assert cohere.currency == "USD"  # an entry's own currency wins
    assert openai.checked == date(2025, 5, 1)
    assert cohere.valid_from == datetime(2025, 1, 1, tzinfo=UTC)
    assert cohere.valid_until == datetime(2026, 1, 1, tzinfo=UTC)
    assert cohere.note == "glob"
    assert cohere.is_glob
    assert not openai.is_glob


def test_currency_defaults_to_usd() -> None:
    loaded = PriceTable.from_dict(
        {"prices": [entry("p", "m", per_request="1")], "custom_providers": ["p"]}
    )
    assert loaded.currency == "USD"
    assert loaded.entries[0].currency == "USD"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0.1", Decimal("0.1")),
        (0.1, Decimal("0.1")),
        ("0.0000001234567", Decimal("0.0000001234567")),
        (1.1, Decimal("1.1")),
        (3, Decimal(3)),
        ("0", Decimal(0)),
        (0, Decimal(0)),
        ("12.50", Decimal("12.50")),
    ],
)
def test_rates_read_as_exact_decimals(raw: object, expected: Decimal) -> None:
    loaded = table(entry("p", "m", input_per_mtok=raw))
    rate = loaded.entries[0].input_per_mtok
    assert type(rate) is Decimal
    assert rate == expected
    if isinstance(raw, float):
        assert rate != Decimal.from_float(raw), "a float must not keep its binary expansion"


def test_json_float_rates_become_their_short_decimal(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "floats.json",
        '{"custom_providers": ["p"], "prices": [{"provider": "p", "model": "m",'
        ' "input_per_mtok": 0.1, "per_search_unit": 0.0000001234567, "per_request": 2.675}]}',
    )
    rates = PriceTable.load(path).entries[0]
    assert rates.input_per_mtok == Decimal("0.1")
    assert rates.input_per_mtok != Decimal.from_float(0.1)
    assert rates.per_search_unit == Decimal("0.0000001234567")
    assert rates.per_request == Decimal("2.675")
    assert all(
        type(rate) is Decimal
        for rate in (rates.input_per_mtok, rates.per_search_unit, rates.per_request)
    )


def test_toml_float_and_string_rates_are_decimal(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "floats.toml",
        'custom_providers = ["p"]\n[[prices]]\nprovider = "p"\nmodel = "m"\ninput_per_mtok = 0.1\n'
        'per_search_unit = "0.1"\nper_request = 7\n',
    )
    rates = PriceTable.load(path).entries[0]
    assert rates.input_per_mtok == rates.per_search_unit == Decimal("0.1")
    assert rates.per_request == Decimal(7)
    assert type(rates.input_per_mtok) is Decimal


def test_uppercase_json_suffix_is_read_as_json(tmp_path: Path) -> None:
    path = _json_file(
        tmp_path,
        {"prices": [entry("p", "m", per_request="0.5")], "custom_providers": ["p"]},
        "P.JSON",
    )
    assert PriceTable.load(path).entries[0].per_request == Decimal("0.5")


def test_example_table_loads() -> None:
    example = PriceTable.load(EXAMPLE_PRICES)
    labels = {item.label for item in example.entries}
    assert "cohere/rerank-v3.5" in labels
    assert "tei/*" in labels
    tei = next(item for item in example.entries if item.provider == "tei")
    assert tei.per_request == Decimal(0)
    assert all(item.checked is not None for item in example.entries)


# --------------------------------------------------------------------------- validity windows


def _windowed() -> PriceTable:
    return table(
        entry("openai", "m", input_per_mtok="1", valid_until="2025-03-15"),
        entry("openai", "m", input_per_mtok="2", valid_from="2025-03-15", valid_until="2025-04-01"),
        entry("openai", "m", input_per_mtok="3", valid_from="2025-04-01T00:00:00+00:00"),
    )


@pytest.mark.parametrize(
    ("moment", "rate"),
    [
        (datetime(2025, 3, 1, tzinfo=UTC), "1"),
        (datetime(2025, 3, 14, 23, 59, 59, 999999, tzinfo=UTC), "1"),
        (datetime(2025, 3, 15, tzinfo=UTC), "2"),  # valid_from is inclusive
        (datetime(2025, 3, 31, 23, 59, tzinfo=UTC), "2"),
        (datetime(2025, 4, 1, tzinfo=UTC), "3"),  # valid_until is exclusive
        # 00:30 at +02:00 is still the 14th in UTC
        (datetime(2025, 3, 15, 0, 30, tzinfo=timezone(timedelta(hours=2))), "1"),
        (datetime(2025, 3, 14, 23, 30, tzinfo=timezone(timedelta(hours=-2))), "2"),
    ],
)
def test_a_price_change_applies_by_the_moment(moment: datetime, rate: str) -> None:
    found = _windowed().lookup("openai", "m", moment)
    assert found.entry is not None
    assert found.entry.input_per_mtok == Decimal(rate)


def test_no_entry_outside_every_window() -> None:
    only_march = table(
        entry("p", "m", per_request="1", valid_from="2025-03-01", valid_until="2025-04-01")
    )
    assert only_march.lookup("p", "m", datetime(2025, 2, 28, tzinfo=UTC)).entry is None
    assert only_march.lookup("p", "m", datetime(2025, 4, 1, tzinfo=UTC)).entry is None
    assert only_march.lookup("p", "m", datetime(2025, 3, 1, tzinfo=UTC)).entry is not None


def test_adjacent_windows_do_not_overlap() -> None:
    assert len(_windowed().entries) == 3


# --------------------------------------------------------------------------- refusals


BAD_ENTRIES: list[tuple[str, dict[str, Any], str]] = [
    ("negative", entry("p", "m", input_per_mtok="-0.5"), "input_per_mtok"),
    ("negative-number", entry("p", "m", per_search_unit=-1), "per_search_unit"),
    ("tiny-negative", entry("p", "m", per_request="-1e-12"), "per_request"),
    ("abc", entry("p", "m", input_per_mtok="abc"), "input_per_mtok"),
    ("empty-string", entry("p", "m", input_per_mtok=""), "input_per_mtok"),
    ("bool", entry("p", "m", per_request=True), "per_request"),
    ("list", entry("p", "m", per_search_unit=[1]), "per_search_unit"),
    ("object", entry("p", "m", per_search_unit={"usd": 1}), "per_search_unit"),
    ("null", entry("p", "m", per_request=None), "per_request"),
    ("nan-float", entry("p", "m", input_per_mtok=math.nan), "input_per_mtok"),
    ("nan-string", entry("p", "m", input_per_mtok="NaN"), "input_per_mtok"),
    ("inf-float", entry("p", "m", input_per_mtok=math.inf), "input_per_mtok"),
    ("infinity-string", entry("p", "m", per_request="Infinity"), "per_request"),
    ("minus-infinity", entry("p", "m", per_request="-Infinity"), "per_request"),
    ("unknown-field", entry("p", "m", input_per_ktok="1"), "input_per_ktok"),
    ("no-rate", entry("p", "m", note="forgot the rate"), "input_per_mtok"),
    (
        "until-equals-from",
        entry("p", "m", per_request="1", valid_from="2025-03-01", valid_until="2025-03-01"),
        "valid_until",
    ),
    (
        "until-before-from",
        entry("p", "m", per_request="1", valid_from="2025-03-02", valid_until="2025-03-01"),
        "valid_until",
    ),
    ("bad-date", entry("p", "m", per_request="1", valid_from="soon"), "valid_from"),
    ("bad-checked", entry("p", "m", per_request="1", checked="last week"), "checked"),
    ("overflowing", entry("p", "m", per_request="1e999999999"), "per_request"),
    ("underflowing", entry("p", "m", per_request="1e-999999999"), "per_request"),
    ("above-the-bound", entry("p", "m", input_per_mtok="1000000.000001"), "input_per_mtok"),
    ("huge-integer", entry("p", "m", per_search_unit=10**400), "per_search_unit"),
    ("huge-float", entry("p", "m", per_request=1e308), "per_request"),
    ("400-digits", entry("p", "m", input_per_mtok="0." + "1" * 400), "input_per_mtok"),
    ("21-digits", entry("p", "m", input_per_mtok="1.00000000000000000001"), "input_per_mtok"),
    ("25-places", entry("p", "m", per_request="1e-25"), "per_request"),
    ("currency-words", entry("p", "m", per_request="1", currency="US DOLLAR$"), "currency"),
    ("currency-lowercase", entry("p", "m", per_request="1", currency="usd"), "currency"),
    ("currency-number", entry("p", "m", per_request="1", currency=840), "currency"),
    ("currency-empty", entry("p", "m", per_request="1", currency=""), "currency"),
    ("currency-non-ascii", entry("p", "m", per_request="1", currency="ÉUR"), "currency"),
]


@pytest.mark.parametrize(
    ("bad", "field"),
    [(bad, field) for _, bad, field in BAD_ENTRIES],
    ids=[i for i, *_ in BAD_ENTRIES],
)
def test_bad_entry_is_refused_naming_file_entry_and_field(
    tmp_path: Path, bad: dict[str, Any], field: str
) -> None:
    path = _json_file(tmp_path, {"prices": [entry("ok", "fine", per_request="1"), bad]})
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "prices[1]" in message
    assert "p/m" in message
    assert field in message


@pytest.mark.parametrize("missing", ["provider", "model"])
@pytest.mark.parametrize("how", ["absent", "empty", "not-a-string"])
def test_missing_provider_or_model_is_refused(tmp_path: Path, missing: str, how: str) -> None:
    row: dict[str, Any] = entry("p", "m", per_request="1")
    if how == "absent":
        del row[missing]
    else:
        row[missing] = "" if how == "empty" else 42
    path = _json_file(tmp_path, {"prices": [row]})
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "prices[0]" in message
    assert repr(missing) in message
    # the entry is still named by what it does have
    assert ("/m)" if missing == "provider" else "(p/") in message


@pytest.mark.parametrize(
    ("literal", "field"),
    [("nan", "input_per_mtok"), ("inf", "input_per_mtok"), ("-inf", "input_per_mtok")],
)
def test_toml_nan_and_infinity_are_refused(tmp_path: Path, literal: str, field: str) -> None:
    path = _write(
        tmp_path,
        "nan.toml",
        f'[[prices]]\nprovider = "p"\nmodel = "m"\n{field} = {literal}\n',
    )
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "prices[0]" in message
    assert "p/m" in message
    assert field in message


def test_json_nan_literal_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "nan.json", '{"prices": [{"provider": "p", "model": "m", "per_request": NaN}]}'
    )
    with pytest.raises(PriceTableError, match="per_request") as caught:
        PriceTable.load(path)
    assert str(path) in str(caught.value)
    assert "prices[0] (p/m)" in str(caught.value)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({}, {}),
        ({"valid_until": "2025-03-15"}, {"valid_from": "2025-03-14"}),
        ({"valid_from": "2025-01-01", "valid_until": "2025-06-01"}, {"valid_from": "2025-05-31"}),
        ({"valid_from": "2025-03-01"}, {"valid_until": "2025-03-02"}),
        (
            {"valid_from": "2025-03-01", "valid_until": "2025-04-01"},
            {"valid_from": "2025-03-10", "valid_until": "2025-03-20"},
        ),
    ],
)
def test_overlapping_windows_for_one_pattern_are_refused(
    tmp_path: Path, first: dict[str, str], second: dict[str, str]
) -> None:
    path = _json_file(
        tmp_path,
        {
            "prices": [
                entry("jina", "x", per_request="1"),
                entry("openai", "text-*", input_per_mtok="1", **first),
                entry("openai", "text-*", input_per_mtok="2", **second),
            ]
        },
    )
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "prices[1]" in message
    assert "prices[2]" in message
    assert "openai/text-*" in message


def test_same_pattern_for_other_providers_is_not_an_overlap() -> None:
    loaded = table(entry("a", "m", per_request="1"), entry("b", "m", per_request="2"))
    assert len(loaded.entries) == 2


def test_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(missing)
    assert str(missing) in str(caught.value)
    with pytest.raises(PriceTableError) as as_directory:
        PriceTable.load(tmp_path)
    assert str(tmp_path) in str(as_directory.value)


def test_invalid_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.toml", '[[prices]]\nprovider = "p\nmodel = "m"\n')
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    assert str(path) in str(caught.value)
    assert "TOML" in str(caught.value).upper()


@pytest.mark.parametrize("name", ["prices.yaml", "prices.YML"])
def test_a_yaml_table_is_refused_as_yaml_not_misread_as_toml(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, "currency: USD\nprices:\n  - provider: openai\n")
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: YAML is not a price-table format;")
    assert "TOML (.toml) or JSON (.json)" in message
    assert "not valid TOML" not in message


def test_invalid_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "broken.json", '{"prices": [')
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    assert str(path) in str(caught.value)


def test_from_dict_errors_name_the_given_source() -> None:
    with pytest.raises(PriceTableError) as caught:
        PriceTable.from_dict(
            {"prices": [entry("p", "m", input_per_mtok="-1")]}, source="inline-table"
        )
    assert "inline-table" in str(caught.value)
    assert "prices[0] (p/m)" in str(caught.value)
    assert "input_per_mtok" in str(caught.value)


def test_unknown_top_level_field_is_refused() -> None:
    with pytest.raises(PriceTableError, match="pricez"):
        PriceTable.from_dict({"pricez": []})


# --------------------------------------------------------------------------- lookup precedence


def test_exact_name_wins_over_a_glob() -> None:
    prices = table(
        entry("openai", "text-embedding-3-*", input_per_mtok="9"),
        entry("openai", "text-embedding-3-small", input_per_mtok="1"),
        entry("openai", "*", input_per_mtok="99"),
    )
    found = prices.lookup("openai", "text-embedding-3-small", datetime(2025, 1, 1, tzinfo=UTC))
    assert found.entry is not None
    assert found.entry.input_per_mtok == Decimal(1)
    assert found.ambiguous == ()


def test_more_specific_glob_wins() -> None:
    prices = table(
        entry("cohere", "*", per_search_unit="3"),
        entry("cohere", "rerank-*", per_search_unit="2"),
        entry("cohere", "rerank-v3*", per_search_unit="1"),
    )
    at = datetime(2025, 1, 1, tzinfo=UTC)
    best = prices.lookup("cohere", "rerank-v3.5", at).entry
    assert best is not None
    assert best.per_search_unit == Decimal(1)
    middle = prices.lookup("cohere", "rerank-english-v2.0", at).entry
    assert middle is not None
    assert middle.per_search_unit == Decimal(2)
    fallback = prices.lookup("cohere", "embed-v4.0", at).entry
    assert fallback is not None
    assert fallback.per_search_unit == Decimal(3)


def test_glob_does_not_match_other_providers() -> None:
    prices = table(entry("cohere", "*", per_request="1"))
    assert prices.lookup("jina", "anything", datetime(2025, 1, 1, tzinfo=UTC)).entry is None


def test_equally_specific_globs_with_different_rates_are_ambiguous() -> None:
    prices = table(
        entry("jina", "abc-*", input_per_mtok="1"),
        entry("jina", "*-xyz", input_per_mtok="2"),
    )
    found = prices.lookup("jina", "abc-xyz", datetime(2025, 1, 1, tzinfo=UTC))
    assert found.entry is None
    assert {item.model for item in found.ambiguous} == {"abc-*", "*-xyz"}


def test_equally_specific_globs_with_equal_rates_are_not_ambiguous() -> None:
    prices = table(
        entry("jina", "abc-*", input_per_mtok="1.0"),
        entry("jina", "*-xyz", input_per_mtok="1"),
    )
    found = prices.lookup("jina", "abc-xyz", datetime(2025, 1, 1, tzinfo=UTC))
    assert found.entry is not None
    assert found.entry.input_per_mtok == Decimal(1)
    assert found.ambiguous == ()


def test_checked_dates_are_dates(tmp_path: Path) -> None:
    stamped = table(entry("p", "m", per_request="1", checked="2025-02-03"))
    assert stamped.entries[0].checked == date(2025, 2, 3)
    unstamped = table(entry("p", "m", per_request="1"))
    assert unstamped.entries[0].checked is None
    stale = stamped.stale(older_than=timedelta(days=10), today=date(2025, 2, 14))
    assert [item.label for item in stale] == ["p/m"]
    fresh = stamped.stale(older_than=timedelta(days=11), today=date(2025, 2, 14))
    assert fresh == []


# --------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1000000", Decimal(1_000_000)),
        ("12345678901234567890", None),  # 20 digits, but above the bound
        ("0.12345678901234567890", Decimal("0.12345678901234567890")),  # 20 digits
        ("1e-24", Decimal("1e-24")),  # 24 places
        ("0.020000000000000000000000000000", Decimal("0.02")),  # trailing zeros do not count
        ("0E+999999999", Decimal(0)),  # zero, however it is written
        ("-0", Decimal(0)),
    ],
)
def test_rates_at_the_bounds(raw: str, expected: Decimal | None) -> None:
    if expected is None:
        with pytest.raises(PriceTableError, match="at most 1,000,000"):
            table(entry("p", "m", per_request=raw))
        return
    rate = table(entry("p", "m", per_request=raw)).entries[0].per_request
    assert rate == expected
    assert rate is not None
    assert rate.is_zero() or rate.adjusted() > -30


def test_a_rate_bound_message_says_what_is_allowed() -> None:
    messages = []
    for raw in ("1e999999999", "0." + "1" * 400, "1e-30"):
        with pytest.raises(PriceTableError) as caught:
            table(entry("p", "m", input_per_mtok=raw))
        messages.append(str(caught.value))
    assert messages == [
        "<dict>: prices[0] (p/m): field 'input_per_mtok': a rate must be at most 1,000,000",
        "<dict>: prices[0] (p/m): field 'input_per_mtok': a rate may have at most 20 "
        "significant digits, not 400",
        "<dict>: prices[0] (p/m): field 'input_per_mtok': a rate may have at most 24 decimal "
        "places, not 30",
    ]


def test_the_largest_rate_prices_the_largest_count_without_overflow() -> None:
    dear = table(entry("p", "m", input_per_mtok="999999.99999999999999"))
    line = price_usage(dear, "p", "m", WHEN, EmbeddingUsage(input_tokens=2**63 - 1))
    assert line.amount is not None
    assert line.amount > 0
    assert Ledger(dear).prices is dear


@pytest.mark.parametrize("currency", ["US DOLLAR$", "usd", "US", "USDT", 978, ""])
def test_table_currency_must_be_iso_4217_shaped(tmp_path: Path, currency: object) -> None:
    path = _json_file(tmp_path, {"currency": currency, "prices": [entry("p", "m", per_request=1)]})
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: field 'currency' must be an ISO 4217 currency code")
    assert "three capital letters" in message


def test_iso_4217_codes_are_accepted_at_both_levels() -> None:
    loaded = table(entry("p", "m", per_request=1, currency="JPY"), currency="EUR")
    assert (loaded.currency, loaded.entries[0].currency) == ("EUR", "JPY")


# --------------------------------------------------------------------------- hostile files


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000),
        ("deep-object.json", '{"a":' * 100_000 + "1" + "}" * 100_000),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000),
        ("deep-inline.toml", "a = " + "{b = " * 100_000 + "1" + "}" * 100_000),
    ],
)
def test_nesting_too_deep_is_refused_naming_the_file(
    tmp_path: Path, name: str, content: str
) -> None:
    path = _write(tmp_path, name, content)
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    kind = "JSON" if name.endswith(".json") else "TOML"
    assert str(caught.value) == (
        f"{path}: not valid {kind}: it is nested too deeply for a price table"
    )


SENTINEL = "do-not-echo-this-content"


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("cut.json", '{\n  "prices": [\n    {"provider": "' + SENTINEL, "at line 3, column"),
        ("comma.json", '{"prices": [],\n\n "x": "' + SENTINEL + '",}', "at line 3, column"),
        ("cut.toml", '[[prices]]\nprovider = "' + SENTINEL + "\n", "at line 2, column"),
        ("dup.toml", f'a = "{SENTINEL}"\na = 2\n', "at line 2, column"),
        ("latin1.toml", b"provider = '\xe9" + SENTINEL.encode() + b"'", "not UTF-8 text"),
        ("number.json", '{"prices": [{"per_request": ' + "9" * 5000 + "}]}", "cannot be read"),
    ],
)
def test_a_parse_error_names_the_file_and_line_without_quoting_it(
    tmp_path: Path, name: str, content: str | bytes, said: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(PriceTableError) as caught:
        PriceTable.load(path)
    message = str(caught.value)
    kind = "JSON" if name.endswith(".json") else "TOML"
    assert message.startswith(f"{path}: not valid {kind}: ")
    assert said in message
    assert SENTINEL not in message
    assert "\n" not in message


def test_long_names_and_values_are_shortened_in_messages() -> None:
    long_model = "m" * 10_000
    with pytest.raises(PriceTableError) as caught:
        table(entry("p", long_model, per_request="x" * 10_000))
    assert len(str(caught.value)) < 300
    with pytest.raises(PriceTableError) as unknown:
        table(entry("p", "m", per_request=1, **{"k" * 10_000: 1}))
    assert len(str(unknown.value)) < 300


def test_a_long_table_loads_in_linear_time() -> None:
    rows = [entry("p", f"model-{i}", per_request="1") for i in range(20_000)]
    started = time.perf_counter()
    loaded = table(*rows)
    assert time.perf_counter() - started < 5.0  # comparing every pair took ~19 s
    assert len(loaded.entries) == 20_000
