"""Opt-in payload rendering: off by default, deterministic JSON when on, byte-capped, no vectors."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from spanledger import ProviderError
from spanledger.events import EmbeddingEvent, RerankEvent
from spanledger.exporters._payload import MIN_PAYLOAD_CAP, capped, json_text
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import standin_vector

from .conftest import SENTINEL, LangfuseRig, OtelRig, Providers, all_text, embedding_event

PAYLOAD_ATTRIBUTES = (
    "spanledger.embedding.inputs",
    "spanledger.rerank.query",
    "spanledger.rerank.documents",
    "spanledger.rerank.results",
    "spanledger.request.extras",
)


def compact(value: object) -> str:
    """The rendering the contract asks for, written out independently of the exporter."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def marker(total: int) -> str:
    return f"…[truncated, {total} bytes total]"


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def run_payload_calls(rig: OtelRig, providers: Providers) -> None:
    """An embedding, a rerank with echoed documents and a failure, each carrying the sentinel."""
    extras = {"user_tag": SENTINEL}
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(
        [f"text {SENTINEL}", "plain"], extras=extras
    )
    providers.reranker("jina", "jina-reranker-v2", rig.recorder).rerank(
        f"query {SENTINEL}", [f"doc {SENTINEL}", "other doc"], return_documents=True, extras=extras
    )
    with pytest.raises(ProviderError):
        providers.embedder("cohere", "fail-429", rig.recorder).embed(
            [f"text {SENTINEL}"], extras=extras
        )


# --------------------------------------------------------------------------- OTel: off / on


def test_payload_is_off_by_default(otel: OtelRig, providers: Providers) -> None:
    run_payload_calls(otel, providers)

    spans = otel.call_spans()
    assert len(spans) == 3
    assert SENTINEL not in all_text(spans)
    for span in spans:
        assert not set(PAYLOAD_ATTRIBUTES) & set(span.attributes or {})
    # the sentinel did ride on the events, so its absence above is the exporter's doing
    assert all(event.request_extras == {"user_tag": SENTINEL} for event in otel.events)


def test_embedding_payload_is_deterministic_compact_json(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel(capture_payload=True)
    inputs = ["zeta é", SENTINEL, "😀 emoji"]
    extras = {"zeta": 1, "alpha": {"y": [1, 2], "b": "é"}}
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(inputs, extras=extras)

    attributes = dict(rig.only_span().attributes or {})
    assert attributes["spanledger.embedding.inputs"] == compact(inputs)
    assert attributes["spanledger.embedding.inputs"] == '["zeta é","' + SENTINEL + '","😀 emoji"]'
    assert attributes["spanledger.request.extras"] == '{"alpha":{"b":"é","y":[1,2]},"zeta":1}'


def test_rerank_payload_renders_query_documents_and_results(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel(capture_payload=True)
    query, documents = f"query {SENTINEL}", [f"doc {SENTINEL}", "other doc", "third"]
    providers.reranker("jina", "jina-reranker-v2", rig.recorder).rerank(
        query, documents, top_k=2, return_documents=True
    )

    (event,) = rig.events
    assert isinstance(event, RerankEvent)
    assert event.results is not None
    attributes = dict(rig.only_span().attributes or {})
    assert attributes["spanledger.rerank.query"] == compact(query)
    assert attributes["spanledger.rerank.documents"] == compact(documents)
    expected_results = [
        {"document": r.document, "index": r.index, "relevance_score": r.relevance_score}
        for r in event.results
    ]
    assert attributes["spanledger.rerank.results"] == compact(expected_results)
    assert json.loads(str(attributes["spanledger.rerank.results"]))[0]["document"] in documents
    assert "spanledger.request.extras" not in attributes  # no extras were given


def test_payload_capture_is_identical_across_runs(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    renderings = []
    for _ in range(2):
        rig = make_otel(capture_payload=True)
        providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(
            ["a"], extras={"b": 1, "a": {"d": 2, "c": 3}}
        )
        attributes = dict(rig.only_span().attributes or {})
        renderings.append({key: attributes[key] for key in PAYLOAD_ATTRIBUTES if key in attributes})
    assert renderings[0] == renderings[1]
    assert renderings[0]["spanledger.request.extras"] == '{"a":{"c":3,"d":2},"b":1}'


def test_vectors_never_appear_even_with_payload_on(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel(capture_payload=True)
    texts = ["first text", "second text"]
    response = providers.embedder("openai", "text-embedding-3-small", rig.recorder).embed(texts)

    assert response.vectors[0] == standin_vector("first text")
    text = all_text(rig.call_spans())
    assert "first text" in text  # the payload itself was rendered...
    for vector in response.vectors:
        for value in vector[:4]:
            assert repr(value) not in text  # ...but no vector value was
            assert f"{value:.6f}" not in text


@pytest.mark.parametrize(
    "inputs",
    [["é" * 1000], ["😀" * 500], ["a" + "😀" * 500], ["ab€" * 420], ["x" * 2048]],
    ids=["two-byte", "four-byte", "four-byte-offset", "mixed", "ascii"],
)
def test_over_cap_payload_is_cut_on_a_code_point_with_a_marker(
    make_otel: Callable[..., OtelRig], providers: Providers, inputs: list[str]
) -> None:
    rig = make_otel(capture_payload=True, payload_cap=256)
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(inputs)

    full = compact(inputs)
    assert utf8_size(full) > 2000
    value = str((rig.only_span().attributes or {})["spanledger.embedding.inputs"])
    assert utf8_size(value) <= 256
    assert value.endswith(marker(utf8_size(full)))
    kept = value[: -len(marker(utf8_size(full)))]
    assert full.startswith(kept)  # a clean prefix: no broken or replaced character
    assert "\ufffd" not in value
    assert utf8_size(kept) > 256 - utf8_size(marker(utf8_size(full))) - 4  # nothing wasted


def test_payload_within_cap_is_left_whole(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel(capture_payload=True, payload_cap=256)
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["é" * 100])

    value = (rig.only_span().attributes or {})["spanledger.embedding.inputs"]
    assert value == compact(["é" * 100])


@pytest.mark.parametrize("cap", [0, 1, 100, MIN_PAYLOAD_CAP - 1])
def test_payload_cap_below_minimum_is_refused(
    cap: int, make_langfuse: Callable[..., LangfuseRig]
) -> None:
    with pytest.raises(ValueError, match="payload_cap"):
        OtelExporter(payload_cap=cap, enable_metrics=False)
    client = make_langfuse().client
    with pytest.raises(ValueError, match="payload_cap"):
        LangfuseExporter(client, payload_cap=cap)


def test_minimum_payload_cap_is_accepted() -> None:
    assert MIN_PAYLOAD_CAP == 256
    exporter = OtelExporter(payload_cap=256, enable_metrics=False)
    assert exporter.payload_cap == 256


def test_lone_surrogate_payload_stays_exportable(
    make_otel: Callable[..., OtelRig],
) -> None:
    rig = make_otel(capture_payload=True)
    rig.exporter.emit(embedding_event(inputs=["a\ud800b"]))

    value = str((rig.only_span().attributes or {})["spanledger.embedding.inputs"])
    value.encode("utf-8")  # OTLP string attributes must be valid UTF-8
    assert json.loads(value) == ["a\ud800b"]
    encoded = encode_spans(rig.call_spans())
    (resource_spans,) = encoded.resource_spans
    keys = {kv.key for kv in resource_spans.scope_spans[0].spans[0].attributes}
    assert "spanledger.embedding.inputs" in keys


# --------------------------------------------------------------------------- _payload directly


def test_json_text_is_compact_sorted_and_keeps_utf8() -> None:
    value = {"b": [1, {"z": None, "a": True}], "a": "é😀", "c": 1.5}
    assert json_text(value) == '{"a":"é😀","b":[1,{"a":true,"z":null}],"c":1.5}'
    assert json_text(value) == json_text(dict(reversed(list(value.items()))))


def test_json_text_renders_non_json_values_as_text() -> None:
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert json_text({"at": moment}) == json.dumps({"at": str(moment)}, separators=(",", ":"))


def test_json_text_escapes_lone_surrogates() -> None:
    text = json_text(["a\ud800b"])
    text.encode("utf-8")  # valid UTF-8: the surrogate is escaped, not kept raw
    assert json.loads(text) == ["a\ud800b"]


def test_capped_leaves_text_that_fits() -> None:
    assert capped("short", 256) == "short"
    exact = "é" * 128  # exactly 256 bytes
    assert capped(exact, 256) == exact


@pytest.mark.parametrize(
    "text",
    ["é" * 400, "😀" * 200, "a" + "😀" * 200, "ab" + "😀" * 200, "ab€" * 150, "y" * 1000],
    ids=["two-byte", "four-byte", "offset-1", "offset-2", "mixed", "ascii"],
)
def test_capped_cuts_on_code_points_for_every_cap(text: str) -> None:
    total = utf8_size(text)
    for cap in range(MIN_PAYLOAD_CAP, MIN_PAYLOAD_CAP + 40):
        result = capped(text, cap)
        assert utf8_size(result) <= cap, cap
        assert result.endswith(marker(total)), cap
        kept = result[: -len(marker(total))]
        assert text.startswith(kept), cap
        room = cap - utf8_size(marker(total))
        assert room - 4 < utf8_size(kept) <= room, cap  # the longest prefix that fits


def test_capped_one_byte_over_is_cut() -> None:
    text = "x" * 257
    result = capped(text, 256)
    assert result != text
    assert utf8_size(result) <= 256
    assert result.endswith(marker(257))


def test_capped_result_is_not_parseable_json() -> None:
    rendered = json_text({"inputs": ["é" * 500]})
    with pytest.raises(json.JSONDecodeError):
        json.loads(capped(rendered, 256))


def test_embedding_event_payload_fields_are_what_is_rendered(
    make_otel: Callable[..., OtelRig],
) -> None:
    rig = make_otel(capture_payload=True)
    event = embedding_event(inputs=[SENTINEL], request_extras={"k": SENTINEL})
    assert isinstance(event, EmbeddingEvent)
    rig.exporter.emit(event)

    attributes = dict(rig.only_span().attributes or {})
    assert attributes["spanledger.embedding.inputs"] == compact([SENTINEL])
    assert attributes["spanledger.request.extras"] == compact({"k": SENTINEL})
    assert "spanledger.rerank.query" not in attributes
