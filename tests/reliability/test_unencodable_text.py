"""A caller-given string with no UTF-8 form (a lone surrogate in a model name or request id)
never costs the other spans of its batch: exporters write it escaped, and every span, metric
point and observation still reaches the backend."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from spanledger import CallStarted, EmbeddingEvent, EmbeddingUsage, Recorder
from spanledger.exporters._text import encodable
from spanledger.exporters.pipelines import OtlpSettings, langfuse_pipeline, otel_pipeline
from tests.exporters.conftest import unique_public_key

from ._exporter_receiver import OtlpSink

BAD_MODEL = "embed-\ud800"
BAD_REQUEST = "turn-\udfff"


def call(recorder: Recorder, call_id: str, model: str, request_id: str | None) -> None:
    now = datetime.now(UTC)
    recorder.call_started(
        CallStarted(
            call_id=call_id,
            operation="embeddings",
            provider="cohere",
            model=model,
            request_id=request_id,
            started_at=now,
        )
    )
    recorder.emit(
        EmbeddingEvent(
            call_id=call_id,
            provider="cohere",
            model=model,
            request_id=request_id,
            started_at=now,
            latency_ms=1.0,
            input_count=1,
            input_type="search_\udc00",
            usage=EmbeddingUsage(input_tokens=2),
        )
    )


@pytest.fixture
def receivers() -> Iterator[tuple[OtlpSink, OtlpSink]]:
    with OtlpSink() as otlp, OtlpSink() as langfuse:
        yield otlp, langfuse


def test_one_unencodable_string_loses_no_span_metric_or_observation(
    receivers: tuple[OtlpSink, OtlpSink],
) -> None:
    otlp, langfuse_host = receivers
    otel = otel_pipeline(
        otlp=OtlpSettings(f"{otlp.url}/v1/traces", f"{otlp.url}/v1/metrics"),
        prometheus=None,
        service_name="surrogates",
        capture_payload=False,
    )
    langfuse = langfuse_pipeline(
        public_key=unique_public_key(),
        secret_key="sk-lf-test",
        host=langfuse_host.url,
        capture_payload=False,
    )
    recorder = Recorder([otel, langfuse])
    call(recorder, "good-1", "embed-v4.0", "turn-1")
    call(recorder, "bad", BAD_MODEL, BAD_REQUEST)
    call(recorder, "good-2", "embed-v4.0", None)
    recorder.shutdown()

    for stats in (otel.delivery, otel.metric_delivery, langfuse.delivery):
        assert stats is not None
        assert stats.failed == 0, stats
        assert stats.exported == stats.produced > 0, stats
    by_call = {span.attributes["spanledger.call_id"]: span for span in otlp.spans}
    assert set(by_call) == {"good-1", "bad", "good-2"}
    bad = by_call["bad"]
    assert bad.name == "embeddings embed-\\ud800"
    assert bad.attributes["gen_ai.request.model"] == "embed-\\ud800"
    assert bad.attributes["spanledger.request_id"] == "turn-\\udfff"
    assert len(langfuse_host.spans) == 3
    models = {
        point.attributes.get("gen_ai.request.model")
        for export in otlp.metric_exports
        for point in export
    }
    assert "embed-\\ud800" in models


@pytest.mark.parametrize(
    ("text", "written"),
    [("plain", "plain"), ("é-ü-\U0001f600", "é-ü-\U0001f600"), ("a\ud800b", "a\\ud800b")],
)
def test_encodable_escapes_only_what_has_no_utf8_form(text: str, written: str) -> None:
    assert encodable(text) == written
    encodable(text).encode("utf-8")
