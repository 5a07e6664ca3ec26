"""The SDK calls ``bench_peers.py`` times, the peers that trace them, and a switch for a peer.

Every client answers in process: OpenAI and Cohere (sync and async) through an httpx mock
transport, Voyage by its requestor returning the decoded body at once (it speaks ``requests``;
see ``answer_voyage_in_process``). The peers are switched without their ``uninstrument()``, which
does not always put the bare call back (OpenLLMetry's openai instrumentor leaves it slower with
every switch): ``PeerSwitch`` notes every method of the SDK packages that the peer's
``instrument()`` replaced, and swaps the SDK's own and the peer's in and out by assignment.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cohere
import httpx
import httpx2
import openai
from voyageai.api_resources.api_requestor import APIRequestor, VoyageHttpResponse

import bench_instrument as bench

SDK_ROOTS = ("openai", "cohere", "voyageai")
"""The packages whose methods a peer may replace."""

PEERS: dict[str, dict[str, str]] = {
    "OpenLLMetry": {
        "voyage": "opentelemetry.instrumentation.voyageai:VoyageAIInstrumentor",
        "openai": "opentelemetry.instrumentation.openai:OpenAIInstrumentor",
        "cohere": "opentelemetry.instrumentation.cohere:CohereInstrumentor",
    },
    "OpenInference": {
        "openai": "openinference.instrumentation.openai:OpenAIInstrumentor",
        "cohere": "openinference.instrumentation.cohere:CohereInstrumentor",
    },
}
"""Each peer library's instrumentor (``module:Class``) for each SDK it claims to trace."""

COHERE_EMBED_MODEL = "embed-v4.0"


@dataclass(frozen=True)
class Case:
    """One SDK call with one input size: ``make`` builds a fresh client answered in process
    and ``call`` makes the call on it."""

    name: str
    sdk: str
    texts: list[str]
    make: Callable[[], Any]
    call: Callable[[Any, list[str]], Callable[[], object]]


def cohere_embed_body(count: int) -> bytes:
    vectors = [[0.125] * bench.DIMENSIONS for _ in range(count)]
    body = {
        "id": "emb-1",
        "embeddings": {"float": vectors},
        "texts": ["x"] * count,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 3 * count}},
        "response_type": "embeddings_by_type",
    }
    return json.dumps(body).encode()


def cohere_transport(size: int) -> httpx.MockTransport:
    """Cohere's embed and rerank answered in process, for as many inputs as ``size``."""
    bodies = {"embed": cohere_embed_body(size), "rerank": bench.cohere_body(size)}

    def answer(request: httpx.Request) -> httpx.Response:
        body = bodies[request.url.path.rsplit("/", 1)[-1]]
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    return httpx.MockTransport(answer)


def cohere_client(size: int) -> cohere.ClientV2:
    return cohere.ClientV2(
        api_key="bench",
        max_retries=0,
        httpx_client=httpx.Client(transport=cohere_transport(size)),
    )


def cohere_async_client(size: int) -> cohere.AsyncClientV2:
    return cohere.AsyncClientV2(
        api_key="bench",
        max_retries=0,
        httpx_client=httpx.AsyncClient(transport=cohere_transport(size)),
    )


def openai_async_client(size: int) -> openai.AsyncOpenAI:
    body = bench.openai_body(size)
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=body, headers={"content-type": "application/json"}
        )
    )
    return openai.AsyncOpenAI(
        api_key="bench", max_retries=0, http_client=httpx2.AsyncClient(transport=transport)
    )


_LOOP = asyncio.new_event_loop()
"""The loop every async call runs on (its own cost is the same bare and recorded)."""


def awaited(start: Callable[[], Any]) -> Callable[[], object]:
    """A sync call that runs the coroutine ``start()`` makes to its end."""
    return lambda: _LOOP.run_until_complete(start())


def openai_async_call(client: openai.AsyncOpenAI, texts: list[str]) -> Callable[[], object]:
    return awaited(lambda: client.embeddings.create(model="text-embedding-3-small", input=texts))


def cohere_async_embed_call(client: cohere.AsyncClientV2, texts: list[str]) -> Callable[[], object]:
    return awaited(
        lambda: client.embed(
            texts=texts,
            model=COHERE_EMBED_MODEL,
            input_type="search_document",
            embedding_types=["float"],
        )
    )


def cohere_async_rerank_call(
    client: cohere.AsyncClientV2, texts: list[str]
) -> Callable[[], object]:
    return awaited(
        lambda: client.rerank(model="rerank-v3.5", query="what is a tick", documents=texts)
    )


def cohere_embed_call(client: cohere.ClientV2, texts: list[str]) -> Callable[[], object]:
    return lambda: client.embed(
        texts=texts,
        model=COHERE_EMBED_MODEL,
        input_type="search_document",
        embedding_types=["float"],
    )


def answer_voyage_in_process() -> None:
    """The Voyage SDK's requestor answers with the decoded body at once, with no HTTP stack
    under it: the bare call is the SDK's own work (its retry wrapper, building the result), so
    the microseconds each instrumentation adds are not lost in the noise of a ``requests``
    round trip ten times their size. Installed before anything is instrumented."""
    bodies = {
        (endpoint, count): json.loads(bench.voyage_body(endpoint, count))
        for endpoint in ("embeddings", "rerank")
        for count in (len(bench.SHORT), len(bench.LONG))
    }

    def request(
        self: APIRequestor, method: str, url: str, params: Any = None, *args: Any, **kwargs: Any
    ) -> VoyageHttpResponse:
        count = len(params.get("input") or params.get("documents") or ())
        return VoyageHttpResponse(bodies[url.rsplit("/", 1)[-1], count], {})  # type: ignore[no-untyped-call]

    APIRequestor.request = request  # type: ignore[method-assign]


def cases() -> Iterator[Case]:
    """Every call, with one short input and with 32 inputs of 400 characters."""
    for texts, label in ((bench.SHORT, "1 short input"), (bench.LONG, "32 x 400 chars")):
        size = len(texts)

        def voyage(size: int = size) -> Any:
            return bench.voyage_client(size)

        def openai(size: int = size) -> Any:
            return bench.openai_client(size)

        def cohere_v2(size: int = size) -> Any:
            return cohere_client(size)

        def openai_async(size: int = size) -> Any:
            return openai_async_client(size)

        def cohere_async(size: int = size) -> Any:
            return cohere_async_client(size)

        yield Case(f"voyage embed, {label}", "voyage", texts, voyage, bench.voyage_embed_call)
        yield Case(f"voyage rerank, {label}", "voyage", texts, voyage, bench.voyage_rerank_call)
        yield Case(f"openai embeddings, {label}", "openai", texts, openai, bench.openai_call)
        yield Case(f"cohere embed, {label}", "cohere", texts, cohere_v2, cohere_embed_call)
        yield Case(f"cohere rerank, {label}", "cohere", texts, cohere_v2, bench.cohere_call)
        yield Case(
            f"openai embeddings async, {label}", "openai", texts, openai_async, openai_async_call
        )
        yield Case(
            f"cohere embed async, {label}", "cohere", texts, cohere_async, cohere_async_embed_call
        )
        yield Case(
            f"cohere rerank async, {label}",
            "cohere",
            texts,
            cohere_async,
            cohere_async_rerank_call,
        )


def instrumentor(spec: str) -> Any:
    """The instrumentor named ``module:Class``; ``ImportError`` when it is not installed."""
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)()


Owners = dict[int, tuple[object, dict[str, object]]]
"""The SDK packages' modules and classes, by identity, each with its own attributes."""


def _owners() -> Owners:
    """Every module of the SDK packages and every class they define, with its attributes."""
    found: dict[int, object] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".", 1)[0] not in SDK_ROOTS:
            continue
        found[id(module)] = module
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__.split(".", 1)[0] in SDK_ROOTS:
                found[id(value)] = value
    return {key: (owner, dict(vars(owner))) for key, owner in found.items()}


_ABSENT = object()
"""What an attribute a peer added (a method it wrapped on a subclass) was before."""


class PeerSwitch:
    """Switches a peer on and off by putting its wrappers, or the SDK's own methods, back in
    place. Made around the peer's ``instrument()``: made first (after the calls to time were
    made once, so the SDK's lazily imported modules are there), ``after`` next."""

    def __init__(self) -> None:
        self._before = _owners()
        self._swaps: list[tuple[object, str, object, object]] = []
        self._on = True  # instrument() comes next

    def after(self) -> int:
        """Note what ``instrument()`` replaced or added; how many methods that was."""
        for owner, attributes in self._before.values():
            for attribute, value in list(vars(owner).items()):
                previous = attributes.get(attribute, _ABSENT)
                if previous is not value and _is_method(attribute, value):
                    self._swaps.append((owner, attribute, previous, value))
        return len(self._swaps)

    def on(self) -> None:
        if self._on:
            return
        self._on = True
        for owner, attribute, _, wrapped in self._swaps:
            setattr(owner, attribute, wrapped)

    def off(self) -> None:
        if not self._on:
            return
        self._on = False
        for owner, attribute, bare, _ in self._swaps:
            if bare is _ABSENT:
                delattr(owner, attribute)
            else:
                setattr(owner, attribute, bare)


def _is_method(attribute: str, value: object) -> bool:
    return (
        callable(value)
        and not isinstance(value, type | types.ModuleType)
        and not attribute.startswith("__")
    )
