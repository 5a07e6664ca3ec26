"""The figure rule: a provider-reported count or id is read as-is or reported as absent."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanledger.figures import MAX_COUNT, count, response_id, text

# Arbitrary JSON values: scalars, and lists / objects of them, nested.
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def expected_count(value: object) -> int | None:
    """The oracle: only an exact int in the signed 64-bit range, not negative, is a count."""
    if type(value) is int and 0 <= value <= 2**63 - 1:
        return value
    return None


class _IntSubclass(int):
    pass


@pytest.mark.parametrize("value", [0, 1, 12, 4096, 2**53 + 1, 2**63 - 1])
def test_count_returns_non_negative_int_unchanged(value: int) -> None:
    result = count(value)
    assert result == value
    assert type(result) is int


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        -1,
        -(2**63),
        2**63,
        2**64,
        10**30,
        10**400,
        6.0,
        0.0,
        12.5,
        math.nan,
        math.inf,
        "12",
        "0",
        "",
        None,
        [],
        [12],
        {},
        {"tokens": 12},
        b"12",
        _IntSubclass(5),
        object(),
    ],
    ids=repr,
)
def test_count_rejects_anything_but_a_non_negative_json_integer(value: object) -> None:
    assert count(value) is None


@pytest.mark.parametrize("value", ["resp_123", "x", " "])
def test_response_id_returns_non_empty_string(value: str) -> None:
    assert response_id(value) == value


@pytest.mark.parametrize(
    "value", ["", None, 0, 123, True, b"resp", ["resp"], {"id": "resp"}, 1.5], ids=repr
)
def test_response_id_rejects_empty_and_non_strings(value: object) -> None:
    assert response_id(value) is None


@given(json_values)
def test_count_property_over_arbitrary_json(value: Any) -> None:
    result = count(value)  # must never raise
    assert result == expected_count(value)
    if result is not None:
        assert result is value


@given(json_values)
def test_count_property_survives_json_round_trip(value: Any) -> None:
    decoded = json.loads(json.dumps(value))
    result = count(decoded)
    assert result == expected_count(decoded)
    if result is not None:
        assert type(result) is int
        assert result >= 0
        assert result is decoded


@given(json_values)
def test_response_id_property_over_arbitrary_json(value: Any) -> None:
    result = response_id(value)
    if type(value) is str and value:
        assert result == value
    else:
        assert result is None


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_count_sign_property(value: int) -> None:
    assert count(value) == (value if 0 <= value <= MAX_COUNT else None)
    assert count(float(value)) is None
    assert count(str(value)) is None


@pytest.mark.parametrize("value", ["\ud800", "id-\udfff", "\udc00\ud800"])
def test_text_without_a_utf8_form_is_not_reported(value: str) -> None:
    assert text(value) is None
    assert response_id(value) is None


@pytest.mark.parametrize("value", ["resp-1", "é-ü", "\U0001f600", "a\u2028b"])
def test_valid_text_is_kept_as_is(value: str) -> None:
    assert text(value) == value
