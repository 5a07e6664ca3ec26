"""Attribution with no framework: a plain app's SDK calls, under ``instrument(http=True)``
inside ``spanledger.request(...)``, give the served, selected, rendered and cited sets by
themselves: the rerank call serves its documents and selects its results, the chat call
renders them and its answer cites them (a label the prompt gave, or the provider's own
citations). Every expected figure is counted here by hand from the texts.

All traffic goes to the loopback stand-in.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import cohere
import openai
import pytest

import spanledger
from spanledger.attribution import ContextUse, Evidence, ProblemKind, RequestScope
from spanledger.testing import (
    StandIn,
    anthropic_messages,
    openai_chat_completions,
)

from .conftest import API_KEY, PASSAGES, QUESTION, SENTINEL, accounting_tokens, digest_of

DOCS = [passage.replace(" ", f" {SENTINEL} ", 1) for passage in PASSAGES]
"""The passages, each holding the sentinel inside it (passages that all end alike are a case
the matcher has trouble with, which is not what these tests are about)."""
ASK = f"{QUESTION} {SENTINEL}"


@pytest.fixture(params=["sdk captures", "http only"])
def switched(request: pytest.FixtureRequest) -> Iterator[None]:
    """The switch on with ``http=True``: the SDK captures recording the rerank, or only the
    HTTP switch."""
    sdks = ["cohere", "openai"] if request.param == "sdk captures" else []
    spanledger.instrument(sdks=sdks, http=True)
    try:
        yield
    finally:
        spanledger.uninstrument()


@pytest.fixture
def server(standin: StandIn) -> Iterator[StandIn]:
    standin.reset()
    yield standin
    standin.reset()


def cohere_client(server: StandIn) -> cohere.ClientV2:
    return cohere.ClientV2(api_key=API_KEY, base_url=server.base_url("cohere"))


def openai_client(server: StandIn) -> openai.OpenAI:
    return openai.OpenAI(api_key=API_KEY, base_url=server.base_url("openai") + "/v1", max_retries=0)


@dataclass(frozen=True)
class Sets:
    """A request's uses by document text: which were served, selected, rendered, cited."""

    uses: dict[str, ContextUse]

    @classmethod
    def of(cls, scope: RequestScope, texts: Sequence[str]) -> Sets:
        report = scope.frames.report()
        by_digest = {use.frame.content_digest: use for use in report.uses}
        return cls(
            {text: by_digest[digest_of(text)] for text in texts if digest_of(text) in by_digest}
        )

    def served(self) -> set[str]:
        return set(self.uses)

    def selected(self) -> set[str]:
        return {text for text, use in self.uses.items() if use.selected}

    def rendered(self) -> set[str]:
        return {text for text, use in self.uses.items() if use.rendered}

    def cited(self) -> dict[str, Evidence | None]:
        return {text: use.evidence for text, use in self.uses.items() if use.cited}


def labelled(texts: Sequence[str]) -> str:
    return "\n\n".join(f"[{number}] {text}" for number, text in enumerate(texts, start=1))


def share(cited: Sequence[str], rendered: Sequence[str]) -> float:
    """The cited token share, counted by hand: accounting tokens of the cited frames over
    those of every rendered frame."""
    return sum(map(accounting_tokens, cited)) / sum(map(accounting_tokens, rendered))


def reranked(server: StandIn, top_n: int) -> list[str]:
    """Rerank DOCS through the Cohere SDK; the documents its results name, best first."""
    ranked = cohere_client(server).rerank(
        model="rerank-v3.5", query=ASK, documents=DOCS, top_n=top_n
    )
    return [DOCS[result.index] for result in ranked.results]


def test_a_cohere_rerank_and_an_openai_chat_give_every_set_and_the_share(
    switched: None, server: StandIn
) -> None:
    server.route(openai_chat_completions(answer=f"The moon drives the tides [1], {SENTINEL}."))
    events: list[spanledger.Event] = []
    with (
        spanledger.use(spanledger.Recorder([events.append])),
        spanledger.request("turn-plain") as turn,
    ):
        chosen = reranked(server, top_n=3)
        shown = chosen[:2]
        reply = openai_client(server).chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": "Answer from the sources; cite them as [n]."},
                {"role": "user", "content": f"{labelled(shown)}\n\n{ASK}"},
            ],
        )
        sets = Sets.of(turn, DOCS)
        report = turn.report(emit=False)
    assert reply.choices[0].message.content == f"The moon drives the tides [1], {SENTINEL}."
    assert [event.kind for event in events] == ["rerank"]  # the chat call records no event
    assert sets.served() == set(DOCS)
    assert sets.selected() == set(chosen)
    assert sets.rendered() == set(shown)
    assert sets.cited() == {shown[0]: Evidence.PROMPT_LABEL}
    assert {use.frame.provider_id for use in sets.uses.values()} == {"cohere"}
    assert report.attribution.cited_token_share() == share(shown[:1], shown)
    assert report.attribution.is_coherent()
    (call,) = turn.context.calls()
    assert (call.provider, call.model) == ("openai", "gpt-4o-mini")
    prompt = "Answer from the sources; cite them as [n].\n" + f"{labelled(shown)}\n\n{ASK}"
    assert call.input_tokens == accounting_tokens(prompt)


def test_anthropic_citations_are_provider_citation_evidence(
    switched: None, server: StandIn
) -> None:
    server.route(anthropic_messages(cite=[1]))
    with spanledger.request("turn-claude") as turn:
        chosen = reranked(server, top_n=3)
        documents = [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text},
                "title": f"passage {number}",
                "citations": {"enabled": True},
            }
            for number, text in enumerate(chosen)
        ]
        messages: Any = [{"role": "user", "content": [*documents, {"type": "text", "text": ASK}]}]
        message = anthropic.Anthropic(
            api_key=API_KEY, base_url=server.base_url("anthropic"), max_retries=0
        ).messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages)
        sets = Sets.of(turn, DOCS)
        report = turn.report(emit=False)
    (block,) = message.content
    assert isinstance(block, anthropic.types.TextBlock)
    assert [getattr(cited, "document_index", None) for cited in block.citations or ()] == [1]
    assert sets.selected() == sets.rendered() == set(chosen)
    assert sets.cited() == {chosen[1]: Evidence.PROVIDER_CITATION}
    assert report.attribution.cited_token_share() == share(chosen[1:2], chosen)
    (call,) = turn.context.calls()
    assert call.provider == "anthropic"


def test_cohere_chat_with_documents_cites_them_by_id(switched: None, server: StandIn) -> None:
    with spanledger.request("turn-cohere") as turn:
        chosen = reranked(server, top_n=3)
        client = cohere_client(server)
        by_id = client.chat(
            model="command-a-03-2025",
            messages=[cohere.UserChatMessageV2(content=ASK)],
            documents=[
                cohere.Document(id=f"kb-{n}", data={"text": text}) for n, text in enumerate(chosen)
            ],
        )
        as_texts = client.chat(
            model="command-a-03-2025",
            messages=[cohere.UserChatMessageV2(content=ASK)],
            documents=chosen[2:],
        )
        sets = Sets.of(turn, DOCS)
    assert [
        source.id for citation in by_id.message.citations or () for source in citation.sources or ()
    ] == [
        "kb-0",
        "kb-1",
    ]
    assert [s.id for c in as_texts.message.citations or () for s in c.sources or ()] == ["doc:0"]
    assert sets.rendered() == set(chosen)
    assert sets.cited() == dict.fromkeys(chosen, Evidence.PROVIDER_CITATION)
    assert [call.provider for call in turn.context.calls()] == ["cohere", "cohere"]


def test_a_label_no_passage_was_given_is_an_unknown_label(switched: None, server: StandIn) -> None:
    server.route(
        openai_chat_completions(answer=f"Tides follow the moon [1] and the sun [7]. {SENTINEL}")
    )
    with spanledger.request("turn-phantom") as turn:
        shown = reranked(server, top_n=2)
        openai_client(server).chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"{labelled(shown)}\n\n{ASK}"}],
        )
        report = turn.report(emit=False)
    problems = report.attribution.problems()
    assert [problem.kind for problem in problems] == [ProblemKind.UNKNOWN_LABEL]
    assert SENTINEL not in repr(problems)
    assert Sets.of(turn, DOCS).cited() == {shown[0]: Evidence.PROMPT_LABEL}


async def test_async_clients_give_the_same_sets(switched: None, server: StandIn) -> None:
    with spanledger.request("turn-async") as turn:
        ranked = await cohere.AsyncClientV2(
            api_key=API_KEY, base_url=server.base_url("cohere")
        ).rerank(model="rerank-v3.5", query=ASK, documents=DOCS, top_n=2)
        chosen = [DOCS[result.index] for result in ranked.results]
        await openai.AsyncOpenAI(
            api_key=API_KEY, base_url=server.base_url("openai") + "/v1", max_retries=0
        ).chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": f"{labelled(chosen)}\n\n{ASK}"}],
        )
        sets = Sets.of(turn, DOCS)
    assert sets.selected() == sets.rendered() == set(chosen)
    assert sets.cited() == dict.fromkeys(chosen, Evidence.PROMPT_LABEL)  # [1] and [2]


def one_turn(server: StandIn, name: str, texts: list[str], barrier: threading.Barrier) -> Sets:
    with spanledger.request(name) as turn:
        ranked = cohere_client(server).rerank(
            model="rerank-v3.5", query=ASK, documents=texts, top_n=1
        )
        chosen = texts[ranked.results[0].index]
        barrier.wait(timeout=10)  # both requests are open and have served before either chats
        openai_client(server).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"[1] {chosen}\n\n{ASK}"}]
        )
        barrier.wait(timeout=10)
        return Sets.of(turn, DOCS + OTHER_DOCS)


OTHER_DOCS = [
    f"Harbours {SENTINEL} fill at high water and empty at low water.",
    f"Ferries {SENTINEL} keep to timetables set by the tide tables.",
    f"Mudflats {SENTINEL} show at low tide and hide the wading birds' food.",
]


def test_concurrent_requests_stay_apart(switched: None, server: StandIn) -> None:
    barrier = threading.Barrier(2)
    results: dict[str, Sets] = {}

    def run(name: str, texts: list[str]) -> None:
        results[name] = one_turn(server, name, texts, barrier)

    threads = [
        threading.Thread(target=run, args=("turn-a", DOCS)),
        threading.Thread(target=run, args=("turn-b", OTHER_DOCS)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results["turn-a"].served() == set(DOCS)
    assert results["turn-b"].served() == set(OTHER_DOCS)
    for name in results:
        assert len(results[name].selected()) == len(results[name].cited()) == 1
        assert results[name].rendered() == results[name].selected()


async def test_concurrent_async_requests_stay_apart(switched: None, server: StandIn) -> None:
    async def turn(name: str, texts: list[str]) -> Sets:
        with spanledger.request(name) as scope:
            ranked = await cohere.AsyncClientV2(
                api_key=API_KEY, base_url=server.base_url("cohere")
            ).rerank(model="rerank-v3.5", query=ASK, documents=texts, top_n=1)
            await asyncio.sleep(0)  # let the other request serve too
            chosen = texts[ranked.results[0].index]
            await openai.AsyncOpenAI(
                api_key=API_KEY, base_url=server.base_url("openai") + "/v1", max_retries=0
            ).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": f"[1] {chosen}"}]
            )
            return Sets.of(scope, DOCS + OTHER_DOCS)

    first, second = await asyncio.gather(turn("turn-x", DOCS), turn("turn-y", OTHER_DOCS))
    assert first.served() == set(DOCS)
    assert second.served() == set(OTHER_DOCS)
    assert len(first.cited()) == len(second.cited()) == 1
