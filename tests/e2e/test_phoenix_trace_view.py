"""``spanledger demo`` against a real Arize Phoenix, read back as a person and a script would:
one trace for the turn, its root span carrying the cited token share, child spans of kind
embedding with their usage and the rerank fallback chain's span, whose children are the
reranker calls it made, in the project named after the service.

The demo runs as users run it (``OTEL_EXPORTER_OTLP_ENDPOINT`` and ``OTEL_SERVICE_NAME`` set,
nothing else); Phoenix's REST API is checked, then headless Chromium opens the trace in
Phoenix's UI. A screenshot of the trace view is kept under ``$TMPDIR``
(``spanledger-phoenix-trace.png``) for a person to look at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from spanledger.demo import PASSAGES, QUESTION
from spanledger.eventlog import read_events

from .browser import headless_chromium
from .phoenix_backend import PhoenixServer

pytestmark = pytest.mark.timeout(400)

SCREENSHOT = Path(tempfile.gettempdir()) / "spanledger-phoenix-trace.png"
CALL_SPANS = 4  # two embeddings; the fallback chain's timed-out Voyage rerank and Cohere's
SPANS = CALL_SPANS + 2  # and the request's span and the chain's


def _run_demo(phoenix: PhoenixServer, service: str, folder: Path) -> Path:
    events = folder / "events.jsonl"
    environment = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix.base_url,
        "OTEL_SERVICE_NAME": service,
        "OTEL_METRICS_EXPORTER": "none",  # Phoenix takes traces only
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [sys.executable, "-m", "spanledger.cli", "demo", "--events", str(events)],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return events


def _projects(phoenix: PhoenixServer) -> dict[str, str]:
    with httpx.Client(base_url=phoenix.base_url, trust_env=False, timeout=10) as client:
        response = client.get("/v1/projects")
        response.raise_for_status()
        return {project["name"]: project["id"] for project in response.json()["data"]}


_ROWS_SCRIPT = """
return Array.from(document.querySelectorAll('.span-node-wrap')).map(row => {
    const icon = row.querySelector('.span-node__icon [title]');
    const heading = row.querySelector('.span-node__heading');
    return [icon ? icon.getAttribute('title') : '', heading ? heading.innerText : ''];
});
"""


def _wait_for_rows(session: Any, count: int, timeout: float) -> list[tuple[str, str]]:
    """The trace tree's rows as (kind shown, span name), once ``count`` are drawn (read in one
    script call: the page re-renders while it loads)."""
    deadline = time.monotonic() + timeout
    rows: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        rows = [(str(kind), str(name)) for kind, name in session.execute_script(_ROWS_SCRIPT)]
        if len(rows) >= count and all(kind and name for kind, name in rows):
            return rows
        time.sleep(0.5)
    return rows


def _wait_for_text(session: Any, wanted: list[str], timeout: float) -> str:
    """The page's visible text, once it holds every piece of ``wanted``."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = str(session.execute_script("return document.body.innerText"))
        if all(piece in text for piece in wanted):
            return text
        time.sleep(0.5)
    return text


def test_the_demo_turn_reads_as_one_trace_in_phoenix(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    service = f"spanledger-demo-{uuid.uuid4().hex[:8]}"
    events = _run_demo(phoenix, service, tmp_path)
    [record] = read_events(events).attributions
    assert record.cited_token_share is not None

    # The REST API: the project is the service; one trace; a root, its two embeddings and the
    # rerank chain, and the chain's two calls.
    spans = phoenix.spans(project=service, expected=SPANS, timeout=60)
    assert service in _projects(phoenix)
    assert len({span["context"]["trace_id"] for span in spans}) == 1
    [root] = [span for span in spans if span["parent_id"] is None]
    [chain] = [span for span in spans if span["name"] == "rerank_chain"]
    children = [span for span in spans if span["parent_id"] is not None and span is not chain]
    assert (root["name"], root["span_kind"]) == ("request", "CHAIN")
    attributes = root["attributes"]
    assert attributes["spanledger.request_id"] == record.request_id
    assert attributes["spanledger.attribution.cited_token_share"] == pytest.approx(
        record.cited_token_share
    )
    assert attributes["spanledger.attribution.chains.degraded"] == 1
    assert (chain["parent_id"], chain["span_kind"]) == (root["context"]["span_id"], "CHAIN")
    assert chain["attributes"]["spanledger.chain.status"] == "degraded"
    parents = {child["span_kind"]: child["parent_id"] for child in children}
    assert parents == {
        "EMBEDDING": root["context"]["span_id"],
        "RERANKER": chain["context"]["span_id"],
    }
    kinds = sorted(child["span_kind"] for child in children)
    assert kinds == ["EMBEDDING", "EMBEDDING", "RERANKER", "RERANKER"]
    for child in children:
        usage = child["attributes"]
        if child["status_code"] == "ERROR":  # the Voyage rerank the chain gave up on
            assert "gen_ai.usage.input_tokens" not in usage
        elif child["span_kind"] == "EMBEDDING":
            assert usage["gen_ai.usage.input_tokens"] > 0
        else:
            assert usage["spanledger.usage.search_units"] >= 1
            assert usage["reranker.model_name"] == "rerank-v3.5"
    stored = json.dumps(spans)
    for text in (QUESTION, *PASSAGES):  # never sent without an opt-in
        assert text not in stored

    # The UI: the trace as a person opens it.
    project_id = _projects(phoenix)[service]
    trace_id = root["context"]["trace_id"]
    with headless_chromium() as session:
        session.get(f"{phoenix.base_url}/projects/{project_id}/traces/{trace_id}")
        rows = _wait_for_rows(session, SPANS, timeout=60)
        assert rows[0] == ("chain", "request"), rows
        assert ("chain", "rerank_chain") in rows, rows
        shown = sorted(kind for kind, name in rows[1:] if name != "rerank_chain")
        assert shown == ["embedding", "embedding", "reranker", "reranker"], rows
        session.get(
            f"{phoenix.base_url}/projects/{project_id}/traces/{trace_id}"
            f"?selectedSpanNodeId={root['id']}"
        )
        _wait_for_rows(session, SPANS, timeout=60)
        share = f"{record.cited_token_share}"
        text = _wait_for_text(session, ["cited_token_share", share[:5]], timeout=30)
        session.save_screenshot(str(SCREENSHOT))
        assert "cited_token_share" in text, text[-2000:]
        assert share[:5] in text
