"""``turn.serve`` takes what a framework's retriever returned: LangChain ``Document`` and
LlamaIndex ``NodeWithScore`` lists, read for their text and ids with the real classes, and
without spanledger ever importing either framework itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode

import spanledger
from spanledger import Event, Recorder
from spanledger.attribution import FrameId, ServedFrame
from spanledger.events import AttributionRecord

from .conftest import PASSAGES, SENTINEL, accounting_tokens, digest_of


def frames(provider_id: str, ids: list[str], texts: list[str]) -> list[ServedFrame]:
    return [
        ServedFrame(FrameId(provider_id, frame, digest_of(text)), accounting_tokens(text))
        for frame, text in zip(ids, texts, strict=True)
    ]


def test_langchain_documents_are_served_under_their_own_ids() -> None:
    documents = [
        Document(page_content=PASSAGES[2], id="kb-2", metadata={"source": "tides.md"}),
        Document(page_content=PASSAGES[0], id="kb-0"),
    ]
    with spanledger.request("turn-lc") as turn:
        served = turn.serve(documents, provider_id="vector")
    assert served == frames("vector", ["kb-2", "kb-0"], [PASSAGES[2], PASSAGES[0]])


def test_langchain_ids_come_from_metadata_when_the_document_has_none() -> None:
    documents = [
        Document(page_content=PASSAGES[1], metadata={"id": "meta-1"}),
        Document(page_content=PASSAGES[3], metadata={"doc_id": 7}),
    ]
    with spanledger.request("turn-meta") as turn:
        served = turn.serve(documents, provider_id="bm25")
    assert served == frames("bm25", ["meta-1", "7"], [PASSAGES[1], PASSAGES[3]])


def test_positions_name_them_all_when_any_document_has_no_id() -> None:
    documents = [
        Document(page_content=PASSAGES[0], id="kb-0"),
        Document(page_content=PASSAGES[1], metadata={"source": "no id here"}),
    ]
    with spanledger.request("turn-mixed") as turn:
        served = turn.serve(documents, provider_id="vector")
    assert served == frames("vector", ["0", "1"], PASSAGES[:2])


def test_llama_index_scored_nodes_are_served_with_their_node_ids_and_text_only() -> None:
    nodes = [
        NodeWithScore(
            node=TextNode(text=PASSAGES[3], id_="node-3", metadata={"title": "lighthouses"}),
            score=0.9,
        ),
        NodeWithScore(node=TextNode(text=PASSAGES[1], id_="node-1"), score=0.4),
    ]
    with spanledger.request("turn-li") as turn:
        served = turn.serve(nodes, provider_id="reranked")
    assert served == frames("reranked", ["node-3", "node-1"], [PASSAGES[3], PASSAGES[1]])


def test_ids_given_by_the_caller_win() -> None:
    documents = [Document(page_content=text, id=f"kb-{n}") for n, text in enumerate(PASSAGES[:2])]
    with spanledger.request("turn-ids") as turn:
        served = turn.serve(documents, provider_id="vector", ids=["a", "b"])
    assert served == frames("vector", ["a", "b"], PASSAGES[:2])


def test_framework_documents_carry_their_own_text() -> None:
    documents = [Document(page_content=PASSAGES[0])]
    with spanledger.request("turn-both") as turn, pytest.raises(ValueError, match="own text"):
        turn.serve(documents, PASSAGES, provider_id="vector")


def test_a_list_mixing_documents_and_other_things_is_refused() -> None:
    mixed = [Document(page_content=PASSAGES[0]), PASSAGES[1]]
    with spanledger.request("turn-mix") as turn, pytest.raises(TypeError, match="Document"):
        turn.serve(mixed, provider_id="vector")


class Kept:
    """A sink keeping the attribution records it is handed."""

    def __init__(self) -> None:
        self.records: list[AttributionRecord] = []

    def emit(self, event: Event) -> None:
        return None

    def attribution(self, record: AttributionRecord) -> None:
        self.records.append(record)


def test_served_documents_reach_a_cited_token_share_and_no_text_leaves() -> None:
    documents = [Document(page_content=f"{PASSAGES[n]} {SENTINEL}", id=f"kb-{n}") for n in range(3)]
    kept = Kept()
    with spanledger.use(Recorder([kept])), spanledger.request("turn-share") as turn:
        served = turn.serve(documents, provider_id="vector")
        turn.render(served)
        turn.cite_from_text("Tides follow the moon [kb-0].", {"kb-0": served[0]})
        report = turn.report()
    share = report.attribution.cited_token_share()
    cited = accounting_tokens(documents[0].page_content)
    assert share == pytest.approx(cited / sum(frame.token_cost for frame in served))
    [record] = kept.records
    assert record.cited_token_share == pytest.approx(share)
    assert SENTINEL not in record.model_dump_json()
    assert SENTINEL not in repr(report)


def test_spanledger_never_imports_a_framework_itself() -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import spanledger
        with spanledger.request("plain") as turn:
            turn.serve(["one passage", "another"], provider_id="p")
        loaded = [m for m in sys.modules if m.split(".")[0] in ("langchain_core", "llama_index")]
        print(json.dumps(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == []
