"""spanledger next to a peer instrumentation of the same SDK (OpenLLMetry's Voyage instrumentor,
switched on before or after spanledger, per client or process-wide): spanledger still records
one event per call, and every span is well-formed. What a user sees: both spans. spanledger's
per-client wrapper always runs outermost; process-wide, whichever class patch came last does.
With spanledger outermost the peer's span is a child of spanledger's, in one trace. With the
peer outermost the two are separate roots, because the peer does not make its span current.

And the two ways a peer used to break beside the switch: OTel contrib's httpx instrumentor
under ``http=True`` (every request raised: its wrapper was called unbound, with the transport
where the request belongs), and OpenInference's cohere instrumentor wrapping a base class of
``ClientV2`` after the switch (its spans vanished: the switch had kept the inherited method).
``tests/instrument/test_peer_matrix.py`` holds every peer to the same rules in every order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import cohere
import httpx
import pytest
from openinference.instrumentation.cohere import CohereInstrumentor
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.voyageai import VoyageAIInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from voyageai.client import Client as VoyageClient

import spanledger
from spanledger import EmbeddingEvent, Recorder, RerankEvent
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, QUERY, TEXTS, Tape

OURS = {"embeddings voyage-3.5", "rerank rerank-2.5"}
PEERS = {"voyageai.embed", "voyageai.rerank"}


def client(standin: StandIn) -> VoyageClient:
    return VoyageClient(api_key=API_KEY, base_url=f"{standin.url}/voyageai/v1", max_retries=0)


def calls(voyage: VoyageClient) -> None:
    voyage.embed(TEXTS, model="voyage-3.5")
    voyage.rerank(QUERY, TEXTS, model="rerank-2.5")


def well_formed(finished: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    """Every span ended, after it started; by name."""
    for span in finished:
        assert span.end_time is not None
        assert span.start_time is not None
        assert span.end_time >= span.start_time
    return {span.name: span for span in finished}


@pytest.mark.parametrize("peer_first", [True, False], ids=["peer-first", "peer-last"])
@pytest.mark.parametrize("mode", ["per-client", "process-wide"])
def test_one_event_per_call_and_both_spans_in_one_trace(
    standin: StandIn,
    spans: tuple[InMemorySpanExporter, TracerProvider],
    peer_first: bool,
    mode: str,
) -> None:
    exporter, provider = spans
    peer = VoyageAIInstrumentor()  # type: ignore[no-untyped-call]
    tape = Tape()
    recorder = Recorder([tape, OtelExporter(tracer_provider=provider, enable_metrics=False)])

    def ours_on(voyage: VoyageClient) -> None:
        if mode == "per-client":
            spanledger.instrument(voyage)
        else:
            spanledger.instrument(sdks=["voyageai"])

    voyage = client(standin)
    try:
        if peer_first:
            peer.instrument(tracer_provider=provider)
            ours_on(voyage)
        else:
            ours_on(voyage)
            peer.instrument(tracer_provider=provider)
        with spanledger.use(recorder):
            calls(voyage)
    finally:  # off in the reverse order: a class patch is taken out from the top
        if peer_first:
            ours_off(voyage, mode)
            peer.uninstrument()
        else:
            peer.uninstrument()
            ours_off(voyage, mode)

    assert [type(event) for event in tape.events] == [EmbeddingEvent, RerankEvent]
    for event in tape.events:
        assert event.usage is not None  # type: ignore[union-attr]
    by_name = well_formed(exporter.get_finished_spans())
    assert set(by_name) == OURS | PEERS
    for ours, theirs in (
        ("embeddings voyage-3.5", "voyageai.embed"),
        ("rerank rerank-2.5", "voyageai.rerank"),
    ):
        mine, peers = by_name[ours], by_name[theirs]
        if _outer_is_peer(mode, peer_first):
            assert mine.parent is None
            assert peers.parent is None
        else:
            assert peers.parent is not None
            assert peers.parent.span_id == mine.context.span_id
            assert mine.context.trace_id == peers.context.trace_id
        assert mine.attributes is not None
        assert mine.attributes["gen_ai.provider.name"] == "voyageai"


def ours_off(voyage: VoyageClient, mode: str) -> None:
    if mode == "per-client":
        spanledger.uninstrument(voyage)
    else:
        spanledger.uninstrument()


def _outer_is_peer(mode: str, peer_first: bool) -> bool:
    """Per client, spanledger's instance wrapper runs first; process-wide, whichever class
    patch came last runs first."""
    return mode == "process-wide" and not peer_first


def test_after_both_are_switched_off_nothing_records(
    standin: StandIn, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    peer = VoyageAIInstrumentor()  # type: ignore[no-untyped-call]
    before: Any = vars(VoyageClient)["embed"]
    peer.instrument(tracer_provider=provider)
    spanledger.instrument(sdks=["voyageai"])
    spanledger.uninstrument()
    peer.uninstrument()
    assert vars(VoyageClient)["embed"] is before
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        calls(client(standin))
    assert tape.events == []
    assert exporter.get_finished_spans() == ()


def test_the_http_switch_on_top_of_otel_httpx_instrumentation_passes_every_request(
    standin: StandIn, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """The usual ``opentelemetry-instrument`` set-up, then ``http=True``: a request to no
    vendor and a vendor's embedding request both answer as bare, the vendor's is recorded once,
    and the instrumentor's span of each request is there."""
    exporter, provider = spans
    body = {"model": "jina-embeddings-v3", "input": TEXTS}
    bare = (httpx.get(f"{standin.url}/nowhere").status_code, _jina(standin, body))
    peer = HTTPXClientInstrumentor()
    tape = Tape()
    peer.instrument(tracer_provider=provider)
    try:
        spanledger.instrument(sdks=[], http=True)
        try:
            with spanledger.use(Recorder([tape])):
                seen = (httpx.get(f"{standin.url}/nowhere").status_code, _jina(standin, body))
        finally:
            spanledger.uninstrument()
    finally:
        peer.uninstrument()
    assert seen == bare
    assert [type(event) for event in tape.events] == [EmbeddingEvent]
    assert list(well_formed(exporter.get_finished_spans())) == ["GET", "POST"]


def test_a_peer_wrapping_a_base_class_after_the_switch_still_runs(
    standin: StandIn, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    """OpenInference wraps ``V2Client.embed`` / ``.rerank``, which ``cohere.ClientV2``
    inherits, after the switch patched ``ClientV2``: both spans, one event per call."""
    exporter, provider = spans
    peer = CohereInstrumentor()
    tape = Tape()
    spanledger.instrument(sdks=["cohere"])
    try:
        peer.instrument(tracer_provider=provider)
        try:
            client = cohere.ClientV2(
                api_key=API_KEY, base_url=f"{standin.url}/cohere", max_retries=0
            )
            with spanledger.use(Recorder([tape])):
                client.embed(model="embed-v4.0", texts=TEXTS, input_type="search_document")
                client.rerank(model="rerank-v3.5", query=QUERY, documents=TEXTS)
        finally:
            peer.uninstrument()
    finally:
        spanledger.uninstrument()
    assert [type(event) for event in tape.events] == [EmbeddingEvent, RerankEvent]
    assert list(well_formed(exporter.get_finished_spans())) == [
        "CreateEmbeddings",
        "ClientV2.rerank",
    ]


def _jina(standin: StandIn, body: dict[str, Any]) -> Any:
    return httpx.post(f"{standin.url}/jina/v1/embeddings", json=body).json()
