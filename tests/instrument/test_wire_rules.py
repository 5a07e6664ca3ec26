"""The instrumentation reads each vendor's figures exactly where ``spanledger.providers`` does."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from spanledger import standin
from spanledger.instrument._facts import input_texts, passed
from spanledger.instrument._wire import embedding_figures, rerank_figures
from spanledger.providers._calls import RerankCall
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.providers.cohere import CohereEmbeddingMapping, CohereRerankMapping
from spanledger.providers.jina import JinaEmbeddingMapping, JinaRerankMapping
from spanledger.providers.openai import OpenAIEmbeddingMapping
from spanledger.providers.voyage import VoyageEmbeddingMapping, VoyageRerankMapping


def made(kind: Any, **extra: Any) -> Any:
    return kind(model="m", base_url="http://vendor.test", api_key=None, chunk_size=None, **extra)


EMBEDDINGS: dict[str, tuple[EmbeddingMapping, str, tuple[str, ...]]] = {
    "openai": (
        made(OpenAIEmbeddingMapping, query_prefix=None, document_prefix=None),
        "/v1/embeddings",
        ("usage", "prompt_tokens"),
    ),
    "cohere": (
        made(CohereEmbeddingMapping),
        "/v2/embed",
        ("meta", "billed_units", "input_tokens"),
    ),
    "jina": (made(JinaEmbeddingMapping), "/v1/embeddings", ("usage", "total_tokens")),
    "voyageai": (made(VoyageEmbeddingMapping), "/v1/embeddings", ("usage", "total_tokens")),
}
RERANKS: dict[str, tuple[RerankMapping, str, tuple[str, ...]]] = {
    "cohere": (made(CohereRerankMapping), "/v2/rerank", ("meta", "billed_units", "search_units")),
    "jina": (made(JinaRerankMapping), "/v1/rerank", ("usage", "total_tokens")),
    "voyageai": (made(VoyageRerankMapping), "/v1/rerank", ("usage", "total_tokens")),
}
STANDIN_VENDOR = {"voyageai": "voyage"}
FIGURES: list[Any] = [7, 0, -5, 7.0, True, "7", "abc", None, {}, [7], "absent"]
IDS: list[Any] = ["resp-1", "", 12, None, "absent"]
VARIANTS = [(figure, "resp-1") for figure in FIGURES] + [(7, rid) for rid in IDS[1:]]


def body(vendor: str, route: str, request: dict[str, Any]) -> Any:
    status, payload, _ = standin._ROUTES[(STANDIN_VENDOR.get(vendor, vendor), route)](request, "m")
    assert status == 200
    return payload


def varied(payload: Any, path: tuple[str, ...], value: Any) -> Any:
    changed = copy.deepcopy(payload)
    node = changed
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if value == "absent":
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return changed


@pytest.mark.parametrize("vendor", EMBEDDINGS)
@pytest.mark.parametrize(("figure", "response_id"), VARIANTS)
def test_embedding_figures_match_the_provider_mapping(
    vendor: str, figure: Any, response_id: Any
) -> None:
    mapping, route, path = EMBEDDINGS[vendor]
    texts = ["one", "two"]
    payload = body(vendor, route, {"input": texts, "texts": texts})
    payload = varied(varied(payload, path, figure), ("id",), response_id)

    part = mapping.parse(payload, len(texts))
    found = embedding_figures(vendor, payload)

    assert found.usage == part.usage
    assert found.response_id == part.response_id
    assert found.response_model == part.model
    assert found.dimensions == len(part.vectors[0])


@pytest.mark.parametrize("vendor", RERANKS)
@pytest.mark.parametrize(("figure", "response_id"), VARIANTS)
def test_rerank_figures_match_the_provider_mapping(
    vendor: str, figure: Any, response_id: Any
) -> None:
    mapping, route, path = RERANKS[vendor]
    documents = ["one", "two", "three"]
    payload = body(vendor, route, {"query": "q", "documents": documents})
    payload = varied(varied(payload, path, figure), ("id",), response_id)

    part = mapping.parse(payload, RerankCall("q", documents), len(documents))
    found = rerank_figures(vendor, payload)

    assert found.usage == part.usage
    assert found.response_id == part.response_id
    assert found.response_model == part.model
    assert found.result_count == len(part.results)


def test_a_base64_float32_vector_width_is_read_without_decoding() -> None:
    payload = body("openai", "/v1/embeddings", {"input": ["x"], "encoding_format": "base64"})

    assert embedding_figures("openai", payload).dimensions == standin.DEFAULT_DIMENSIONS
    assert embedding_figures("openai", payload, dtype="bit").dimensions is None


PACKED_128 = base64.b64encode(bytes(128)).decode()
"""128 packed bytes as base64, as the Voyage SDK asks for them: 1024 binary dimensions."""


def first_vector(vendor: str, vector: object) -> dict[str, Any]:
    if vendor == "cohere":
        return {"embeddings": vector}
    return {"data": [{"object": "embedding", "index": 0, "embedding": vector}]}


@pytest.mark.parametrize(
    ("vendor", "dtype", "vector", "width"),
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
        ("voyageai", "float", "AAAAPwAAgD", None),
        ("voyageai", "bit", [1] * 128, None),
        ("voyageai", ["binary"], [1] * 128, None),
        ("cohere", None, {"binary": [[-3] * 128]}, 1024),
        ("cohere", None, {"ubinary": [[200] * 128], "float": [[0.5] * 1024]}, 1024),
        ("cohere", None, {"int8": [[-3] * 1024]}, 1024),
        ("cohere", None, {"base64": ["AAAAPwAAgD4="]}, 2),
    ],
)
def test_a_vector_is_as_wide_as_its_type_says(
    vendor: str, dtype: object, vector: object, width: int | None
) -> None:
    payload = first_vector(vendor, vector)

    assert embedding_figures(vendor, payload, dtype=dtype).dimensions == width


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
        (["a", 1], (2, None)),
        ([], (0, [])),
        (None, (0, None)),
        (b"bytes", (0, None)),
        (Text("one input"), (1, ["one input"])),
    ],
)
def test_inputs_are_counted_as_the_vendors_count_them(value: object, expected: object) -> None:
    assert input_texts(value) == expected


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
