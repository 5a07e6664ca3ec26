"""What capture alone adds to each instrumented SDK's embedding call, 1 input and 32 x 400 chars,
sync and async, in one run.

Every client answers in process, with no HTTP stack under the SDK's own client: an
``httpx.MockTransport`` or ``httpx2.MockTransport`` (OpenAI, Cohere, Mistral, google-genai,
Ollama), the Voyage SDK's requestor answering with the decoded body (as ``bench_capture``), and
a botocore ``before-send`` handler for Bedrock (a Cohere embed model; botocore has no async
client). The recorder's only sink does nothing, so an instrumented call's added time is
spanledger's capture: the call's facts, its attempt, reading the body by the endpoint's rules,
and the start notice and event handed to the sink.

Each line prints the bare call, the instrumented one's added time (median over interleaved
rounds of the round-by-round difference against the bare call run before and after it), the
target (at most 20 us), and for 32 inputs the ratio to 1 input (target: at most ~1.2x). A last
column prints the instrumented call with no recorder configured against the bare call (target:
within 5 %). Times are the calling thread's CPU time (``time.thread_time``), so on a shared
machine the time slices of other processes are not counted. Nothing is asserted: this is a
measurement.

    python benchmarks/bench_capture_sdks.py [rounds] [calls] [sdk,sdk,...]
"""

from __future__ import annotations

import asyncio
import base64
import gc
import io
import json
import statistics
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any

import boto3  # type: ignore[import-untyped]
import cohere
import httpx
import httpx2
import ollama
import openai
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from google import genai
from google.genai import types as gtypes
from mistralai.client import Mistral
from voyageai.api_resources.api_requestor import APIRequestor, VoyageHttpResponse
from voyageai.client import Client as VoyageClient
from voyageai.client_async import AsyncClient as AsyncVoyageClient

import spanledger
from bench_instrument import NullSink

DIMENSIONS = 64
TARGET_US = 20.0
SHORT = ["hello"]
LONG = [(f"passage {n:02d} " + "lorem ipsum dolor sit amet " * 15)[:400] for n in range(32)]
SIZES = {1: SHORT, 32: LONG}
JSON = {"content-type": "application/json"}


def _vector() -> list[float]:
    return [0.125] * DIMENSIONS


def _base64_vector() -> str:
    return base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *_vector())).decode()


def _count(request: Any) -> int:
    """How many inputs a JSON request body holds, whatever the vendor calls them."""
    sent = json.loads(request.content or b"{}")
    for key in ("input", "texts", "inputs", "contents", "requests"):
        value = sent.get(key)
        if isinstance(value, list):
            return len(value)
        if isinstance(value, str):
            return 1
    return 1


def _answers(make: Callable[[int], bytes]) -> Callable[[Any], bytes]:
    """The body for a request's input count, each made once."""
    made: dict[int, bytes] = {}

    def body(request: Any) -> bytes:
        count = _count(request)
        if count not in made:
            made[count] = make(count)
        return made[count]

    return body


def _openai_body(count: int) -> bytes:
    vector = _base64_vector()
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(count)]
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    body = {"object": "list", "data": data, "model": "text-embedding-3-small", "usage": usage}
    return json.dumps(body).encode()


def _mistral_body(count: int) -> bytes:
    data = [{"object": "embedding", "index": i, "embedding": _vector()} for i in range(count)]
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    payload = {"id": "e", "object": "list", "data": data, "model": "mistral-embed", "usage": usage}
    return json.dumps(payload).encode()


def _cohere_body(count: int) -> bytes:
    payload = {
        "id": "e-1",
        "embeddings": {"float": [_vector() for _ in range(count)]},
        "texts": ["x"] * count,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 3 * count}},
        "response_type": "embeddings_by_type",
    }
    return json.dumps(payload).encode()


def _google_body(count: int) -> bytes:
    embeddings = [{"values": _vector()} for _ in range(count)]
    return json.dumps({"embeddings": embeddings, "usageMetadata": {"promptTokenCount": 3}}).encode()


def _ollama_body(count: int) -> bytes:
    payload = {"model": "m", "embeddings": [_vector()] * count, "prompt_eval_count": 3 * count}
    return json.dumps(payload).encode()


def _httpx_transport(make: Callable[[int], bytes]) -> httpx.MockTransport:
    body = _answers(make)
    return httpx.MockTransport(lambda r: httpx.Response(200, content=body(r), headers=JSON))


def _httpx2_transport(make: Callable[[int], bytes]) -> httpx2.MockTransport:
    body = _answers(make)
    return httpx2.MockTransport(lambda r: httpx2.Response(200, content=body(r), headers=JSON))


def _voyage_in_process() -> None:
    """The Voyage requestor answers with the decoded body (installed before instrumenting)."""
    made: dict[int, Any] = {}

    def answer(params: Any) -> VoyageHttpResponse:
        count = len(params.get("input") or ())
        if count not in made:
            data = [
                {"object": "embedding", "embedding": _vector(), "index": i} for i in range(count)
            ]
            usage = {"total_tokens": 3 * count}
            made[count] = {"object": "list", "data": data, "model": "m", "usage": usage}
        return VoyageHttpResponse(made[count], {})  # type: ignore[no-untyped-call]

    def request(self: Any, method: str, url: str, params: Any = None, *a: Any, **k: Any) -> Any:
        return answer(params)

    async def arequest(
        self: Any, method: str, url: str, params: Any = None, *a: Any, **k: Any
    ) -> Any:
        return answer(params)

    APIRequestor.request = request  # type: ignore[method-assign]
    APIRequestor.arequest = arequest  # type: ignore[method-assign]


class _Raw(io.BytesIO):
    """A canned body as urllib3's response offers it to botocore."""

    def stream(self, amt: int = 1024, decode_content: bool = False) -> Any:
        while chunk := self.read(amt):
            yield chunk


def _bedrock_client() -> Any:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"total_max_attempts": 1}),
    )
    made: dict[int, bytes] = {}

    def before_send(request: Any = None, **_: Any) -> AWSResponse:
        count = len(json.loads(request.body)["texts"])
        if count not in made:
            made[count] = json.dumps(
                {
                    "embeddings": [_vector() for _ in range(count)],
                    "id": "e-1",
                    "response_type": "embeddings_floats",
                    "texts": ["x"] * count,
                }
            ).encode()
        body = made[count]
        headers = {
            "content-length": str(len(body)),
            "x-amzn-bedrock-input-token-count": str(3 * count),
        }
        return AWSResponse(request.url, 200, headers, _Raw(body))

    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", before_send)
    return client


Call = Callable[[list[str]], Any]
"""Given the inputs, one call (sync: its result; async: an awaitable of it)."""


@dataclass(frozen=True)
class Sdk:
    name: str
    sync: Callable[[], tuple[Any, Callable[[Any], Call]]]
    asynchronous: Callable[[], tuple[Any, Callable[[Any], Call]]] | None


def _openai() -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx2_transport(_openai_body)
    client = openai.OpenAI(
        api_key="b", max_retries=0, http_client=httpx2.Client(transport=transport)
    )
    return client, lambda c: lambda t: c.embeddings.create(model="text-embedding-3-small", input=t)


def _openai_async() -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx2_transport(_openai_body)
    client = openai.AsyncOpenAI(
        api_key="b", max_retries=0, http_client=httpx2.AsyncClient(transport=transport)
    )
    return client, lambda c: lambda t: c.embeddings.create(model="text-embedding-3-small", input=t)


def _voyage() -> tuple[Any, Callable[[Any], Call]]:
    client = VoyageClient(api_key="b", max_retries=0)
    return client, lambda c: lambda t: c.embed(t, model="voyage-3.5", input_type="document")


def _voyage_async() -> tuple[Any, Callable[[Any], Call]]:
    client = AsyncVoyageClient(api_key="b", max_retries=0)
    return client, lambda c: lambda t: c.embed(t, model="voyage-3.5", input_type="document")


def _cohere_call(c: Any) -> Call:
    return lambda t: c.embed(
        model="embed-v4.0", texts=t, input_type="search_document", embedding_types=["float"]
    )


def _cohere() -> tuple[Any, Callable[[Any], Call]]:
    http = httpx.Client(transport=_httpx_transport(_cohere_body))
    return cohere.ClientV2(api_key="b", httpx_client=http), _cohere_call


def _cohere_async() -> tuple[Any, Callable[[Any], Call]]:
    http = httpx.AsyncClient(transport=_httpx_transport(_cohere_body))
    return cohere.AsyncClientV2(api_key="b", httpx_client=http), _cohere_call


def _mistral(asynchronous: bool) -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx2_transport(_mistral_body)
    client = Mistral(
        api_key="b",
        server_url="http://bench.local",
        client=httpx2.Client(transport=transport),
        async_client=httpx2.AsyncClient(transport=transport),
    )
    if asynchronous:
        return (
            client,
            lambda c: lambda t: c.embeddings.create_async(model="mistral-embed", inputs=t),
        )
    return client, lambda c: lambda t: c.embeddings.create(model="mistral-embed", inputs=t)


def _google(asynchronous: bool) -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx_transport(_google_body)
    options = gtypes.HttpOptions(
        base_url="http://bench.local",
        httpx_client=httpx.Client(transport=transport),
        httpx_async_client=httpx.AsyncClient(transport=transport),
    )
    client = genai.Client(api_key="b", http_options=options)
    if asynchronous:
        return (
            client,
            lambda c: lambda t: c.aio.models.embed_content(model="text-embedding-004", contents=t),
        )
    return (
        client,
        lambda c: lambda t: c.models.embed_content(model="text-embedding-004", contents=t),
    )


def _ollama() -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx_transport(_ollama_body)
    client = ollama.Client(host="http://bench.local:11434", transport=transport)
    return client, lambda c: lambda t: c.embed(model="m", input=t)


def _ollama_async() -> tuple[Any, Callable[[Any], Call]]:
    transport = _httpx_transport(_ollama_body)
    client = ollama.AsyncClient(host="http://bench.local:11434", transport=transport)
    return client, lambda c: lambda t: c.embed(model="m", input=t)


def _bedrock() -> tuple[Any, Callable[[Any], Call]]:
    def call(c: Any) -> Call:
        def made(texts: list[str]) -> Any:
            body = json.dumps({"texts": texts, "input_type": "search_document"})
            response = c.invoke_model(modelId="cohere.embed-english-v3", body=body)
            return json.loads(response["body"].read())

        return made

    return _bedrock_client(), call


SDKS = (
    Sdk("openai", _openai, _openai_async),
    Sdk("voyageai", _voyage, _voyage_async),
    Sdk("cohere", _cohere, _cohere_async),
    Sdk("mistralai", lambda: _mistral(False), lambda: _mistral(True)),
    Sdk("google_genai", lambda: _google(False), lambda: _google(True)),
    Sdk("bedrock", _bedrock, None),
    Sdk("ollama", _ollama, _ollama_async),
)


@dataclass(frozen=True)
class Batch:
    """``calls`` calls timed together in ``scope`` (async ones awaited in turn on ``loop``)."""

    call: Callable[[], Any]
    loop: asyncio.AbstractEventLoop | None = None
    scope: Callable[[], AbstractContextManager[Any]] = nullcontext

    def timed(self, calls: int) -> float:
        call, loop = self.call, self.loop
        gc.collect()
        with self.scope():
            if loop is None:
                start = time.thread_time()
                for _ in range(calls):
                    call()
                return (time.thread_time() - start) / calls
            return loop.run_until_complete(_awaited(call, calls))


async def _awaited(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        await call()
    return (time.thread_time() - start) / calls


def _interleaved(variants: dict[str, Batch], rounds: int, calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for variant in variants.values():
        variant.timed(calls)  # warm-up
    for _ in range(rounds):
        for name, variant in variants.items():
            samples[name].append(variant.timed(calls))
    return samples


def _added(samples: dict[str, list[float]], key: str, variant: str) -> float:
    """Median over rounds of the variant less the mean of the bare calls around it."""
    return statistics.median(
        ours - (before + after) / 2
        for ours, before, after in zip(
            samples[f"{key} | {variant}"],
            samples[f"{key} | bare"],
            samples[f"{key} | bare again"],
            strict=True,
        )
    )


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    chosen = sys.argv[3].split(",") if len(sys.argv) > 3 else [sdk.name for sdk in SDKS]
    _voyage_in_process()
    loop = asyncio.new_event_loop()
    null = spanledger.Recorder([NullSink()])

    def scope() -> Any:
        return spanledger.use(null)

    variants: dict[str, Batch] = {}
    keys: list[tuple[str, str, int]] = []
    for sdk in SDKS:
        if sdk.name not in chosen:
            continue
        for mode, maker in (("sync", sdk.sync), ("async", sdk.asynchronous)):
            if maker is None:
                continue
            bare_client, caller = maker()
            ours_client, _ = maker()
            spanledger.instrument(ours_client)
            for size, texts in SIZES.items():
                bare_call, ours_call = caller(bare_client), caller(ours_client)
                on = loop if mode == "async" else None
                key = f"{sdk.name} {mode} {size}"
                keys.append((sdk.name, mode, size))
                plain, recorded = partial(bare_call, texts), partial(ours_call, texts)
                variants[f"{key} | bare"] = Batch(plain, on)
                variants[f"{key} | null sink"] = Batch(recorded, on, scope)
                variants[f"{key} | no recorder"] = Batch(recorded, on)
                variants[f"{key} | bare again"] = Batch(plain, on)
    samples = _interleaved(variants, rounds, calls)
    loop.close()

    print("capture alone (a sink that does nothing), every SDK answering in process, same run")
    print(
        f"{'sdk':<13}{'mode':<6}{'inputs':>7}{'bare':>11}{'added':>10}{'target':>9}"
        f"{'32 vs 1':>9}{'no recorder':>13}"
    )
    for name, mode, size in keys:
        key = f"{name} {mode} {size}"
        bare = statistics.median(samples[f"{key} | bare"]) * 1e6
        added = _added(samples, key, "null sink") * 1e6
        unrecorded = _added(samples, key, "no recorder") * 1e6 / bare
        flat = ""
        if size != 1:
            one = _added(samples, f"{name} {mode} 1", "null sink") * 1e6
            flat = f"{added / one:.2f}x" if one > 0 else "-"
        print(
            f"{name:<13}{mode:<6}{size:>7}{bare:>9.1f}us{added:>+8.1f}us{TARGET_US:>7.0f}us"
            f"{flat:>9}{unrecorded:>+12.1%}"
        )
    print(
        f"targets: added <= {TARGET_US:.0f}us; 32 x 400 chars within ~1.2x of 1 input; "
        "no recorder within 5 % of the bare call"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
