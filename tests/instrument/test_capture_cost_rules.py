"""The rules the cheaper capture path keeps: URL objects read by their parts (a text parsed
once), per-client facts that follow a changed base URL, and base64 and in-order vectors judged
as a batch exactly as vector by vector."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import httpx2
import openai
import pytest

import spanledger
from spanledger import CallStarted, EmbeddingEvent, EmbeddingFailedEvent
from spanledger.errors import ProviderError
from spanledger.wire import http as wire_http
from spanledger.wire.decode import decode_embedding, float_vectors, vectors_by_index
from tests.instrument.conftest import Tape


class _UrlLike:
    """A URL object of an SDK's own kind: its parts are attributes, its text is never asked."""

    host = "embed.example"
    port = None
    scheme = "https"

    def __str__(self) -> str:
        raise AssertionError("the URL was parsed again from its text")


def test_a_url_object_is_read_by_its_parts() -> None:
    assert wire_http.server_of(_UrlLike()) == ("embed.example", 443)
    assert wire_http.server_of(httpx2.URL("http://[::1]:8080/v1")) == ("::1", 8080)
    assert wire_http.server_of(httpx2.URL("http://[::1]:8080/v1")) == wire_http.server_of(
        "http://[::1]:8080/v1"
    )


def test_a_url_text_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []

    def counted(text: str) -> httpx.URL:
        parsed.append(text)
        return httpx.URL(text)

    monkeypatch.setattr(wire_http, "httpx", SimpleNamespace(URL=counted))
    text = "https://once.example:8443/v1/embeddings"
    assert wire_http.server_of(text) == ("once.example", 8443)
    assert wire_http.server_of(text) == ("once.example", 8443)
    assert parsed == [text]


def _packed(*values: float) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def _openai(vectors: list[str], base_url: str = "http://one.example:8001/v1") -> Any:
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    body = json.dumps(
        {"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 3}}
    ).encode()
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=body, headers={"content-type": "application/json"}
        )
    )
    return spanledger.instrument(
        openai.OpenAI(
            api_key="k",
            base_url=base_url,
            max_retries=0,
            http_client=httpx2.Client(transport=transport),
        )
    )


def test_a_client_given_another_base_url_is_announced_and_recorded_by_it(tape: Tape) -> None:
    client = _openai([_packed(0.5, 0.25)])
    client.embeddings.create(model="text-embedding-3-small", input=["a"])
    client.base_url = "http://two.example:8002/v1"
    client.embeddings.create(model="text-embedding-3-small", input=["a"])

    starts = [notice for _, notice in tape.log if isinstance(notice, CallStarted)]
    servers = [(s.server_address, s.server_port) for s in starts]
    assert servers == [("one.example", 8001), ("two.example", 8002)]
    recorded = [(e.server_address, e.server_port) for e in tape.events]
    assert recorded == servers


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("at", [0, 1, 2, 4])
def test_an_sdk_base64_vector_not_finite_fails_the_call(tape: Tape, value: float, at: int) -> None:
    values = [0.125] * 5
    values[at] = value
    vectors = [_packed(*[0.5] * 5), _packed(*[0.5] * 5), _packed(*values)]
    _openai(vectors).embeddings.create(model="text-embedding-3-small", input=["a", "b", "c"])
    (event,) = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_type == "non_finite_vector"


def test_sdk_base64_vectors_of_large_finite_values_are_read(tape: Tape) -> None:
    vectors = [_packed(3.0e38, -(2.0**127), 0.5), _packed(0.5, 0.5, 0.5)]
    _openai(vectors).embeddings.create(model="text-embedding-3-small", input=["a", "b"])
    (event,) = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.dimensions == 3


def _outcome(judge: Any, *, sort: bool = True) -> tuple[str, object]:
    """What judging gave: the fault's type, or the widths read (distinct and sorted, or as
    placed)."""
    try:
        vectors = judge()
    except ProviderError as error:
        return "failed", error.error_type
    widths = [len(vector) for vector in vectors]
    return "read", sorted(set(widths)) if sort else widths


_NOT_FINITE_BITS = [
    top << 24 | second << 16 | low
    for top in (0x7F, 0xFF)
    for second in (0x80, 0x81, 0x82, 0x83, 0xC3, 0xFF)
    for low in (0x0000, 0x0001, 0xFFFF)
]
"""Infinities and NaNs with every pattern of the bits beside the top byte's in the text."""


def _batches() -> Iterator[list[str]]:
    for width in (1, 2, 3, 4):
        good = _packed(*[0.5] * width)
        for at in range(width):
            for bits in _NOT_FINITE_BITS:
                words = [0x3E800000] * width
                words[at] = bits
                yield [good, base64.b64encode(struct.pack(f"<{width}I", *words)).decode()]
    for width in (1, 2, 3, 4, 5, 6, 7, 64):
        good = _packed(*[0.5] * width)
        for at in range(width):
            for value in (float("nan"), float("-inf"), 3.4e38, -1.5):
                values = [0.25] * width
                values[at] = value
                yield [good, _packed(*values), good]
        yield [good, good[:-4]]
        yield [good, good[:4] + "=" + good[5:]]  # padding inside a vector
        yield [good, good[:4] + "=" + good[5:-1] + "A"]  # moved inside from the end
        yield [good, good + "===="]
        yield [good, "!" + good[1:]]
        yield [good, good.replace(good[0], "é", 1)]
        yield [good, _packed(*[0.5] * (width + 1))]
        yield [good, base64.b64encode(b"\x00\x00\x80").decode()]
    odd = base64.b64encode(b"\x00\x00\x80\x3f\x00\x00").decode()  # 6 bytes: 1.5 floats
    yield [odd, odd]
    yield [""]


@pytest.mark.parametrize("vectors", list(_batches()))
def test_base64_vectors_judged_as_a_batch_as_one_by_one(vectors: list[str]) -> None:
    one_by_one = _outcome(lambda: [decode_embedding(v, keep=False) for v in vectors])
    assert _outcome(lambda: float_vectors(vectors, keep=False)) == one_by_one


def _entry(index: object, width: int = 2) -> dict[str, Any]:
    return {"index": index, "embedding": [float(width)] * width}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([_entry(0, 1), _entry(1, 2), _entry(2, 3)], ("read", [1, 2, 3])),
        ([_entry(2, 3), _entry(0, 1), _entry(1, 2)], ("read", [1, 2, 3])),
        ([_entry(0), _entry(True)], ("failed", "index_out_of_range")),
        ([_entry(0), _entry(1.0)], ("failed", "index_out_of_range")),
        ([_entry(0), _entry(0)], ("failed", "duplicate_index")),
        ([_entry(0), [1.0]], ("failed", "bad_entry")),
        ([_entry(0), {"embedding": [1.0]}], ("failed", "index_out_of_range")),
    ],
)
def test_vectors_are_placed_by_their_index(data: list[Any], expected: tuple[str, object]) -> None:
    assert _outcome(lambda: vectors_by_index(data, None, None), sort=False) == expected
