"""Hostile response bytes end as the documented error, or as a figure not reported; never as
another exception, a success built on corruption, or body bytes in a traceback."""

from __future__ import annotations

import base64
import socket
import struct
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal

import httpx
import pytest

from spanledger import (
    EmbeddingFailedEvent,
    ErrorCategory,
    ProviderError,
    Recorder,
    RerankEvent,
)
from spanledger.costs import CostStatus
from spanledger.events import Event
from spanledger.ledger import PriceTable
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    JinaEmbeddings,
    OpenAIEmbeddings,
    TEIEmbeddings,
    VoyageEmbeddings,
)

BODY_SENTINEL = "BODY-SENTINEL-hostile-5e1d"
Answer = Callable[[httpx.Request], httpx.Response]


def embedder(vendor: str, answer: Answer, recorder: Recorder) -> EmbeddingProvider:
    client = httpx.Client(transport=httpx.MockTransport(answer))
    common = {"api_key": "k", "http_client": client, "recorder": recorder}
    if vendor == "openai":
        return OpenAIEmbeddings("text-embedding-3-small", **common)  # type: ignore[arg-type]
    if vendor == "cohere":
        return CohereEmbeddings("embed-v4.0", **common)  # type: ignore[arg-type]
    if vendor == "jina":
        return JinaEmbeddings("jina-embeddings-v3", **common)  # type: ignore[arg-type]
    if vendor == "voyage":
        return VoyageEmbeddings("voyage-3", **common)  # type: ignore[arg-type]
    return TEIEmbeddings("bge", base_url="http://tei.test", **common)  # type: ignore[arg-type]


def vectors_body(vendor: str, vector_json: str) -> bytes:
    """A valid body for one input whose only vector is ``vector_json`` (raw JSON text)."""
    if vendor == "cohere":
        text = (
            f'{{"id":"r","embeddings":{{"float":[{vector_json}]}},'
            '"meta":{"billed_units":{"input_tokens":1}}}'
        )
    elif vendor == "tei":
        text = f"[{vector_json}]"
    else:
        text = (
            f'{{"object":"list","model":"m","data":[{{"object":"embedding","index":0,'
            f'"embedding":{vector_json}}}],"usage":{{"prompt_tokens":1,"total_tokens":1}}}}'
        )
    return text.encode()


def raw_answer(body: bytes, status: int = 200) -> Answer:
    return lambda request: httpx.Response(status, content=body)


def failure_of(call: Callable[[], object]) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        call()
    return caught.value


def whole_chain(error: BaseException) -> str:
    text = "".join(traceback.format_exception(error))
    node: BaseException | None = error
    while node is not None:  # what format_exception hides (a suppressed context) too
        text += repr(node) + str(node)
        node = node.__cause__ or node.__context__
    return text


VENDORS = ("openai", "cohere", "jina", "voyage", "tei")


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(
    "vector", ["[0.1,NaN]", "[Infinity,0.1]", "[-Infinity,0.1]", "[0.1,1e999]", f"[0.1,{10**400}]"]
)
def test_a_vector_that_is_not_finite_is_corruption(vendor: str, vector: str) -> None:
    events: list[Event] = []
    provider = embedder(vendor, raw_answer(vectors_body(vendor, vector)), Recorder([events.append]))

    error = failure_of(lambda: provider.embed(["a"]))

    assert error.category is ErrorCategory.INVALID_RESPONSE
    assert error.error_type == "non_finite_vector"
    (failed,) = events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert failed.error_type == "non_finite_vector"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_base64_vector_that_is_not_finite_is_corruption(value: float) -> None:
    packed = base64.b64encode(struct.pack("<2f", 0.5, value)).decode()
    provider = embedder("openai", raw_answer(vectors_body("openai", f'"{packed}"')), Recorder())
    error = failure_of(lambda: provider.embed(["a"], extras={"encoding_format": "base64"}))
    assert error.error_type == "non_finite_vector"


@pytest.mark.parametrize("vendor", VENDORS)
def test_json_nested_beyond_the_recursion_limit_is_an_invalid_response(vendor: str) -> None:
    events: list[Event] = []
    body = b"[" * 100_000 + b"]" * 100_000
    provider = embedder(vendor, raw_answer(body), Recorder([events.append]))

    error = failure_of(lambda: provider.embed(["a"]))

    assert error.category is ErrorCategory.INVALID_RESPONSE
    assert error.status_code == 200
    assert error.fingerprint is not None
    assert error.fingerprint.byte_length == len(body)
    assert error.__context__ is None
    assert error.__cause__ is None
    (failed,) = events
    assert failed.call_id


@pytest.mark.parametrize("units", [2**63, 2**64, 10**30])
def test_a_search_unit_count_no_bill_can_hold_is_not_reported(units: int) -> None:
    body = (
        '{"id":"r","results":[{"index":0,"relevance_score":0.9}],'
        f'"meta":{{"billed_units":{{"search_units":{units}}}}}}}'
    ).encode()
    events: list[Event] = []
    client = httpx.Client(transport=httpx.MockTransport(raw_answer(body)))
    reranker = CohereReranker(
        "rerank-v3.5", api_key="k", http_client=client, recorder=Recorder([events.append])
    )

    response = reranker.rerank("q", ["d"])

    assert response.usage is None
    assert response.raw["meta"]["billed_units"]["search_units"] == units
    (recorded,) = events
    assert isinstance(recorded, RerankEvent)
    assert recorded.usage is None


def test_the_largest_real_count_is_still_reported() -> None:
    body = (
        '{"id":"r","results":[{"index":0,"relevance_score":0.9}],'
        f'"meta":{{"billed_units":{{"search_units":{2**63 - 1}}}}}}}'
    ).encode()
    client = httpx.Client(transport=httpx.MockTransport(raw_answer(body)))
    reranker = CohereReranker("rerank-v3.5", api_key="k", http_client=client, recorder=Recorder())
    usage = reranker.rerank("q", ["d"]).usage
    assert usage is not None
    assert usage.search_units == 2**63 - 1


def test_an_unexpected_failure_while_reading_a_body_is_a_provider_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise KeyError(BODY_SENTINEL)

    monkeypatch.setattr("spanledger.wire.read.vectors_by_index", broken)
    events: list[Event] = []
    body = vectors_body("openai", "[0.1]")
    provider = embedder("openai", raw_answer(body), Recorder([events.append]))

    error = failure_of(lambda: provider.embed(["a"]))

    assert error.category is ErrorCategory.INVALID_RESPONSE
    assert error.error_type == "unreadable_response"
    assert BODY_SENTINEL not in whole_chain(error)
    assert len(events) == 1


# --------------------------------------------------------------------------- real sockets


@contextmanager
def raw_server(reply: bytes) -> Iterator[str]:
    """A loopback server that answers every connection with ``reply`` bytes, then closes."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    connection.recv(65536)
                    connection.sendall(reply)
                except OSError:
                    continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


HOSTILE_WIRES = {
    "illegal-chunk-header": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        + f"zz{BODY_SENTINEL}\r\n{{}}\r\n0\r\n\r\n".encode()
    ),
    "short-content-length": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nContent-Type: application/json\r\n\r\n"
        + f'{{"data":"{BODY_SENTINEL}"'.encode()
    ),
    "truncated-chunks": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + f"40\r\n{BODY_SENTINEL}".encode()
    ),
}


@pytest.mark.parametrize("wire", sorted(HOSTILE_WIRES))
def test_hostile_bytes_on_a_real_socket_never_reach_a_traceback(wire: str) -> None:
    events: list[Event] = []
    with raw_server(HOSTILE_WIRES[wire]) as url:
        provider = OpenAIEmbeddings(
            "text-embedding-3-small", api_key="k", base_url=url, recorder=Recorder([events.append])
        )
        with provider:
            error = failure_of(lambda: provider.embed(["a"]))

    assert error.category is ErrorCategory.UNAVAILABLE
    assert BODY_SENTINEL not in whole_chain(error)
    assert BODY_SENTINEL not in events[0].model_dump_json()
    assert len(events) == 1


# --------------------------------------------------------------------------- billing table

PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "prices": [
            {"provider": "openai", "model": "text-embedding-3-small", "input_per_mtok": "0.02"}
        ],
    }
)


def transport_failure(kind: type[httpx.RequestError]) -> Answer:
    def fail(request: httpx.Request) -> httpx.Response:
        raise kind("failed", request=request)

    return fail


BILLING_CASES: dict[str, tuple[Answer, CostStatus]] = {
    "refused-connection": (transport_failure(httpx.ConnectError), CostStatus.NOT_BILLED),
    "connect-timeout": (transport_failure(httpx.ConnectTimeout), CostStatus.NOT_BILLED),
    "read-timeout": (transport_failure(httpx.ReadTimeout), CostStatus.ESTIMATED),
    "reset-mid-answer": (transport_failure(httpx.RemoteProtocolError), CostStatus.ESTIMATED),
    "http-307": (raw_answer(b"", 307), CostStatus.NOT_BILLED),
    "http-400": (raw_answer(b"{}", 400), CostStatus.NOT_BILLED),
    "http-401": (raw_answer(b"{}", 401), CostStatus.NOT_BILLED),
    "http-429": (raw_answer(b"{}", 429), CostStatus.NOT_BILLED),
    "http-500": (raw_answer(b"{}", 500), CostStatus.NOT_BILLED),
    "http-503": (raw_answer(b"{}", 503), CostStatus.NOT_BILLED),
    "2xx-not-json": (raw_answer(b"<html>"), CostStatus.ESTIMATED),
    "2xx-wrong-shape": (raw_answer(b'{"data":[]}'), CostStatus.ESTIMATED),
    "2xx-deep-json": (raw_answer(b"[" * 50_000 + b"]" * 50_000), CostStatus.ESTIMATED),
    "2xx-corrupt-vector": (raw_answer(vectors_body("openai", "[NaN]")), CostStatus.ESTIMATED),
}


@pytest.mark.parametrize("case", sorted(BILLING_CASES))
def test_each_failure_kind_is_priced_by_the_billing_table(case: str) -> None:
    answer, expected = BILLING_CASES[case]
    events: list[Event] = []
    provider = embedder("openai", answer, Recorder([events.append], prices=PRICES))

    failure_of(lambda: provider.embed(["four score and seven"]))

    (failed,) = events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert failed.cost is not None
    assert failed.cost.status is expected
    if expected is CostStatus.ESTIMATED:
        assert failed.estimated_usage is not None
        assert failed.estimated_usage.input_tokens == 5  # ceil(20 bytes / 4)
        assert failed.cost.amount == Decimal("0.02") * 5 / 1_000_000
    else:
        assert failed.estimated_usage is None
        assert failed.cost.amount == 0


def test_a_refusal_before_sending_is_not_billed() -> None:
    events: list[Event] = []
    provider = embedder("cohere", raw_answer(b"{}"), Recorder([events.append], prices=PRICES))
    failure_of(lambda: provider.embed(["a"], input_type="not-a-type"))
    (failed,) = events
    assert failed.cost is not None
    assert failed.cost.status is CostStatus.NOT_BILLED


def test_a_call_that_may_have_been_billed_without_an_estimate_is_unmetered_never_free() -> None:
    """TEI has no billing unit to estimate in; its unreadable 2xx still cost something."""
    prices = PriceTable.from_dict(
        {"currency": "USD", "prices": [{"provider": "tei", "model": "bge", "input_per_mtok": "1"}]}
    )
    events: list[Event] = []
    provider = embedder("tei", raw_answer(b"<html>"), Recorder([events.append], prices=prices))

    failure_of(lambda: provider.embed(["a"]))

    (failed,) = events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert failed.estimated_usage is None
    assert failed.cost is not None
    assert failed.cost.status is CostStatus.UNMETERED
    assert failed.cost.amount is None


def test_sound_chunk_figures_whose_total_no_bill_can_hold_are_not_reported() -> None:
    half = 2**62
    body = (
        '{"object":"list","model":"m","data":[{"object":"embedding","index":0,'
        f'"embedding":[0.5]}}],"usage":{{"prompt_tokens":{half},"total_tokens":{half}}}}}'
    ).encode()
    client = httpx.Client(transport=httpx.MockTransport(raw_answer(body)))
    provider = OpenAIEmbeddings(
        "m", api_key="k", http_client=client, recorder=Recorder(), chunk_size=1
    )
    response = provider.embed(["a", "b"])  # 2**62 + 2**62 = 2**63: one past the largest count
    assert response.usage is None
    assert len(response.vectors) == 2
