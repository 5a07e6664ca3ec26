"""``spanledger demo``: a retrieval-augmented turn end to end, offline, on a local stand-in.

The turn embeds bundled passages and a question, retrieves candidates by vector similarity,
reranks them through a fallback chain whose first reranker times out, puts the top passages
into a numbered prompt and asks the stand-in's chat route, whose scripted answer cites two of
them. No attribution call is written: the rerank served and selected the frames, the chat call
(through the recording transport) rendered and cited them. Every call is priced from the example
price table, the context the prompt carried at the chat model's input rate, and the request's
report is printed; then ``spanledger report`` over the log.
Exporters configured from the environment (OTLP, Langfuse) receive the same turn.
``--tour`` instead drives every provider class once.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import httpx

from spanledger.attribution import request
from spanledger.chains import with_fallback
from spanledger.configuration import configure
from spanledger.errors import ProviderError
from spanledger.eventlog import read_events
from spanledger.exporters import ConsoleSink, JsonlSink
from spanledger.exporters.delivery import not_delivered
from spanledger.instrumentation import transport
from spanledger.ledger import example_prices_path
from spanledger.providers import (
    AzureOpenAIEmbeddings,
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    GeminiEmbeddings,
    JinaEmbeddings,
    JinaReranker,
    MistralEmbeddings,
    OllamaEmbeddings,
    OpenAIEmbeddings,
    RerankProvider,
    TEIEmbeddings,
    TEIReranker,
    VertexEmbeddings,
    VertexReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.recorder import Recorder, use
from spanledger.reporting import run_report
from spanledger.testing import StandIn

__all__ = ["CHAT_MODEL", "PASSAGES", "QUESTION", "run_demo", "run_tour"]

QUESTION = "How do tides depend on the moon?"

PASSAGES = [
    "Tides are the regular rise and fall of the sea, driven mostly by the moon's gravity.",
    "The sun also pulls on the oceans, so spring tides come when sun and moon line up.",
    "Neap tides happen when the sun and the moon pull at right angles to each other.",
    "Most coasts see two high tides and two low tides in a little over a day.",
    "Lighthouses were built to warn ships away from rocks and shallow water.",
    "The Bay of Fundy has some of the largest tidal ranges on Earth.",
    "Sea salt is harvested by letting shallow pools of seawater evaporate.",
    "Tidal power stations turn the flow of the tide into electricity.",
]


CHAT_MODEL = "gpt-4o-mini"
REQUEST_PREFIX = "demo-turn-"


DEFAULT_EVENTS = Path("spanledger-events.jsonl")
"""Where the demo writes its log when neither ``--events`` nor ``SPANLEDGER_EVENTS`` says."""


def run_demo(
    events_path: Path | None, out: TextIO, environ: Mapping[str, str] | None = None
) -> int:
    """One retrieval-augmented turn, its report, then the report over the whole log.

    The settings the demo lets you try come from the environment as they would in your app:
    ``SPANLEDGER_EVENTS`` (unless ``events_path`` is given), ``SPANLEDGER_PRICES`` (else the
    example table) and ``SPANLEDGER_CONSOLE`` (else one line per call on ``out``), with the
    OTLP and Langfuse variables; a bad value stops the demo with the sentence naming it."""
    env = os.environ if environ is None else environ
    named = [name for name in _TRIED if env.get(name)]
    if events_path is None and "SPANLEDGER_EVENTS" not in named:
        events_path = DEFAULT_EVENTS
    own_console = "SPANLEDGER_CONSOLE" not in named
    recorder = configure(
        events_path=events_path,
        prices=None if "SPANLEDGER_PRICES" in named else example_prices_path(),
        console=False if own_console else None,
        sinks=[ConsoleSink(out)] if own_console else [],
        install=False,
        environ=env,
    )
    log = events_path if events_path is not None else Path(env["SPANLEDGER_EVENTS"])
    prices = Path(env["SPANLEDGER_PRICES"]) if "SPANLEDGER_PRICES" in named else None
    if named:
        out.write(f"settings from the environment: {', '.join(named)}\n")
    out.write(
        "spanledger demo: one retrieval-augmented turn against a local STAND-IN server "
        "(hash vectors and word-overlap scores, not a real vendor)\n"
    )
    turn_id = REQUEST_PREFIX + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")  # one per run
    with StandIn() as standin, use(recorder), request(turn_id) as turn:
        table = prices if prices is not None else example_prices_path()
        out.write(f"stand-in listening on {standin.url}; prices: {table.name}\n\n")
        embedder = CohereEmbeddings("embed-v4.0", base_url=standin.base_url("cohere"))
        slow_reranker = VoyageReranker(
            "rerank-2.5", base_url=standin.base_url("voyageai", "slow-3000")
        )
        reranker = CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere"))
        try:
            passages = embedder.embed(PASSAGES, input_type="document").vectors
            question = embedder.embed([QUESTION], input_type="query").vectors[0]
            ranked = sorted(range(len(PASSAGES)), key=lambda i: -_cosine(question, passages[i]))
            candidates = [PASSAGES[i] for i in ranked[:6]]
            outcome = with_fallback(
                [slow_reranker, reranker], QUESTION, candidates, top_k=3, deadline=5.0,
                step_timeout=0.5,
            )  # fmt: skip
            out.write(
                f"  ^ fallback chain: {outcome.status}; "
                + ", ".join(f"{a.provider}/{a.model} {a.status}" for a in outcome.attempts)
                + "\n"
            )
            chosen = [candidates[result.index] for result in outcome.results]
            prompt = "\n".join(f"[{n}] {text}" for n, text in enumerate(chosen, 1))
            answer = _ask(standin, prompt)
            out.write(f"\nprompt context:\n{prompt}\n\nscripted answer: {answer}\n")
            report = turn.report()
        finally:
            for provider in (embedder, slow_reranker, reranker):
                provider.close()
    out.write("\n" + report.render() + "\n")
    recorder.shutdown()
    out.write("\n")
    if prices is None:
        out.write("$ spanledger prices example > prices.toml\n")
    shown = shlex.quote(str(prices)) if prices is not None else "prices.toml"
    out.write(f"$ spanledger report {shlex.quote(str(log))} --prices {shown}\n")
    status = run_report(log, prices or example_prices_path(), as_json=False, out=out)
    lost = not_delivered(recorder.sinks)
    if lost:
        out.write(f"\nnot delivered: {lost}\n")
    return status


_TRIED = ("SPANLEDGER_EVENTS", "SPANLEDGER_PRICES", "SPANLEDGER_CONSOLE")
"""The settings the demo takes from the environment beside the exporters' own."""


def _ask(standin: StandIn, context: str) -> str:
    """Ask the stand-in's chat route, as an app's own HTTP client would: the recording
    transport reads the prompt and the answer for the open request, in process."""
    body = {
        "model": CHAT_MODEL,
        "messages": [
            {"role": "system", "content": "Answer from the sources; cite them as [n].\n" + context},
            {"role": "user", "content": QUESTION},
        ],
    }
    with httpx.Client(transport=transport(), timeout=10.0) as client:
        reply = client.post(standin.base_url("openai") + "/v1/chat/completions", json=body)
    reply.raise_for_status()
    return str(reply.json()["choices"][0]["message"]["content"])


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def run_tour(events_path: Path, out: TextIO) -> int:
    """Drive every provider class once against the stand-in; returns the exit status."""
    sink = JsonlSink(events_path)
    recorder = Recorder([ConsoleSink(out), sink])
    out.write(
        "spanledger demo: every provider mapping against a local STAND-IN server "
        "(hash vectors and word-overlap scores, not a real vendor)\n"
    )
    with StandIn() as standin, use(recorder):
        out.write(f"stand-in listening on {standin.url}\n\n")
        embedders: list[EmbeddingProvider] = [
            OpenAIEmbeddings("text-embedding-3-small", base_url=standin.base_url("openai")),
            CohereEmbeddings("embed-v4.0", base_url=standin.base_url("cohere")),
            JinaEmbeddings("jina-embeddings-v3", base_url=standin.base_url("jina")),
            TEIEmbeddings("BAAI/bge-small-en-v1.5", base_url=standin.base_url("tei")),
            VoyageEmbeddings("voyage-3.5", base_url=standin.base_url("voyageai")),
            GeminiEmbeddings("gemini-embedding-001", base_url=standin.base_url("gcp.gemini")),
            VertexEmbeddings(
                "text-embedding-005", project="demo", base_url=standin.base_url("gcp.vertex_ai")
            ),
            AzureOpenAIEmbeddings("my-embedder", base_url=standin.base_url("azure.ai.openai")),
            MistralEmbeddings("mistral-embed", base_url=standin.base_url("mistral_ai")),
            OllamaEmbeddings("nomic-embed-text", base_url=standin.base_url("ollama")),
        ]
        rerankers: list[RerankProvider] = [
            CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere")),
            JinaReranker("jina-reranker-v2-base-multilingual", base_url=standin.base_url("jina")),
            TEIReranker("BAAI/bge-reranker-base", base_url=standin.base_url("tei")),
            VoyageReranker("rerank-2.5", base_url=standin.base_url("voyageai")),
            VertexReranker(
                "semantic-ranker-default-004",
                project="demo",
                base_url=standin.base_url("gcp.vertex_ai"),
            ),
        ]
        try:
            for embedder in embedders:
                embedder.embed(PASSAGES, input_type="document")
            embedders[1].embed([QUESTION], input_type="query")

            pool = [f"{passage} (copy {n})" for n in range(5) for passage in PASSAGES]
            chunked = embedders[3].embed(pool)
            out.write(
                f"  ^ chunked: {len(pool)} inputs sent as {len(chunked.raw)} requests "
                f"(TEI accepts 32 per request)\n"
            )
            unreported = OpenAIEmbeddings("usage-malformed", base_url=standin.base_url("openai"))
            unreported.embed([QUESTION])
            out.write("  ^ the stand-in sent usage 'abc': recorded as not reported, not 0\n")

            for reranker in rerankers:
                reranker.rerank(QUESTION, PASSAGES, top_k=3)

            failing = VoyageReranker("fail-429", base_url=standin.base_url("voyageai"))
            try:
                failing.rerank(QUESTION, PASSAGES)
            except ProviderError as error:
                out.write(f"  ^ raised ProviderError: {error}\n")
        finally:
            for provider in [*embedders, *rerankers]:
                provider.close()
    recorder.shutdown()

    log = read_events(events_path)
    out.write(
        f"\nwrote {len(log.events)} events to {events_path} "
        f"({len(log.problems)} unreadable lines); payload is never written to the log\n"
    )
    return 0
