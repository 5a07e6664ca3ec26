"""``spanledger demo``: drive every provider mapping against the local stand-in, offline.

Each call's event goes to the console and to a JSONL event log, which is read back at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from spanledger.errors import ProviderError
from spanledger.eventlog import read_events
from spanledger.exporters import ConsoleSink, JsonlSink
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    JinaEmbeddings,
    JinaReranker,
    OpenAIEmbeddings,
    RerankProvider,
    TEIEmbeddings,
    TEIReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.recorder import Recorder, use
from spanledger.standin import StandIn

__all__ = ["PASSAGES", "QUESTION", "run_demo"]

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


def run_demo(events_path: Path, out: TextIO) -> int:
    """Run the demo calls; returns the process exit status."""
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
            VoyageEmbeddings("voyage-3.5", base_url=standin.base_url("voyage")),
        ]
        rerankers: list[RerankProvider] = [
            CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere")),
            JinaReranker("jina-reranker-v2-base-multilingual", base_url=standin.base_url("jina")),
            TEIReranker("BAAI/bge-reranker-base", base_url=standin.base_url("tei")),
            VoyageReranker("rerank-2.5", base_url=standin.base_url("voyage")),
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

            failing = VoyageReranker("fail-429", base_url=standin.base_url("voyage"))
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
