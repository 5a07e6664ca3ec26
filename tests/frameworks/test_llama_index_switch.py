"""The switch and LlamaIndex's root dispatcher: spanledger's two handlers are added once, taken
off with the switch, wait for LlamaIndex's own import, never raise into it, and every request a
run opened is closed, whatever happens to the run or the switch."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index_instrumentation import get_dispatcher

import spanledger
from spanledger.attribution import current_request
from spanledger.integrations.llama_index import handlers, pipeline
from spanledger.testing import StandIn, openai_chat_completions
from tests.frameworks.llama_index_rig import (
    PRIVATE,
    QUESTION,
    StandInLLM,
    answering,
    index_of,
    switched_on,
)

__all__ = ["PRIVATE"]


def ours() -> tuple[int, int]:
    """How many of spanledger's handlers the root dispatcher holds: (event, span)."""
    dispatcher = get_dispatcher()
    return (
        sum(isinstance(handler, handlers.EventHandler) for handler in dispatcher.event_handlers),
        sum(isinstance(handler, handlers.SpanHandler) for handler in dispatcher.span_handlers),
    )


@pytest.fixture(scope="module")
def index(standin: StandIn) -> VectorStoreIndex:
    return index_of(standin, labelled=True)


def test_the_handlers_are_added_once_and_taken_off_with_the_switch() -> None:
    assert ours() == (0, 0)
    spanledger.instrument(sdks=["llama_index.core"])
    spanledger.instrument(sdks=["llama_index.core"])
    spanledger.instrument()
    assert ours() == (1, 1)
    spanledger.uninstrument()
    assert ours() == (0, 0)
    spanledger.instrument(sdks=["llama_index.core"])
    assert ours() == (1, 1)
    spanledger.uninstrument()
    assert ours() == (0, 0)


def test_switched_off_a_query_inside_a_request_captures_nothing(
    standin: StandIn, index: VectorStoreIndex
) -> None:
    standin.reset()
    llm = StandInLLM(base_url=standin.base_url("openai") + "/v1")
    with spanledger.request("turn-1") as turn:
        index.as_query_engine(llm=llm).query(QUESTION)
        assert not turn.context.captured
        assert turn.frames.report().uses == ()


def test_the_switch_waits_for_llamaindex_to_be_imported_and_never_imports_it() -> None:
    code = (
        "import sys, spanledger\n"
        "spanledger.instrument(sdks=['llama_index.core'])\n"
        "print('llama_index.core' in sys.modules)\n"
        "import llama_index.core\n"
        "from llama_index_instrumentation import get_dispatcher\n"
        "from spanledger.integrations.llama_index import handlers\n"
        "names = lambda: [type(h).__name__ for h in get_dispatcher().event_handlers]\n"
        "print(names().count('EventHandler'), handlers.registered())\n"
        "spanledger.uninstrument()\n"
        "print(names().count('EventHandler'), handlers.registered())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split("\n")[:3] == ["False", "1 True", "0 False"]


def test_a_failure_inside_the_handlers_never_reaches_llamaindex(
    standin: StandIn, index: VectorStoreIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.reset()
    standin.route(openai_chat_completions(answer=answering(0)))
    engine = index.as_query_engine(llm=StandInLLM(base_url=standin.base_url("openai") + "/v1"))
    bare = str(engine.query(QUESTION))

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ValueError("broken")

    for name in ("retrieved", "candidates", "chosen", "model_started", "model_ended", "state_of"):
        monkeypatch.setattr(pipeline, name, broken)
    with switched_on() as kept:
        assert str(engine.query(QUESTION)) == bare
        with spanledger.request("turn-2"):
            assert str(engine.query(QUESTION)) == bare
    assert current_request() is None
    assert len(kept.events) == 2  # the embeddings still record


def test_a_run_that_raises_closes_its_request(standin: StandIn, index: VectorStoreIndex) -> None:
    standin.reset()
    standin.route(openai_chat_completions().failing(500))
    llm = StandInLLM(base_url=standin.base_url("openai") + "/v1")
    with switched_on() as kept:
        with pytest.raises(Exception, match="500"):
            index.as_query_engine(llm=llm).query(QUESTION)
        assert current_request() is None
    [record] = kept.records
    assert record.request_id.startswith("llama_index:RetrieverQueryEngine.query:")
    assert record.frames_served == 2
    assert record.model_calls == 1


class HeldLLM(StandInLLM):
    """Waits for ``release`` before posting a prompt (its call has started), after saying so
    (``called``)."""

    called: Any
    release: Any

    def _post(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        self.called.set()
        self.release.wait(30)
        return super()._post(messages)


def test_switching_off_during_a_run_still_closes_its_request(
    standin: StandIn, index: VectorStoreIndex
) -> None:
    standin.reset()
    called, release = threading.Event(), threading.Event()
    llm = HeldLLM(base_url=standin.base_url("openai") + "/v1", called=called, release=release)
    engine = index.as_query_engine(llm=llm)
    scopes: list[object] = []

    def run() -> None:
        engine.query(QUESTION)
        scopes.append(current_request())

    with switched_on() as kept:
        worker = threading.Thread(target=spanledger.carry(run))
        worker.start()
        assert called.wait(30)
    assert ours() == (0, 1), "the span handler stays until the run it opened a request for ends"
    release.set()
    worker.join(30)
    assert scopes == [None]
    assert ours() == (0, 0)
    [record] = kept.records
    assert record.frames_rendered == 2
