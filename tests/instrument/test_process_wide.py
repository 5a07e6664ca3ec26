"""``spanledger.instrument()`` with no client: every client of the supported SDKs records,
those made before the switch and those made after; ``uninstrument()`` puts everything back."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import threading
from collections.abc import Iterator
from typing import Any

import cohere
import openai
import pytest
from openai.resources.embeddings import AsyncEmbeddings, Embeddings
from voyageai.client import Client as VoyageClient
from voyageai.client_async import AsyncClient as AsyncVoyageClient

import spanledger
from spanledger import EmbeddingEvent, Recorder, RerankEvent
from spanledger.instrumentation import instrumented_sdks, is_instrumented
from spanledger.integrations import INTEGRATIONS
from spanledger.testing import StandIn
from tests.forking import fork, outcome, timed
from tests.instrument.conftest import OP_IDS, OPS, TEXTS, Op, Tape

RECORD_LIMIT = 5.0
"""Seconds within which a forked child must have switched on, recorded and switched off."""

SDK_METHODS: list[tuple[type, str]] = [
    (Embeddings, "create"),
    (AsyncEmbeddings, "create"),
    (cohere.ClientV2, "embed"),
    (cohere.ClientV2, "rerank"),
    (cohere.AsyncClientV2, "embed"),
    (cohere.AsyncClientV2, "rerank"),
    (VoyageClient, "embed"),
    (VoyageClient, "rerank"),
    (AsyncVoyageClient, "embed"),
    (AsyncVoyageClient, "rerank"),
]


def class_state() -> list[tuple[bool, object]]:
    """What each patched class holds itself (``False``: it inherits the method)."""
    return [(name in vars(owner), vars(owner).get(name)) for owner, name in SDK_METHODS]


@pytest.fixture
def switched() -> Iterator[None]:
    before = class_state()
    spanledger.instrument()
    try:
        yield
    finally:
        spanledger.uninstrument()
        assert class_state() == before


def one_event(tape: Tape, op: Op) -> EmbeddingEvent | RerankEvent:
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent if op.operation == "embeddings" else RerankEvent)
    assert event.provider == op.provider
    return event


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_clients_made_before_and_after_the_switch_record_once_each(
    op: Op, standin: StandIn
) -> None:
    made_before = op.client(standin)
    spanledger.instrument()
    try:
        made_after = op.client(standin)
        assert not is_instrumented(made_before)
        record_twice(op, made_before)
        record_twice(op, made_after)
    finally:
        spanledger.uninstrument()


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_a_client_made_before_records_every_first_call_made_at_once(
    op: Op, standin: StandIn
) -> None:
    """Threads making their first calls on a client made before the switch at the same moment
    are each recorded: the one that adopts the client and those that waited for it."""
    made_before = op.client(standin)
    threads = 8
    start = threading.Barrier(threads)
    tape = Tape()

    def call() -> None:
        start.wait(timeout=10)
        op.call(made_before, "m-1", TEXTS)

    spanledger.instrument()
    try:
        with spanledger.use(Recorder([tape])):
            workers = [threading.Thread(target=spanledger.carry(call)) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(timeout=30)
    finally:
        spanledger.uninstrument()
    assert not any(worker.is_alive() for worker in workers)
    assert len(tape.events) == threads


def record_twice(op: Op, client: Any) -> None:
    """Two calls: two events with the stand-in's figures, the SDK's result unchanged."""
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        result = op.call(client, "m-1", TEXTS)
        again = op.call(client, "m-1", TEXTS)
    assert op.dump(result) == op.dump(again)
    assert len(tape.events) == 2
    event = tape.events[0]
    assert isinstance(event, EmbeddingEvent | RerankEvent)
    assert event.model == "m-1"
    assert event.usage is not None
    assert event.usage.model_dump(exclude_none=True) == {
        k: v for k, v in op.expected_usage(TEXTS).items() if v is not None
    }
    assert is_instrumented(client)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_async_clients_record_under_the_switch(op: Op, standin: StandIn, switched: None) -> None:
    client = op.client(standin, is_async=True)
    tape = Tape()

    async def call() -> Any:
        return await op.acall(client, "m-2", TEXTS)

    with spanledger.use(Recorder([tape])):
        asyncio.run(call())
    assert one_event(tape, op).model == "m-2"


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_a_client_instrumented_by_hand_as_well_records_each_call_once(
    op: Op, standin: StandIn
) -> None:
    by_hand_first = spanledger.instrument(op.client(standin))
    spanledger.instrument()
    try:
        by_hand_after = spanledger.instrument(op.client(standin))
        for client in (by_hand_first, by_hand_after):
            tape = Tape()
            with spanledger.use(Recorder([tape])):
                op.call(client, "m-3", TEXTS)
            one_event(tape, op)
    finally:
        spanledger.uninstrument()
    for client in (by_hand_first, by_hand_after):  # the switch leaves them as the user made them
        assert is_instrumented(client)
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            op.call(client, "m-4", TEXTS)
        one_event(tape, op)
        spanledger.uninstrument(client)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_switching_off_stops_recording_and_uninstruments_what_it_adopted(
    op: Op, standin: StandIn
) -> None:
    before = class_state()
    spanledger.instrument()
    client = op.client(standin)
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        op.call(client, "m-5", TEXTS)
        spanledger.uninstrument()
        op.call(client, "m-5", TEXTS)
    assert len(tape.events) == 1
    assert not is_instrumented(client)
    assert class_state() == before
    assert instrumented_sdks() == ()


def test_naming_sdks_switches_only_those(standin: StandIn) -> None:
    openai_op, cohere_op = OPS[0], OPS[1]
    spanledger.instrument(sdks=["cohere"])
    try:
        assert instrumented_sdks() == ("cohere",)
        tape = Tape()
        with spanledger.use(Recorder([tape])):
            openai_op.call(openai_op.client(standin), "m-6", TEXTS)
            cohere_op.call(cohere_op.client(standin), "m-6", TEXTS)
        assert [event.provider for event in tape.events] == ["cohere"]
        spanledger.instrument(sdks=["cohere"])  # twice: no change
        assert instrumented_sdks() == ("cohere",)
    finally:
        spanledger.uninstrument()


def test_switching_on_twice_changes_nothing(standin: StandIn, switched: None) -> None:
    state = class_state()
    spanledger.instrument()
    assert class_state() == state
    installed = {i.name for i in INTEGRATIONS if i.installed_version() is not None}
    assert set(instrumented_sdks()) == installed  # each installed one (all of them, in dev)


def test_bad_names_are_refused_with_a_sentence() -> None:
    with pytest.raises(
        ValueError,
        match=r"no SDK named 'anthropic'.*botocore, cohere, flashrank, google\.genai, haystack, "
        r"langchain_core, llama_index\.core, mistralai, ollama, openai, sentence_transformers, "
        r"vertexai, voyageai",
    ):
        spanledger.instrument(sdks=["anthropic"])
    with pytest.raises(TypeError, match="list of SDK names"):
        spanledger.instrument(sdks="openai")
    with pytest.raises(TypeError, match="pass no client"):
        spanledger.instrument(openai.OpenAI(api_key="k"), sdks=["openai"])  # type: ignore[call-overload]
    assert instrumented_sdks() == ()


def test_an_untested_sdk_version_is_left_alone_and_the_rest_switched_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.metadata.version

    def version(name: str) -> str:
        return "8.0.1" if name == "cohere" else real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    before = class_state()
    spanledger.instrument(sdks=["openai", "cohere"])
    try:
        assert instrumented_sdks() == ("openai",)
        assert class_state()[2:6] == before[2:6]  # cohere's methods untouched
    finally:
        spanledger.uninstrument()
    assert class_state() == before


def test_a_client_the_switch_cannot_instrument_is_passed_through(
    standin: StandIn, switched: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spanledger.integrations.cohere import client as cohere_client

    def broken(client: Any, installation: Any) -> None:
        raise RuntimeError("the SDK changed under us")

    monkeypatch.setattr(cohere_client, "install", broken)
    op = OPS[1]
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        result = op.call(op.client(standin), "m-7", TEXTS)
    assert op.dump(result)[0] is type(result)
    assert tape.events == []


def test_copies_made_with_with_options_record_too(standin: StandIn, switched: None) -> None:
    op = OPS[0]
    client = op.client(standin).with_options(timeout=5)
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        op.call(client, "m-8", TEXTS)
    one_event(tape, op)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
def test_a_client_uninstrumented_under_the_switch_is_taken_up_again(
    op: Op, standin: StandIn, switched: None
) -> None:
    client = op.client(standin)
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        op.call(client, "m-9", TEXTS)
        spanledger.uninstrument(client)
        op.call(client, "m-9", TEXTS)
    assert len(tape.events) == 2
    for event in tape.events:
        assert isinstance(event, EmbeddingEvent | RerankEvent)
        assert event.usage is not None  # the body was read: the client's hooks are back
    assert is_instrumented(client)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_switch_lock_is_held_can_switch_and_record(
    standin: StandIn,
) -> None:
    from spanledger.instrumentation import _everywhere, _http_everywhere

    op = OPS[1]
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with _everywhere._lock, _http_everywhere._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:

        def child() -> int:
            spanledger.instrument(http=True)
            tape = Tape()
            with spanledger.use(Recorder([tape])):
                op.call(op.client(standin), "m-fork", TEXTS)
            spanledger.uninstrument()
            return 0 if len(tape.events) == 1 and not instrumented_sdks() else 1

        pid = fork(timed(RECORD_LIMIT, child))
        assert outcome(pid) == 0
    finally:
        release.set()
        holder.join(5)


def test_the_switch_supports_exactly_the_versions_the_test_extras_pin() -> None:
    """Each declared range is pinned by the ``dev`` or ``older-sdks`` extra, except the newest
    one, which the ``newest`` lane covers unpinned (``tests/frameworks/test_newest_releases.py``
    holds its release inside it); an exact pin is a release below its range on purpose."""
    import re
    import tomllib
    from pathlib import Path

    from spanledger.integrations import INTEGRATIONS

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    by_distribution = {integration.distribution: integration for integration in INTEGRATIONS}
    pins: dict[str, set[tuple[tuple[int, ...], tuple[int, ...]]]] = {}
    exact: dict[str, str] = {}
    for requirement in extras["dev"] + extras["older-sdks"]:
        ranged = re.fullmatch(r"([\w-]+)>=([\d.]+),<([\d.]+)", requirement)
        pinned = re.fullmatch(r"([\w-]+)==([\d.]+)", requirement)
        if ranged and ranged.group(1) in by_distribution:
            low, below = (tuple(map(int, v.split("."))) for v in ranged.group(2, 3))
            pins.setdefault(ranged.group(1), set()).add((low, below))
        elif pinned and pinned.group(1) in by_distribution:
            exact[pinned.group(1)] = pinned.group(2)
    assert set(pins) == set(by_distribution)
    for distribution, integration in by_distribution.items():
        unpinned = set(integration.tested) - pins[distribution]
        assert pins[distribution] <= set(integration.tested), distribution
        assert unpinned <= {max(integration.tested)}, distribution
        if unpinned:
            assert distribution in extras["newest"], distribution
    for distribution, version in exact.items():
        assert not by_distribution[distribution].tests(version), distribution
    assert set(extras["newest"]) >= set(by_distribution) - {"google-cloud-aiplatform"}


def test_the_switch_skips_an_sdk_whose_parent_package_is_not_installed() -> None:
    """``google.genai`` is looked up under ``google``: with no ``google`` at all, the default
    switch leaves it out instead of failing (a machine with none of the clouds' SDKs)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "sys.modules['google'] = None  # as if no google package were installed\n"
        "sys.modules['vertexai'] = None  # (it comes with google-cloud-aiplatform)\n"
        "import spanledger\n"
        "spanledger.instrument()\n"
        "from spanledger.instrumentation import instrumented_sdks\n"
        "print(' '.join(instrumented_sdks()))\n"
        "spanledger.uninstrument()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    switched = done.stdout.split()
    assert "google.genai" not in switched
    assert {"openai", "cohere", "voyageai"} <= set(switched)
