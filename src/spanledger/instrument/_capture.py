"""Record one SDK method call as one event per HTTP attempt, with figures from the raw body.

The wrapped SDK method runs with an ``SdkCall`` in a context variable, so concurrent calls on
threads or asyncio tasks never see each other's. Hooks at the SDK's HTTP layer report each
attempt: a request leaving starts one (the first continues the attempt opened when the method
was entered), an error status ends it at once, and a 2xx response is held until the SDK returns
or raises. Success figures come from the JSON the SDK decoded from the raw body, captured as it
decodes it, never from the SDK's typed result.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

import structlog

from spanledger.errors import ErrorCategory, Fingerprint, ProviderError
from spanledger.instrument._errors import describe
from spanledger.instrument._facts import CallFacts, Figures
from spanledger.instrument._recording import Recording
from spanledger.recorder import Recorder, get_recorder

__all__ = ["MethodSpec", "SdkCall", "Switch", "current_call", "wrap_async", "wrap_sync"]

_log = structlog.get_logger("spanledger.instrument")
P = ParamSpec("P")
T = TypeVar("T")

_current: ContextVar[SdkCall | None] = ContextVar("spanledger_sdk_call", default=None)

_NO_RESPONSE = ProviderError(
    ErrorCategory.UNAVAILABLE,
    detail="the attempt ended without a response and the SDK retried",
    error_type="no_response",
)


def current_call() -> SdkCall | None:
    """The SDK call being recorded in this thread or task, if any."""
    return _current.get()


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """How to record one SDK method.

    ``facts`` reads the call's arguments (``None``: do not record this call); ``read`` reads the
    figures from a decoded 2xx body; ``shape`` reads the vector width or result count from the
    SDK's result when the raw body could not be read; ``route`` is the path suffix the SDK
    posts to, so only this call's own requests count as its attempts.
    """

    facts: Callable[[tuple[Any, ...], dict[str, Any]], CallFacts | None]
    read: Callable[[object], Figures]
    shape: Callable[[Any], int | None]
    route: str


class Switch:
    """Turned off by ``uninstrument``: wrappers still referenced anywhere pass straight through."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


class SdkCall:
    """The attempts of one SDK method call; each attempt is one ``Recording``."""

    __slots__ = (
        "_answer",
        "_attempt",
        "_figures",
        "_redirected",
        "_sent",
        "facts",
        "recorder",
        "request",
        "spec",
    )

    def __init__(self, recorder: Recorder, facts: CallFacts, spec: MethodSpec) -> None:
        self.recorder = recorder
        self.facts = facts
        self.spec = spec
        self.request: object = None
        self._attempt: Recording | None = Recording(recorder, facts)
        self._sent = False
        self._redirected = False
        self._figures: Figures | None = None
        self._answer: Callable[[], bytes | None] | None = None

    def owns(self, path: str) -> bool:
        return path.endswith(self.spec.route)

    def attempt_sent(self, request: object) -> None:
        """A request left for this call. An earlier attempt still open got no response."""
        with _guard():
            self.request = request
            attempt = self._attempt
            if attempt is not None and self._sent and not self._redirected:
                attempt.failed(_NO_RESPONSE)
                attempt = None
            if attempt is None:
                attempt = Recording(self.recorder, self.facts)
            self._attempt = attempt
            self._sent = True
            self._redirected = False
            self._figures = None
            self._answer = None

    def attempt_failed(self, error: ProviderError) -> None:
        """The attempt ended with an error status (or a transport failure the hook saw)."""
        with _guard():
            attempt, self._attempt = self._attempt, None
            self._sent = False
            if attempt is not None:
                attempt.failed(error)

    def attempt_redirected(self) -> None:
        self._redirected = True

    def attempt_answered(self, body: Callable[[], bytes | None]) -> None:
        """A 2xx arrived; ``body`` reaches its raw bytes once the client has read them."""
        self._answer = body

    def answer_decoded(self, payload: object) -> None:
        """The SDK decoded the 2xx body: read the figures from that verbatim JSON."""
        with _guard():
            if self._answer is not None and self._figures is None:
                self._figures = self.spec.read(payload)

    def returned(self, result: object) -> None:
        """The SDK method returned: the open attempt succeeded."""
        with _guard():
            attempt, self._attempt = self._attempt, None
            if attempt is not None:
                attempt.succeeded(self._success_figures(result))

    def raised(self, exc: BaseException) -> None:
        """The SDK method raised: end the open attempt, if any, with what went wrong."""
        with _guard():
            attempt, self._attempt = self._attempt, None
            if attempt is None:
                return
            if self._answer is not None:
                body = self._answer()
                attempt.failed(
                    ProviderError(
                        ErrorCategory.INVALID_RESPONSE,
                        detail="the SDK could not read a 2xx response",
                        fingerprint=Fingerprint.of(body) if body is not None else None,
                        error_type=type(exc).__name__,
                    )
                )
            elif self._sent:
                attempt.failed(describe(exc))
            else:
                attempt.failed(describe(exc, fallback=ErrorCategory.INVALID_REQUEST))

    def _success_figures(self, result: object) -> Figures:
        found = self._figures
        if found is None and self._answer is not None:
            body = self._answer()
            with contextlib.suppress(ValueError):
                found = self.spec.read(json.loads(body)) if body else None
        found = found if found is not None else Figures()
        if self.facts.operation == "embeddings" and found.dimensions is None:
            return replace(found, dimensions=_safe_shape(self.spec, result))
        if self.facts.operation == "rerank" and found.result_count is None:
            return replace(found, result_count=_safe_shape(self.spec, result))
        return found


def _safe_shape(spec: MethodSpec, result: object) -> int | None:
    try:
        return spec.shape(result)
    except Exception:
        return None


@contextlib.contextmanager
def _guard() -> Any:
    """Recording never raises into the SDK: a failure here is logged by type and dropped."""
    try:
        yield
    except Exception as exc:
        with contextlib.suppress(Exception):
            _log.error("instrumentation_failed", error_type=type(exc).__name__)


def _begin(spec: MethodSpec, switch: Switch, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SdkCall | None:
    if not switch.on or _current.get() is not None:
        return None
    recorder = get_recorder()
    if not recorder.active:
        return None
    try:
        facts = spec.facts(args, kwargs)
        return SdkCall(recorder, facts, spec) if facts is not None else None
    except Exception as exc:
        with contextlib.suppress(Exception):
            _log.error("instrumentation_failed", error_type=type(exc).__name__)
        return None


def wrap_sync(original: Callable[P, T], spec: MethodSpec, switch: Switch) -> Callable[P, T]:
    """``original`` recorded per ``spec``; its result and exceptions reach the caller as is."""

    @functools.wraps(original)
    def recorded(*args: P.args, **kwargs: P.kwargs) -> T:
        call = _begin(spec, switch, args, kwargs)
        if call is None:
            return original(*args, **kwargs)
        token = _current.set(call)
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            call.raised(exc)
            raise
        finally:
            _current.reset(token)
        call.returned(result)
        return result

    return recorded


def wrap_async(
    original: Callable[P, Awaitable[T]], spec: MethodSpec, switch: Switch
) -> Callable[P, Awaitable[T]]:
    """The coroutine twin of ``wrap_sync``."""

    @functools.wraps(original)
    async def recorded(*args: P.args, **kwargs: P.kwargs) -> T:
        call = _begin(spec, switch, args, kwargs)
        if call is None:
            return await original(*args, **kwargs)
        token = _current.set(call)
        try:
            result = await original(*args, **kwargs)
        except BaseException as exc:
            call.raised(exc)
            raise
        finally:
            _current.reset(token)
        call.returned(result)
        return result

    return recorded
