"""How a response's vector width is read for each requested vector type, and how a call's
inputs are counted: the rules every recording path reads through ``spanledger.wire``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from spanledger.errors import ProviderError
from spanledger.recording.facts import input_texts, passed, texts_only
from spanledger.wire.endpoints import ENDPOINTS, Vendor
from spanledger.wire.read import read_embeddings, vector_type


def width(vendor: str, payload: Any, dtype: object) -> int | None:
    endpoint = ENDPOINTS[Vendor(vendor), "embeddings"]
    return read_embeddings(endpoint, payload, 1, vector_type(dtype)).dimensions


PACKED_128 = base64.b64encode(bytes(128)).decode()
"""128 packed bytes as base64, as the Voyage SDK asks for them: 1024 binary dimensions."""


def first_vector(vendor: str, vector: object) -> dict[str, Any]:
    if vendor == "cohere":
        return {"embeddings": vector}
    return {"data": [{"object": "embedding", "index": 0, "embedding": vector}]}


@pytest.mark.parametrize(
    ("vendor", "dtype", "vector", "expected"),
    [
        ("voyageai", "binary", [-3] * 128, 1024),
        ("voyageai", "ubinary", [200] * 128, 1024),
        ("voyageai", "int8", [-3] * 1024, 1024),
        ("voyageai", "uint8", [200] * 1024, 1024),
        ("jina", "ubinary", [200] * 96, 768),
        ("jina", "base64", "AAAAPwAAgD4=", 2),
        ("voyageai", "int8", "AAAAPwAAgD4=", 8),
        ("voyageai", "binary", PACKED_128, 1024),
        ("voyageai", "ubinary", PACKED_128, 1024),
        ("voyageai", "bit", [1] * 128, None),
        ("voyageai", ["binary"], [1] * 128, None),
        ("cohere", "binary", {"binary": [[-3] * 128]}, 1024),
        ("cohere", "ubinary", {"ubinary": [[200] * 128], "float": [[0.5] * 1024]}, 1024),
        ("cohere", None, {"ubinary": [[200] * 128], "float": [[0.5] * 1024]}, 1024),
        ("cohere", "int8", {"int8": [[-3] * 1024]}, 1024),
    ],
)
def test_a_vector_is_as_wide_as_its_type_says(
    vendor: str, dtype: object, vector: object, expected: int | None
) -> None:
    assert width(vendor, first_vector(vendor, vector), dtype) == expected


@pytest.mark.parametrize(
    ("vendor", "dtype", "vector"),
    [
        ("voyageai", "float", "AAAAPwAAgD"),
        ("voyageai", None, [0.5, float("nan")]),
        ("voyageai", "int8", [1.5, 2]),
        ("cohere", None, {"binary": [[-3] * 128]}),
        ("openai", None, [0.5, True]),
    ],
)
def test_a_vector_its_type_cannot_hold_is_an_invalid_response(
    vendor: str, dtype: object, vector: object
) -> None:
    with pytest.raises(ProviderError) as raised:
        width(vendor, first_vector(vendor, vector), dtype)

    assert raised.value.category.value == "provider_invalid_response"


class Text(str):
    """A ``str`` subclass, as numpy's ``str_`` is: one input, not one per character."""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("one", (1, ["one"])),
        (["a", "b"], (2, ["a", "b"])),
        (("a",), (1, ["a"])),
        ([1, 2, 3], (1, None)),
        ([[1, 2], [3]], (2, None)),
        (["a", 1], (2, ["a", 1])),
        ([], (0, [])),
        (None, (0, None)),
        (b"bytes", (0, None)),
        (Text("one input"), (1, ["one input"])),
    ],
)
def test_inputs_are_counted_as_the_vendors_count_them(value: object, expected: object) -> None:
    assert input_texts(value) == expected


def test_inputs_are_judged_as_texts_only_where_needed() -> None:
    assert texts_only(["a", "b"]) == ["a", "b"]
    assert texts_only(["a", 1]) is None
    assert texts_only(None) is None


def test_only_the_arguments_a_caller_set_are_passed_on() -> None:
    class NotGiven:
        pass

    class Omit:
        pass

    arguments = {
        "set": 0,
        "empty": "",
        "none": None,
        "ellipsis": ...,
        "not_given": NotGiven(),
        "omitted": Omit(),
        "ignored": 1,
    }
    names = ("set", "empty", "none", "ellipsis", "not_given", "omitted", "absent")

    assert passed(arguments, names) == {"set": 0, "empty": ""}
