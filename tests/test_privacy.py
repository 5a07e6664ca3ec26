"""No input text, query, document or secret reaches the event log, console, logs or errors."""

from __future__ import annotations

import io
import traceback
from pathlib import Path

import httpx
import pytest
import structlog

import spanledger
from spanledger import ConsoleSink, JsonlSink, ProviderError
from spanledger.providers import CohereEmbeddings, CohereReranker, JinaReranker
from spanledger.testing import StandIn

SENTINEL = "SENTINEL-c41f9e"
API_KEY = "sk-SECRET-9d2b77"


class ExplodingSink:
    def emit(self, event: spanledger.Event) -> None:
        raise RuntimeError(f"sink saw {SENTINEL}")


def leaking_body_transport() -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, json={"message": f"upstream echo {SENTINEL} {API_KEY}"})

    return httpx.MockTransport(handler)


def test_sentinel_appears_nowhere(tmp_path: Path) -> None:
    log_path = tmp_path / "events.jsonl"
    console = io.StringIO()
    recorder = spanledger.Recorder([JsonlSink(log_path), ConsoleSink(console), ExplodingSink()])
    surfaces: list[str] = []
    with StandIn() as standin, spanledger.use(recorder), structlog.testing.capture_logs() as logs:
        embedder = CohereEmbeddings(
            "embed-v4.0", base_url=standin.base_url("cohere"), api_key=API_KEY
        )
        embedder.embed([f"passage {SENTINEL}"], extras={"note": SENTINEL})
        reranker = JinaReranker("rr", base_url=standin.base_url("jina"), api_key=API_KEY)
        response = reranker.rerank(SENTINEL, [f"doc {SENTINEL}"], return_documents=True)
        assert response.results[0].document == f"doc {SENTINEL}"  # the caller still gets it
        surfaces.append(repr(response))

        failing = CohereReranker(
            "rerank-v3.5",
            api_key=API_KEY,
            http_client=httpx.Client(transport=leaking_body_transport()),
        )
        with pytest.raises(ProviderError) as caught:
            failing.rerank(f"query {SENTINEL}", [SENTINEL])
        surfaces += [
            str(caught.value),
            repr(caught.value),
            "".join(traceback.format_exception(caught.value)),
        ]
        with pytest.raises(ProviderError) as refused:
            embedder.embed([SENTINEL], input_type="image")
        surfaces.append("".join(traceback.format_exception(refused.value)))
        surfaces += [repr(e) for e in recorder.sinks]
        surfaces += [repr(embedder), repr(reranker), repr(failing)]
    recorder.shutdown()

    surfaces += [log_path.read_text(), console.getvalue(), repr(logs)]
    events = spanledger.read_events(log_path).events
    assert len(events) == 4
    surfaces += [repr(e) for e in events] + [e.model_dump_json() for e in events]
    for text in surfaces:
        assert SENTINEL not in text
        assert API_KEY not in text
    assert logs, "the exploding sink must have been logged"
