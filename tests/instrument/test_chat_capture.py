"""Chat calls seen in flight (``spanledger.capture.chat``): read for the open request's context
by ``instrument(http=True)`` and the recording transport, never recorded as an event; outside a
request passed on untouched and unread; the caller always gets the bytes it would have; a
streamed answer left unread; nothing the capture does raises into the caller.

Traffic goes to the loopback stand-in, or to an in-process transport where the test must see
what was consumed.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import NoReturn

import httpx
import openai
import pytest
import requests
import structlog
from openai.types.chat import ChatCompletionMessageParam

import spanledger
from spanledger.attribution import Passage
from spanledger.attribution.context import ContextCapture
from spanledger.instrumentation import transport
from spanledger.testing import StandIn, openai_chat_completions
from spanledger.wire import chat as wire_chat
from tests.instrument.conftest import API_KEY, Tape

SENTINEL = "SENTINEL-chat-capture-3c9e"
PASSAGE = f"The moon's gravity {SENTINEL} raises the tides twice a day."
PROMPT = f"[1] {PASSAGE}\n\nWhy are there tides?"
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": PROMPT}]
BODY = {"model": "gpt-4o-mini", "messages": MESSAGES}
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "The moon [1]."}}],
    "usage": {"prompt_tokens": 21, "completion_tokens": 4, "total_tokens": 25},
}


@pytest.fixture
def switch() -> Iterator[None]:
    spanledger.instrument(sdks=[], http=True)
    try:
        yield
    finally:
        spanledger.uninstrument()


class Streamed(httpx.SyncByteStream):
    """A response body still to come off the wire, which says whether anyone read it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.read = False

    def __iter__(self) -> Iterator[bytes]:
        self.read = True
        yield self.data[:7]
        yield self.data[7:]


class Upload(httpx.SyncByteStream):
    """A request body that says whether anyone read it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.read = False

    def __iter__(self) -> Iterator[bytes]:
        self.read = True
        yield self.data


class Wire(httpx.BaseTransport):
    """Answers every request with ``body`` as a fresh stream, keeping what it handed out;
    it never reads what was sent."""

    def __init__(self, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.body = body
        self.headers = {"content-type": "application/json", **(headers or {})}
        self.sent: list[httpx.Response] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = httpx.Response(200, headers=self.headers, stream=Streamed(self.body))
        self.sent.append(response)
        return response


def chat_request(upload: Upload | None = None) -> httpx.Request:
    url = "https://api.openai.com/v1/chat/completions"
    if upload is not None:
        return httpx.Request(
            "POST", url, stream=upload, headers={"content-type": "application/json"}
        )
    return httpx.Request("POST", url, json=BODY)


def test_outside_a_request_a_chat_call_is_handed_on_untouched_and_unread() -> None:
    wire = Wire(json.dumps(ANSWER).encode())
    upload = Upload(json.dumps(BODY).encode())
    tape = Tape()
    with spanledger.use(spanledger.Recorder([tape])):
        answer = transport(wire).handle_request(chat_request(upload))
    assert answer is wire.sent[0]  # the very response, its stream never read
    assert isinstance(answer.stream, Streamed)
    assert not answer.stream.read
    assert not upload.read
    assert tape.events == []


def test_outside_a_request_the_switch_hands_a_chat_call_on_as_it_came(
    standin: StandIn, switch: None
) -> None:
    """The transport's own stream reaches the caller outside a request; inside one, the
    answer was read and handed on as a fresh stream of the same bytes."""
    standin.reset()
    url = standin.base_url("openai") + "/v1/chat/completions"
    tape = Tape()
    with spanledger.use(spanledger.Recorder([tape])), httpx.Client() as client:
        outside = client.send(client.build_request("POST", url, json=BODY), stream=True)
        with spanledger.request("turn-inside"):
            inside = client.send(client.build_request("POST", url, json=BODY), stream=True)
        for response in (outside, inside):
            response.read()
            response.close()
    assert not isinstance(outside.stream._stream, httpx.ByteStream)  # type: ignore[union-attr]
    assert isinstance(inside.stream._stream, httpx.ByteStream)  # type: ignore[union-attr]
    assert outside.content == inside.content
    assert tape.events == []


def test_inside_a_request_the_caller_gets_the_same_bytes_gzip_included() -> None:
    raw = gzip.compress(json.dumps(ANSWER).encode(), mtime=0)
    wire = Wire(raw, {"content-encoding": "gzip", "x-request-id": "req-1"})
    with spanledger.request("turn-bytes") as turn:
        turn.context.served([Passage(PASSAGE)], provider_id="kb")
        with httpx.Client(transport=transport(wire)) as client:
            answer = client.post("https://api.openai.com/v1/chat/completions", json=BODY)
        (call,) = turn.context.calls()
    assert answer.content == json.dumps(ANSWER).encode()
    assert answer.headers["content-encoding"] == "gzip"
    assert answer.headers["x-request-id"] == "req-1"
    assert call.answered
    assert call.input_tokens == 21
    use = turn.frames.report().uses[0]
    assert use.rendered
    assert use.cited


def test_a_chat_call_through_requests_is_read_and_its_bytes_kept(
    standin: StandIn, switch: None
) -> None:
    standin.reset()
    with spanledger.request("turn-requests") as turn:
        turn.context.served([Passage(PASSAGE)], provider_id="kb")
        answer = requests.post(
            standin.base_url("openai") + "/v1/chat/completions", json=BODY, timeout=5
        )
        (call,) = turn.context.calls()
    assert answer.json()["choices"][0]["message"]["content"] == "The sources say so [1]."
    assert call.answered
    assert call.provider == "openai"
    assert turn.frames.report().cited_frames() == 1


def test_a_streamed_answer_renders_the_prompt_and_is_left_unread(
    standin: StandIn, switch: None
) -> None:
    standin.reset()
    client = openai.OpenAI(api_key=API_KEY, base_url=standin.base_url("openai") + "/v1")
    with spanledger.request("turn-stream") as turn:
        turn.context.served([Passage(PASSAGE)], provider_id="kb")
        chunks = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=MESSAGES,
            stream=True,
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
        (call,) = turn.context.calls()
        use = turn.frames.report().uses[0]
    assert text == "The sources say so [1]."
    assert not call.answered
    assert use.rendered
    assert not use.cited


def test_requests_asked_to_stream_is_left_unread(standin: StandIn, switch: None) -> None:
    standin.reset()
    with spanledger.request("turn-requests-stream") as turn:
        turn.context.served([Passage(PASSAGE)], provider_id="kb")
        answer = requests.post(
            standin.base_url("openai") + "/v1/chat/completions", json=BODY, stream=True, timeout=5
        )
        assert not answer.raw.closed  # nobody read it before the caller
        body = answer.json()
        (call,) = turn.context.calls()
    assert body["object"] == "chat.completion"
    assert not call.answered


def test_an_answer_that_is_no_success_is_no_model_call(standin: StandIn, switch: None) -> None:
    standin.reset()
    standin.route(openai_chat_completions().failing(429))
    client = openai.OpenAI(
        api_key=API_KEY, base_url=standin.base_url("openai") + "/v1", max_retries=0
    )
    with spanledger.request("turn-429") as turn, pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert turn.context.calls() == []


def test_a_transport_over_the_switched_default_reads_a_call_once(
    standin: StandIn, switch: None
) -> None:
    standin.reset()
    with spanledger.request("turn-nested") as turn:
        with httpx.Client(transport=transport(httpx.HTTPTransport())) as client:
            client.post(standin.base_url("openai") + "/v1/chat/completions", json=BODY)
        assert len(turn.context.calls()) == 1


def test_nothing_the_capture_does_raises_into_the_caller(
    standin: StandIn,
    switch: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    standin.reset()

    def broken(*args: object, **kwargs: object) -> NoReturn:
        raise RuntimeError(f"capture broke on {SENTINEL}")

    monkeypatch.setattr(ContextCapture, "answered", broken)
    url = standin.base_url("openai") + "/v1/chat/completions"
    with (
        caplog.at_level(logging.DEBUG),
        structlog.testing.capture_logs() as logs,
        spanledger.request("turn-broken"),
    ):
        answer = httpx.post(url, json=BODY)
        monkeypatch.setattr(ContextCapture, "prompted", broken)
        again = requests.post(url, json=BODY, timeout=5)
        wires = tuple(replace(wire, prompt=broken) for wire in wire_chat.CHAT_WIRES)
        monkeypatch.setattr(wire_chat, "CHAT_WIRES", wires)
        third = httpx.post(url, json=BODY)
    for response in (answer, third):
        assert response.json()["choices"][0]["message"]["content"] == "The sources say so [1]."
    assert again.status_code == 200
    assert any(entry.get("error_type") == "RuntimeError" for entry in logs)
    assert SENTINEL not in repr(logs) + caplog.text
