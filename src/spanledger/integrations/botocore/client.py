"""boto3 / botocore Bedrock clients: ``invoke_model`` of an embedding or rerank model on
``bedrock-runtime`` and ``rerank`` on ``bedrock-agent-runtime``, recorded as ``aws.bedrock``.

botocore announces every step of a call on the client's own event emitter
(``client.meta.events``): handlers registered there see the request botocore built
(``before-call``: its URL and JSON body, from which the endpoint and the call's facts are read
by the wire declarations), each HTTP attempt (``request-created`` opens one,
``response-received`` ends a failed one before botocore decides whether to retry), and the
call's end (``after-call``, ``after-call-error``). A 2xx is read at ``after-call``: Rerank's body
is the bytes botocore already holds; InvokeModel's is a stream the caller has yet to read, so it
is read there, once, and the caller is handed a fresh ``StreamingBody`` over the very same bytes
(a read that fails is handed on as the same exception, raised by the caller's own read).
Figures come from those bytes and the response headers (``X-Amzn-Bedrock-Input-Token-Count``),
never from botocore's parse; errors are categorised by botocore's error code
(``ThrottlingException``) through the endpoint's declaration, with the status, ``Retry-After``
and the body's fingerprint. Those events hear only ``Exception``s, so the one thing wrapped is
the recorded operation's method on the client (an instance attribute): it hears an interrupt
(``KeyboardInterrupt``, ``SystemExit``), ends the call's open attempt as ``interrupted`` and
lets the interrupt go on unchanged. An ``invoke_model`` of any other model (a chat model) and
every other operation pass through unrecorded. A stubbed call (``botocore.stub.Stubber``) sends
nothing and records nothing. Sync clients only (aiobotocore's are refused).
"""

from __future__ import annotations

import functools
import io
import json
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import httpx
from botocore import xform_name  # type: ignore[import-untyped]
from botocore.response import StreamingBody  # type: ignore[import-untyped]

from spanledger.capture.failures import describe
from spanledger.capture.installation import Installation
from spanledger.capture.patching import looked_up
from spanledger.capture.sdk_calls import Switch
from spanledger.capture.vendors import recognise
from spanledger.errors import ErrorCategory, ProviderError, interrupts
from spanledger.recorder import Recorder, get_recorder
from spanledger.recording.call import UNRECORDABLE, Recording, logged
from spanledger.recording.facts import CallFacts, Figures, request_facts
from spanledger.recording.reported import answered_badly, reported
from spanledger.wire.endpoints import Endpoint, Vendor
from spanledger.wire.http import failure_for, parse_json, vendor_coded

__all__ = ["OPERATIONS", "install", "serves"]

OPERATIONS = {"bedrock-runtime": "InvokeModel", "bedrock-agent-runtime": "Rerank"}
"""The operation recorded on each Bedrock service (by botocore's service name)."""

_STATE = "spanledger_call"
"""Where a recorded call keeps its ``_Call`` in botocore's per-call ``context``."""
_STEPS = ("before-call", "request-created", "response-received", "after-call", "after-call-error")
_UNIQUE = "spanledger"
_NO_HINTS: dict[str, Vendor] = {}
"""botocore names the host it sends to: the route and the body tell the endpoint."""

_NO_RESPONSE = ProviderError(
    ErrorCategory.UNAVAILABLE,
    detail="the attempt ended without a response and the SDK retried",
    error_type="no_response",
)
_UNPARSED = ProviderError(
    ErrorCategory.INVALID_RESPONSE,
    detail="the SDK could not parse the response",
    error_type="ResponseParserError",
)


_OWN_MODULES = ("botocore", "urllib3", "socket", "ssl")


def _parser_crash(exc: BaseException) -> bool:
    """Whether an exception raised while an attempt was out came from botocore's parser
    tripping over the answer (a plain ``TypeError`` on a body of ``null``, an
    ``OverflowError`` on a score of 10**400) rather than from botocore or the transport: the
    provider answered, the answer was unusable."""
    module = type(exc).__module__ or ""
    if module.startswith(_OWN_MODULES) or isinstance(exc, OSError):
        return False  # botocore's own errors, and the transport's
    return isinstance(exc, Exception)


def serves(client: object) -> bool:
    """Whether ``client`` is a sync botocore client of a Bedrock service recorded here."""
    try:
        service = client.meta.service_model.service_name  # type: ignore[attr-defined]
    except Exception:
        return False
    return service in OPERATIONS and not _is_async(client)


def install(client: Any, installation: Installation) -> None:
    """Instrument a boto3 ``bedrock-runtime`` or ``bedrock-agent-runtime`` client.

    Anything else is refused with a ``TypeError``.
    """
    if not serves(client):
        raise TypeError(
            "spanledger.instrument supports boto3's sync bedrock-runtime and "
            f"bedrock-agent-runtime clients, not {_described(client)}"
        )
    events = client.meta.events
    service_id = client.meta.service_model.service_id.hyphenize()
    operation = OPERATIONS[client.meta.service_model.service_name]
    handlers = _handlers(installation.switch)
    names = [f"{step}.{service_id}.{operation}" for step in _STEPS]
    for name, handler in zip(names, handlers, strict=True):
        events.register(name, handler, unique_id=f"{_UNIQUE}-{name}")
    installation.on_release(_unregister, client)
    method = xform_name(operation)
    installation.replace(client, method, _interruptible(client, method))


_opened: ContextVar[list[_Call] | None] = ContextVar("spanledger_bedrock_calls", default=None)
"""The calls recorded inside the operation method running in this context, if any."""


def _interruptible(client: Any, name: str) -> Callable[..., Any]:
    """``client.<name>`` (what the instance held, else its class's method at each call) with an
    ear for interrupts, which botocore's events never hear: the call it recorded ends
    ``interrupted``, and the interrupt goes on unchanged."""
    held = vars(client).get(name)
    kind = type(client)
    target = weakref.ref(client)  # the client holds this: no reference cycle

    @functools.wraps(getattr(kind, name))
    def operation(*args: Any, **kwargs: Any) -> Any:
        method = held if held is not None else looked_up(kind, name, target())
        opened: list[_Call] = []
        token = _opened.set(opened)
        try:
            return method(*args, **kwargs)
        except BaseException as exc:
            if interrupts(exc):
                for call in opened:
                    call.interrupted(exc)
            raise
        finally:
            _opened.reset(token)

    return operation


def _unregister(client: Any) -> None:
    """Take every handler ``install`` registered off the client's emitter."""
    events = client.meta.events
    service_id = client.meta.service_model.service_id.hyphenize()
    operation = OPERATIONS[client.meta.service_model.service_name]
    for step in _STEPS:
        name = f"{step}.{service_id}.{operation}"
        events.unregister(name, unique_id=f"{_UNIQUE}-{name}")


def _is_async(client: object) -> bool:
    return any(klass.__module__.startswith("aiobotocore") for klass in type(client).__mro__)


def _described(client: object) -> str:
    try:
        return f"a {client.meta.service_model.service_name} client"  # type: ignore[attr-defined]
    except Exception:
        return type(client).__qualname__


class _Call:
    """One botocore call of a recorded operation: its facts, and its attempts' recording
    (made when the first request is created, so a call that sends nothing records nothing).
    ``open``: the current attempt has no outcome yet."""

    __slots__ = ("endpoint", "facts", "open", "recorder", "recording")

    def __init__(self, recorder: Recorder, endpoint: Endpoint, facts: CallFacts) -> None:
        self.recorder = recorder
        self.endpoint = endpoint
        self.facts = facts
        self.recording: Recording | None = None
        self.open = False

    def attempt_created(self) -> None:
        """botocore made a request: the call's first attempt, or a retry (whose attempt before
        has its event held, and now released as retried)."""
        recording = self.recording
        if recording is None:
            self.recording = Recording(self.recorder, self.facts)
        else:
            if self.open:  # an answer botocore chose to retry
                recording.failed(_NO_RESPONSE, hold=True)
            recording.restart()
        self.open = True

    def attempt_ended(self, response: dict[str, Any] | None, parsed: Any, exc: Any) -> None:
        """An attempt got its response (or its transport failed): a failure ends it now, held
        until botocore has decided whether to retry; a 2xx is read when the call returns."""
        recording = self.recording
        if recording is None or not self.open:
            return
        if exc is not None:
            self.open = False
            recording.failed(describe(exc), hold=True)
        elif response is not None and response["status_code"] >= 300:
            self.open = False
            recording.failed(self._status_failure(response, parsed), hold=True)

    def returned(self, http_response: Any, parsed: Any, model: Any) -> None:
        """The call is over with a response: a failure's held event goes out as the last; a
        2xx is read from its raw bytes (replaying a stream the caller has yet to read)."""
        recording = self.recording
        if recording is None:
            return
        status = http_response.status_code
        if not self.open:
            recording.release()
            return
        self.open = False
        headers = http_response.headers
        if status >= 300:  # response-received never saw it: read it from the call's end
            recording.failed(self._status_failure(_response_dict(http_response), parsed))
            return
        data = _replayed(parsed) if model.has_streaming_output else http_response.content
        if isinstance(data, BaseException):
            recording.failed(describe(data), answered=True)
            return
        if not isinstance(data, bytes):
            recording.failed(answered_badly(_UNPARSED, status, None), answered=True)
            return
        try:
            found = reported(self.endpoint, parse_json(data), self.facts, headers)
        except ProviderError as error:
            recording.failed(answered_badly(error, status, data))
            return
        except Exception as exc:  # our reader broke: the call still ends, its figures unknown
            logged(exc)
            found = Figures()
        recording.succeeded(found)

    def raised(self, exc: BaseException) -> None:
        """The request could not be completed (retries used up on a transport failure, a
        request botocore could not sign, a body it could not parse)."""
        recording = self.recording
        if recording is None:
            return
        if not self.open:
            recording.release()
            return
        self.open = False
        if type(exc).__name__ == "ResponseParserError" or _parser_crash(exc):
            recording.failed(_UNPARSED, answered=True)
        else:
            recording.failed(describe(exc, fallback=ErrorCategory.INVALID_REQUEST))

    def interrupted(self, exc: BaseException) -> None:
        """The call was interrupted (botocore emits nothing for it): its open attempt ends
        ``interrupted``; a call that sent nothing records nothing, as always."""
        recording = self.recording
        if recording is None:
            return
        self.open = False
        try:
            recording.interrupted(exc)
        except Exception as failure:
            logged(failure)

    def give_up(self) -> None:
        """Our own handler broke at the call's end: the call still ends, with its held event
        or as an outcome nobody could read."""
        recording = self.recording
        if recording is not None:
            self.open = False
            recording.failed(UNRECORDABLE)
            recording.release()

    def _status_failure(self, response: dict[str, Any], parsed: Any) -> ProviderError:
        """The failure an error status stands for, by botocore's error code where the
        endpoint declares it (the ``x-amzn-ErrorType`` header's, else the body's)."""
        body = response.get("body")
        error = failure_for(
            self.endpoint,
            response["status_code"],
            response["headers"],
            body if isinstance(body, bytes) else None,
        )
        code = _error_code(parsed)
        category = self.endpoint.error_codes.get(code) if code else None
        if category is not None and error.error_type != code:
            error = vendor_coded(error, category, code)
        return error


def _error_code(parsed: Any) -> str | None:
    try:
        code = parsed["Error"]["Code"]
    except Exception:
        return None
    return code if type(code) is str and code else None


def _response_dict(http_response: Any) -> dict[str, Any]:
    return {
        "status_code": http_response.status_code,
        "headers": http_response.headers,
        "body": http_response.content,
    }


def _replayed(parsed: Any) -> bytes | BaseException | None:
    """The bytes of the caller's ``StreamingBody``, read once; the caller gets a fresh one over
    the same bytes (or, when the read failed, one whose read raises that very exception)."""
    body = parsed.get("body") if isinstance(parsed, dict) else None
    if not isinstance(body, StreamingBody):
        return None
    try:
        data = body.read()
    except Exception as exc:
        parsed["body"] = StreamingBody(_Failing(exc), None)
        return exc
    parsed["body"] = StreamingBody(io.BytesIO(data), len(data))
    return data if isinstance(data, bytes) else None


class _Failing(io.RawIOBase):
    """A raw stream whose every read raises the exception the original body's read raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self._error = error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise self._error

    def read(self, size: int | None = -1) -> bytes:
        raise self._error


def _request_json(body: object) -> dict[str, Any] | None:
    """The request's JSON object: botocore's serialized bytes (or text), or a seekable file
    the caller passed, read and put back where it was."""
    try:
        if isinstance(body, bytes | bytearray | str):
            value = json.loads(body)
        elif hasattr(body, "read") and hasattr(body, "seek") and hasattr(body, "tell"):
            at = body.tell()
            try:
                value = json.loads(body.read())
            finally:
                body.seek(at)
        else:
            return None
    except Exception:
        return None
    return value if type(value) is dict else None


def _call_for(recorder: Recorder, params: Any) -> _Call | None:
    """The recording of the request botocore built, when it is an embedding or rerank call."""
    body = _request_json(params.get("body"))
    if body is None:
        return None
    url = _url(params["url"])
    endpoint = recognise(url, body, _NO_HINTS)
    if endpoint is None:
        return None
    facts = request_facts(endpoint, body, url)
    if not _names_its_model(endpoint, facts.model):
        return None
    return _Call(recorder, endpoint, facts)


@functools.lru_cache(maxsize=256)
def _url(text: str) -> httpx.URL:
    """The request's URL, parsed once per distinct URL (a client calls a few models, many
    times)."""
    return httpx.URL(text)


def _names_its_model(endpoint: Endpoint, model: str) -> bool:
    """Whether ``model`` may be the endpoint's: a base model id must start as its models do
    (Titan Text's generation body carries ``inputText`` too); an ARN that names none (an
    application inference profile, provisioned throughput) is read by its body alone."""
    prefixes = endpoint.model_prefixes
    return not prefixes or model.startswith(("arn:", *prefixes))


Handler = Callable[..., None]


def _handlers(switch: Switch) -> tuple[Handler, ...]:
    """The handlers for ``_STEPS``, in order. None of them raises into botocore: a failure
    of their own is logged by type and the call goes on unrecorded."""

    def before_call(params: Any = None, context: Any = None, **_: Any) -> None:
        try:
            if not switch.on or type(context) is not dict or _STATE in context:
                return
            recorder = get_recorder()
            if not recorder.active:
                return
            call = _call_for(recorder, params)
            if call is not None:
                context[_STATE] = call
                opened = _opened.get()
                if opened is not None:  # the operation's method hears an interrupt for it
                    opened.append(call)
        except Exception as exc:
            logged(exc)

    def request_created(request: Any = None, **_: Any) -> None:
        try:
            call = _state_of(getattr(request, "context", None))
            if call is not None:
                call.attempt_created()
        except Exception as exc:
            logged(exc)

    def response_received(
        response_dict: Any = None,
        parsed_response: Any = None,
        context: Any = None,
        exception: Any = None,
        **_: Any,
    ) -> None:
        try:
            call = _state_of(context)
            if call is not None:
                call.attempt_ended(response_dict, parsed_response, exception)
        except Exception as exc:
            logged(exc)

    def after_call(
        http_response: Any = None,
        parsed: Any = None,
        model: Any = None,
        context: Any = None,
        **_: Any,
    ) -> None:
        call = None
        try:
            call = _state_of(context, pop=True)
            if call is not None:
                call.returned(http_response, parsed, model)
        except Exception as exc:
            logged(exc)
            _give_up(call)

    def after_call_error(exception: Any = None, context: Any = None, **_: Any) -> None:
        call = None
        try:
            call = _state_of(context, pop=True)
            if call is not None:
                call.raised(exception)
        except Exception as exc:
            logged(exc)
            _give_up(call)

    return before_call, request_created, response_received, after_call, after_call_error


def _give_up(call: _Call | None) -> None:
    if call is not None:
        try:
            call.give_up()
        except Exception as exc:
            logged(exc)


def _state_of(context: object, *, pop: bool = False) -> _Call | None:
    if type(context) is not dict:
        return None
    found = context.pop(_STATE, None) if pop else context.get(_STATE)
    return found if isinstance(found, _Call) else None
