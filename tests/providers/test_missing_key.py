"""A call to a vendor's own API with no key is refused before anything is sent, with a
sentence naming the variable the provider reads; a proxy, gateway or stand-in may need none."""

from __future__ import annotations

import httpx
import pytest

from spanledger import ErrorCategory, ProviderError, Recorder
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent
from spanledger.ledger import PriceTable
from spanledger.ledger.pricing import Ledger
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    JinaEmbeddings,
    OpenAIEmbeddings,
    VoyageReranker,
)

PROVIDERS = [
    (lambda client, **kw: OpenAIEmbeddings("m", http_client=client, **kw), "OPENAI_API_KEY"),
    (lambda client, **kw: CohereEmbeddings("m", http_client=client, **kw), "CO_API_KEY"),
    (lambda client, **kw: CohereReranker("m", http_client=client, **kw), "CO_API_KEY"),
    (lambda client, **kw: JinaEmbeddings("m", http_client=client, **kw), "JINA_API_KEY"),
    (lambda client, **kw: VoyageReranker("m", http_client=client, **kw), "VOYAGE_API_KEY"),
]


def call(provider: object) -> None:
    if hasattr(provider, "embed"):
        provider.embed(["a text"])
    else:
        provider.rerank("q", ["a", "b"])  # type: ignore[attr-defined]


def recording_client(sent: list[httpx.Request], status: int) -> httpx.Client:
    """A client that keeps what it was asked to send and answers ``status``."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(status)

    return httpx.Client(transport=httpx.MockTransport(answer))


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "CO_API_KEY", "JINA_API_KEY", "VOYAGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("make", "variable"), PROVIDERS)
def test_no_key_for_the_vendors_api_is_refused_before_sending(
    no_keys: None, make: object, variable: str
) -> None:
    sent: list[httpx.Request] = []
    client = recording_client(sent, 500)
    events: list[Event] = []
    provider = make(client, recorder=Recorder([events.append]))  # type: ignore[operator]

    with pytest.raises(ProviderError) as raised:
        call(provider)

    assert sent == []
    assert raised.value.category is ErrorCategory.AUTHENTICATION
    assert raised.value.error_type == "missing_api_key"
    assert variable in str(raised.value)
    [event] = events
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    assert event.error_type == "missing_api_key"
    line = Ledger(PriceTable.from_dict({"prices": []})).price(event)
    assert line.status.value == "not_billed"  # nothing was sent: nothing to price


@pytest.mark.parametrize(("make", "variable"), PROVIDERS)
def test_a_gateway_may_take_calls_without_a_key(no_keys: None, make: object, variable: str) -> None:
    sent: list[httpx.Request] = []
    client = recording_client(sent, 503)
    provider = make(client, base_url="http://gateway.internal")  # type: ignore[operator]
    with pytest.raises(ProviderError) as raised:
        call(provider)
    assert len(sent) == 1
    assert "authorization" not in sent[0].headers
    assert raised.value.category is ErrorCategory.UNAVAILABLE
