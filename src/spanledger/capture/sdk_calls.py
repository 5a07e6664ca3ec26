"""Record one SDK method call as one event per HTTP attempt, with figures from the raw body.

The wrapped SDK method runs with an ``SdkCall`` in a context variable, so concurrent calls on
threads or asyncio tasks never see each other's. Hooks at the SDK's HTTP layer report each
attempt: a request leaving starts one (the first continues the attempt opened when the method
was entered; a redirect hop continues the open one), an error status ends it once the client
has read or dropped the error body, and a 2xx response is held until the SDK returns or raises.
Success figures come from the JSON the SDK decoded from the raw body, captured as it decodes it,
never from the SDK's typed result. Sinks are told of the call with the context variable
cleared, so an instrumented call a sink makes is recorded as its own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from time import perf_counter
from typing import Any, ParamSpec, TypeVar

from spanledger.capture.failures import describe, status_error
from spanledger.errors import (
    ErrorCategory,
    ProviderError,
    error_for_interrupt,
    error_for_status,
    interrupts,
)
from spanledger.recorder import Recorder, get_recorder
from spanledger.recording.call import Recording, logged
from spanledger.recording.facts import CallFacts, Figures
from spanledger.recording.reported import answered_badly, reported
from spanledger.wire.endpoints import Endpoint
from spanledger.wire.http import parse_json

__all__ = [
    "RECORDING",
    "Arrival",
    "MethodSpec",
    "SdkCall",
    "Switch",
    "current_call",
    "listening",
    "note_arrival",
    "record_async",
    "record_sync",
    "wrap_async",
    "wrap_sync",
]

P = ParamSpec("P")
T = TypeVar("T")

_current: ContextVar[SdkCall | None] = ContextVar("spanledger_sdk_call", default=None)

_NO_RESPONSE = ProviderError(
    ErrorCategory.UNAVAILABLE,
    detail="the attempt ended without a response and the SDK retried",
    error_type="no_response",
)


_SETTLING_HOOKS = ("read", "close", "aread", "aclose")
"""What the HTTP hooks attach to an error response to hear when its body is read."""

# The SDK call being recorded in this thread or task, if any: the bare context-variable read,
# since the HTTP hooks ask on every request.
current_call = _current.get


class Arrival:
    """The status and headers an attempt's answer arrived with, noted by a hook on the SDK's
    HTTP layer before the body is read: a body that then fails to read (one that does not
    decode by its ``Content-Encoding``) leaves them known where the SDK never got the
    response. It stands for that answer, whose body never arrived whole."""

    __slots__ = ("headers", "status_code")
    content = None

    def __init__(self) -> None:
        self.status_code: int | None = None
        self.headers: Any = None


_arrival: ContextVar[Arrival | None] = ContextVar("spanledger_sdk_arrival", default=None)


@contextlib.contextmanager
def listening() -> Iterator[Arrival]:
    """Hear how the answer of the attempt run inside the block arrives (``note_arrival``)."""
    arrival = Arrival()
    token = _arrival.set(arrival)
    try:
        yield arrival
    finally:
        _arrival.reset(token)


def note_arrival(status: object, headers: object) -> None:
    """An HTTP layer's hook: an answer arrived with ``status`` and ``headers``. Heard only
    inside ``listening``; anywhere else it does nothing."""
    arrival = _arrival.get()
    if arrival is not None and type(status) is int:
        arrival.status_code, arrival.headers = status, headers


@dataclass(slots=True)
class MethodSpec:
    """How to record one SDK method.

    ``facts`` reads the call's arguments (``None``: do not record this call); ``endpoint`` is
    the wire endpoint the method calls, whose declaration reads each decoded 2xx body;
    ``shape`` reads the vector width or the result count from the SDK's result when the raw
    body could not be read; ``route`` is the path suffix the SDK posts to, so only this call's
    own requests count as its attempts.
    """

    facts: Callable[[tuple[Any, ...], dict[str, Any]], CallFacts | None]
    endpoint: Endpoint
    shape: Callable[[Any], int | None]
    route: str


class Switch:
    """Turned off by ``uninstrument``: wrappers still referenced anywhere pass straight through."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


class SdkCall(Recording):
    """The attempts of one SDK method call, recorded in turn by this one object.

    ``answer`` is the open attempt's 2xx response (``None`` where the SDK's HTTP layer has no
    response object of ours to keep); ``answered`` says a 2xx arrived at all. ``failing`` is an
    error response whose event waits until the client reads its body (or drops it).
    """

    __slots__ = (
        "_answered",
        "_bad_answer",
        "_failed_at",
        "_figures",
        "_hop",
        "_sent",
        "answer",
        "failing",
        "request",
        "spec",
    )

    def __init__(self, recorder: Recorder, facts: CallFacts, spec: MethodSpec) -> None:
        self.spec = spec
        self.request: Any = None
        self.answer: object = None
        self.failing: Any = None
        self._failed_at = 0.0
        self._hop: Any = None
        self._sent = False
        self._answered = False
        self._figures: Figures | None = None
        self._bad_answer: ProviderError | None = None
        super().__init__(recorder, facts)

    def owns_path(self, path: str) -> bool:
        return path.endswith(self.spec.route)

    def owns(self, request: Any) -> bool:
        """Whether ``request`` is this call's: to its route, or the client following a
        redirect its open attempt got (the target's path may be anything)."""
        return request.url.path.endswith(self.spec.route) or self._follows(request)

    def attempt_sent(self, request: object) -> None:
        """A request left for this call: a redirect hop of the open attempt, or a new attempt
        (an earlier one still open got no response)."""
        try:
            if self.failing is not None:
                self.error_body_settled(self.failing)
            hop = self._hop
            if hop is not None:
                self._hop = None
                if self._follows_hop(hop, request):
                    self.request = request
                    return
            self.request = request
            if self._done:
                self._next_attempt()
            elif self._sent:  # no answer, or a redirect the client did not follow
                self.failed(_NO_RESPONSE if hop is None else _status_error(hop), hold=True)
                self._next_attempt()
            self._sent = True
            if self._answered:
                self._forget_answer()
        except Exception as exc:
            logged(exc)

    def _next_attempt(self) -> None:
        """The SDK retried: the attempt before's event goes out (as retried) from outside the
        call's context, so an instrumented call a sink makes is recorded as its own."""
        token = _current.set(None)
        try:
            self.restart()
        finally:
            _current.reset(token)

    def attempt_redirected(self, response: object) -> None:
        """A 3xx arrived: the request the client sends next, if it follows, is the same
        attempt."""
        self._hop = response

    def _follows(self, request: Any) -> bool:
        """Whether ``request`` is the client following the redirect the open attempt got."""
        hop = self._hop
        return hop is not None and self._follows_hop(hop, request)

    def _follows_hop(self, hop: Any, request: Any) -> bool:
        """Whether ``request`` follows the redirect ``hop``: a 307/308 resends the very same
        body stream, a 301/302/303 turns into a GET to the ``Location``. An SDK's retry is a
        new request with a new body."""
        prior = self.request
        if prior is None or request is None:
            return False
        try:
            stream = request.stream
            if stream is not None and stream is getattr(prior, "stream", None):
                return True
            location = hop.headers.get("location")
            if request.method != "GET" or not location:
                return False
            target = prior.url.join(location).copy_with(fragment=None)
            return bool(request.url.copy_with(fragment=None) == target)
        except Exception:
            return False

    def attempt_failed(self, error: ProviderError) -> None:
        """The attempt ended with an error status (or a transport failure the hook saw)."""
        self._sent = False
        self.failed(error, hold=True)

    def attempt_errored(self, response: Any) -> None:
        """An error status arrived: the attempt failed, and its event waits for the body that
        the client reads next (``error_body_settled``), so reading it stays the client's."""
        self.failing = response
        self._failed_at = perf_counter()

    def error_body_settled(self, response: Any) -> None:
        """The client read (or dropped) the error body of ``response``: end the attempt with
        what the status, its headers and the body (when read) say."""
        try:
            if response is not self.failing:
                return
            self.failing = None
            self._sent = False
            attributes = vars(response)
            for name in _SETTLING_HOOKS:
                attributes.pop(name, None)
            self.failed(_status_error(response), self._failed_at, hold=True)
        except Exception as exc:
            logged(exc)

    def send_raised(self, exc: BaseException) -> None:
        """The client's ``send`` raised while an attempt of this call was open."""
        if self._sent and not self._done:
            self.attempt_raised(exc)

    def attempt_raised(self, exc: BaseException) -> None:
        """The HTTP layer raised for this attempt: an error status or a transport failure."""
        try:
            error = describe(exc)
            if self._answered and error.category is ErrorCategory.INVALID_RESPONSE:
                error = self._unusable(error)  # a 2xx whose body did not decode
        except Exception as failure:
            logged(failure)
            return
        self.attempt_failed(error)

    def answer_unread(self, arrival: Arrival, exc: BaseException) -> bool:
        """The attempt raised ``exc`` after its answer arrived (``arrival``) and before the
        SDK had its body: a 2xx is an unusable answer with its status, another status that
        status's failure, as every path records them. False: no answer had arrived (a
        redirect hop is not one), ``exc`` names its status itself, or it is an interrupt (the
        attempt is then ``interrupted``, as on every path)."""
        status = arrival.status_code
        if status is None or 300 <= status < 400 or interrupts(exc):
            return False
        if status_error(exc) is not None:
            return False
        if 200 <= status < 300:
            self.attempt_answered(arrival)
            self.attempt_raised(exc)
        else:
            self.attempt_failed(error_for_status(status, arrival.headers or {}, None))
        return True

    def attempt_answered(self, response: object = None) -> None:
        """A 2xx arrived (``response``: the client's response object, when there is one)."""
        self._answered = True
        self.answer = response

    def answer_decoded(self, payload: object) -> None:
        """The SDK decoded the 2xx body: read it, by the endpoint's rules, from that verbatim
        JSON (a body the endpoint does not answer fails the attempt, as on every path)."""
        try:
            if self._answered and self._figures is None and self._bad_answer is None:
                self._figures = reported(self.spec.endpoint, payload, self.facts)
        except ProviderError as error:
            self._bad_answer = error
        except Exception as exc:
            logged(exc)

    def returned(self, result: object) -> None:
        """The SDK method returned: the open attempt succeeded."""
        try:
            if self.failing is not None:
                self.error_body_settled(self.failing)
            if not self._done:
                try:
                    found = self._success_figures(result)
                except ProviderError as error:
                    self.failed(self._unusable(error), answered=True)
                    return
                except Exception as exc:
                    logged(exc)
                    found = Figures()
                if found.result_count is None and self.facts.operation == "rerank":
                    self.failed(self._unreadable_answer("missing_field"), answered=True)
                else:
                    self.succeeded(found)
        except Exception as exc:
            logged(exc)
        finally:
            self._end()

    def raised(self, exc: BaseException) -> None:
        """The SDK method raised: end the open attempt, if any, with what went wrong."""
        try:
            if self.failing is not None:
                self.error_body_settled(self.failing)
            if self._done:
                return
            if interrupts(exc):  # interrupted, at whatever stage: never the provider's failure
                self.failed(error_for_interrupt(exc))
            elif self._answered:
                self.failed(self._unreadable_answer(type(exc).__name__), answered=True)
            elif self._sent:
                self.failed(describe(exc))
            else:
                self.failed(describe(exc, fallback=ErrorCategory.INVALID_REQUEST))
        except Exception as failure:
            logged(failure)
        finally:
            self._end()

    def _unreadable_answer(self, error_type: str) -> ProviderError:
        """The SDK could not read the 2xx answer (or it held nothing to count)."""
        return self._unusable(
            ProviderError(
                ErrorCategory.INVALID_RESPONSE,
                detail="the 2xx response is not what the endpoint answers",
                error_type=error_type,
            )
        )

    def _unusable(self, error: ProviderError) -> ProviderError:
        """``error`` with the 2xx status and the body's fingerprint, when the SDK's response
        object holds them: fingerprinted, never kept."""
        status = getattr(self.answer, "status_code", None)
        return answered_badly(error, status if type(status) is int else None, _body(self.answer))

    def _success_figures(self, result: object) -> Figures:
        """The answer's figures (raising its ``ProviderError`` when the endpoint does not
        answer so); the SDK's result gives only the shape, when the body was never seen."""
        if self._bad_answer is not None:
            raise self._bad_answer
        found = self._figures
        if found is None and self._answered:
            body = _body(self.answer)
            if body is not None:  # the SDK never decoded it as JSON: it may not be JSON
                found = reported(self.spec.endpoint, parse_json(body), self.facts)
        if found is None:
            found = Figures()
        if self.facts.operation == "embeddings":
            if found.dimensions is None:
                found.dimensions = _safe_shape(self.spec, result)
        elif found.result_count is None:
            found.result_count = _safe_shape(self.spec, result)
        return found

    def _forget_answer(self) -> None:
        """Take back anything attached to the response, so the call and it part cleanly."""
        response, self.answer = self.answer, None
        self._answered = False
        self._figures = None
        self._bad_answer = None
        if response is not None:
            with contextlib.suppress(Exception):
                vars(response).pop("json", None)

    def _end(self) -> None:
        if self._held is not None:
            self.release()  # a failed attempt the SDK did not retry is the call's last
        if self.answer is not None:
            self._forget_answer()
        self.request = None


def _status_error(response: Any) -> ProviderError:
    """The failure a non-2xx response stands for, fingerprinting its body if it was read."""
    return error_for_status(response.status_code, response.headers, _body(response))


def _body(response: object) -> bytes | None:
    """The raw body the client read, if it did."""
    if response is None:
        return None
    with contextlib.suppress(Exception):
        content = getattr(response, "content", None)
        return content if isinstance(content, bytes) else None
    return None


def _safe_shape(spec: MethodSpec, result: object) -> int | None:
    try:
        return spec.shape(result)
    except Exception:
        return None


def _begin(
    spec: MethodSpec, switch: Switch, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> SdkCall | None:
    if not switch.on or _current.get() is not None:
        return None
    recorder = get_recorder()
    if not recorder.active:
        return None
    try:
        facts = spec.facts(args, kwargs)
        return SdkCall(recorder, facts, spec) if facts is not None else None
    except Exception as exc:
        logged(exc)
        return None


def record_sync(
    original: Callable[..., T],
    spec: MethodSpec,
    switch: Switch,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    """Call ``original(*args, **kwargs)`` recorded per ``spec``; its result and exceptions
    reach the caller as is. Inside a call already being recorded it only passes through."""
    call = _begin(spec, switch, args, kwargs)
    if call is None:
        return original(*args, **kwargs)
    token = _current.set(call)
    try:
        result = original(*args, **kwargs)
    except BaseException as exc:
        _current.reset(token)
        call.raised(exc)
        raise
    _current.reset(token)
    call.returned(result)
    return result


async def record_async(
    original: Callable[..., Awaitable[T]],
    spec: MethodSpec,
    switch: Switch,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> T:
    """The coroutine twin of ``record_sync``."""
    call = _begin(spec, switch, args, kwargs)
    if call is None:
        return await original(*args, **kwargs)
    token = _current.set(call)
    try:
        result = await original(*args, **kwargs)
    except BaseException as exc:
        _current.reset(token)
        call.raised(exc)
        raise
    _current.reset(token)
    call.returned(result)
    return result


RECORDING = "_spanledger_recording"
"""The attribute a recorded method carries: its ``(spec, switch)``, for the process-wide switch
to record a call the same way when it reaches the SDK's method through the class."""


def wrap_sync(original: Callable[P, T], spec: MethodSpec, switch: Switch) -> Callable[P, T]:
    """``original`` recorded per ``spec``; its result and exceptions reach the caller as is."""

    @functools.wraps(original)
    def recorded(*args: P.args, **kwargs: P.kwargs) -> T:
        return record_sync(original, spec, switch, args, kwargs)

    setattr(recorded, RECORDING, (spec, switch))
    return recorded


def wrap_async(
    original: Callable[P, Awaitable[T]], spec: MethodSpec, switch: Switch
) -> Callable[P, Awaitable[T]]:
    """The coroutine twin of ``wrap_sync``."""

    @functools.wraps(original)
    async def recorded(*args: P.args, **kwargs: P.kwargs) -> T:
        return await record_async(original, spec, switch, args, kwargs)

    setattr(recorded, RECORDING, (spec, switch))
    return recorded
