"""Calls of models that run in this process, recorded as one event each.

An in-process model has no wire and no bill, so the event is built from what the call itself
shows: the arguments (how many inputs, which documents), the result (vector width, result
count), the clock, and the tokens the model's own tokenizer produced for it. Those are counted
where the library tokenizes anyway (the attention masks it builds for each batch), never by
tokenizing a second time: the sum of the masks is every token the model saw, special tokens
included, after truncation. When the rows counted do not match the inputs (another process did
the work, a modality without a mask), the usage is unknown: ``None``, never a guess.

The methods are patched on the library's classes, so a model made before or after recording is
switched on records alike. A model records when it was instrumented on its own
(``instrument(model)``) or while the process-wide switch is on for its library; a call inside a
call already recorded (``CrossEncoder.rank`` calling ``predict``, a framework's wrapper calling
``encode``) only passes through, so each call is one event.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from spanledger import _forksafe
from spanledger.capture.imports import Waiting, when_imported
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.events import EmbeddingUsage, RerankUsage
from spanledger.recorder import Recorder, get_recorder
from spanledger.recording.call import Recording, ended_by, logged
from spanledger.recording.facts import EmbedFacts, Figures, RerankFacts

__all__ = [
    "LOCAL_BILLING",
    "Library",
    "LocalCall",
    "LocalSpec",
    "counting",
    "current_local_call",
    "local_failure",
    "when_patching_fails",
]

LOCAL_BILLING = "local"
"""What an in-process model bills by: nobody bills it."""

_REQUEST_ERRORS = (TypeError, ValueError, LookupError, AttributeError)
"""What a model raises for inputs it cannot take (a number where text belongs, say)."""

_current: ContextVar[LocalCall | None] = ContextVar("spanledger_local_call", default=None)
current_local_call = _current.get


def local_failure(exc: BaseException) -> ProviderError:
    """The failure a model's exception stands for, named by its class, never its message:
    inputs it refused are ``provider_invalid_request``, an interrupt (``KeyboardInterrupt``)
    ``interrupted``, anything else that went wrong inside it ``provider_unavailable``."""
    if not isinstance(exc, Exception):
        return ended_by(exc)
    name = type(exc).__name__
    category = (
        ErrorCategory.INVALID_REQUEST
        if isinstance(exc, _REQUEST_ERRORS)
        else ErrorCategory.UNAVAILABLE
    )
    return ProviderError(category, detail=f"the local model raised {name}", error_type=name)


@dataclass(frozen=True, slots=True)
class LocalSpec:
    """How to record one model method: ``facts`` reads the call (the model, its positional and
    keyword arguments) and says how many rows its tokenizer should see (``None``: not known,
    so neither is the usage); ``figures`` reads the result's shape (width, result count,
    results)."""

    facts: Callable[
        [Any, tuple[Any, ...], dict[str, Any]], tuple[EmbedFacts | RerankFacts, int | None]
    ]
    figures: Callable[[Any, EmbedFacts | RerankFacts], Figures]


class LocalCall(Recording):
    """One recorded call of a model in this process, and the tokens its tokenizer produced."""

    __slots__ = ("busy", "expected", "owner", "rows", "tokens", "unknown")

    def __init__(
        self,
        recorder: Recorder,
        facts: EmbedFacts | RerankFacts,
        owner: object,
        expected: int | None,
    ) -> None:
        self.owner = owner
        self.expected = expected
        self.rows = 0
        self.tokens = 0
        self.unknown = False
        self.busy = False
        super().__init__(recorder, facts)

    def counted(self, rows: int, tokens: int) -> None:
        """A batch was tokenized: ``rows`` inputs, ``tokens`` of them not padding."""
        self.rows += rows
        self.tokens += tokens

    def returned(self, result: object, spec: LocalSpec) -> None:
        try:
            facts = self.facts
            try:
                figures = spec.figures(result, facts)
            except Exception as exc:
                logged(exc)
                figures = Figures()
            if not self.unknown and self.expected is not None and self.rows == self.expected:
                figures.usage = (
                    EmbeddingUsage(input_tokens=self.tokens)
                    if isinstance(facts, EmbedFacts)
                    else RerankUsage(input_tokens=self.tokens)
                )
                figures.usage_source = "tokenizer"
            if figures.result_count is None and isinstance(facts, RerankFacts):
                figures.result_count = facts.document_count  # a score per document
            self.succeeded(figures)
        except Exception as exc:
            logged(exc)

    def raised(self, exc: BaseException) -> None:
        try:
            self.failed(local_failure(exc))
        except Exception as failure:
            logged(failure)


def counting(
    owner: object | None, tokenize: Callable[[], Any], read: Callable[[Any], tuple[int, int] | None]
) -> Any:
    """Run ``tokenize()`` and count what ``read`` finds in its output (rows, tokens) for the
    call being recorded, when ``owner`` (``None``: any) is that call's model. A tokenizer run
    inside one being counted is counted once."""
    call = _current.get()
    if call is None or call.busy or (owner is not None and call.owner is not owner):
        return tokenize()
    call.busy = True
    try:
        output = tokenize()
    finally:
        call.busy = False
    try:
        found = read(output)
    except Exception as exc:
        logged(exc)
        found = None
    if found is None:
        call.unknown = True
    else:
        call.counted(*found)
    return output


def _record(
    original: Callable[..., Any],
    spec: LocalSpec,
    instance: object,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Call ``original(instance, *args, **kwargs)`` as one recorded call; its result and its
    exceptions reach the caller unchanged."""
    recorder = get_recorder()
    if not recorder.active:
        return original(instance, *args, **kwargs)
    try:
        facts, expected = spec.facts(instance, args, kwargs)
        call = LocalCall(recorder, facts, instance, expected)
    except Exception as exc:
        logged(exc)
        return original(instance, *args, **kwargs)
    token = _current.set(call)
    try:
        result = original(instance, *args, **kwargs)
    except BaseException as exc:
        _current.reset(token)
        call.raised(exc)
        raise
    _current.reset(token)
    call.returned(result, spec)
    return result


@dataclass
class _Patch:
    owner: type
    name: str
    replaced: object
    wrapper: object


@dataclass
class Library:
    """One library's patched classes, and who they record for: the models instrumented one by
    one (``chosen``) and, while ``switched`` is on, every model. ``patch`` lists, per module,
    the patches to make once that module is imported: a method to record (a ``LocalSpec``) or
    to count tokens in (a callable that wraps it)."""

    module: str
    patches: Callable[[ModuleType], list[tuple[type, str, LocalSpec | Callable[..., Any]]]]
    switched: bool = False
    chosen: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    touched: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    """Models that got something of their own (FlashRank's counting tokenizer), for undo."""
    forget: Callable[[Any], None] | None = None
    """Takes back what a model in ``touched`` got."""
    failure: str | None = None
    """Why the library's classes could not be patched when it was imported (the exception's
    type), until nobody records through it any more."""
    _done: list[_Patch] = field(default_factory=list)
    _waiting: Waiting | None = None

    def records(self, instance: object) -> bool:
        return self.switched or instance in self.chosen

    def recorded(self, original: Callable[..., Any], spec: LocalSpec) -> Callable[..., Any]:
        """``original`` (a method), recorded per ``spec`` for the models this library records
        and only passed through for the rest."""

        def recorded(instance: Any, *args: Any, **kwargs: Any) -> Any:
            if _current.get() is not None or not self.records(instance):
                return original(instance, *args, **kwargs)
            return _record(original, spec, instance, args, kwargs)

        return recorded

    def choose(self, model: object) -> None:
        """Record ``model``; a ``TypeError`` (the model untouched) when the library's classes
        cannot be patched."""
        with _lock:
            self.chosen.add(model)
            self._ensure()
            if self.failure is not None:
                failure = self.failure
                self.chosen.discard(model)
                self._settle()
                raise TypeError(f"{self.module}'s classes could not be patched ({failure})")

    def release(self, model: object) -> None:
        with _lock:
            self.chosen.discard(model)
            self._settle()

    def switch_on(self) -> _SwitchedOn:
        with _lock:
            self.switched = True
            self._ensure()
        return _SwitchedOn(self)

    def switch_off(self) -> None:
        with _lock:
            self.switched = False
            self._settle()

    def _ensure(self) -> None:
        if self._done or self._waiting is not None:
            return
        self._waiting = when_imported(self.module, self._apply)

    def _settle(self) -> None:
        """Take every patch back once nobody records through them."""
        if self.switched or len(self.chosen):
            return
        if self._waiting is not None:
            self._waiting.undo()
            self._waiting = None
        for patch in reversed(self._done):
            if vars(patch.owner).get(patch.name) is patch.wrapper:
                if patch.replaced is _MISSING:
                    delattr(patch.owner, patch.name)
                else:
                    setattr(patch.owner, patch.name, patch.replaced)
        self._done.clear()
        self.failure = None
        for model in list(self.touched):
            if self.forget is not None:
                try:
                    self.forget(model)
                except Exception as exc:
                    logged(exc)
        self.touched = weakref.WeakSet()

    def _apply(self, module: ModuleType) -> None:
        """Patch every class the library's ``patches`` name, or none of them: a class or method
        a release moved or dropped (or anything else raised while finding them) leaves the
        library as it is, the failure kept and reported, never raised into the import."""
        with _lock:
            self._waiting = None
            if self._done or not (self.switched or len(self.chosen)):
                return
            try:
                planned = [
                    self._planned(owner, name, how) for owner, name, how in self.patches(module)
                ]
            except Exception as exc:
                self.failure = type(exc).__name__
                _report_failure(self.module, exc)
                return
            for patch in planned:
                self._done.append(patch)
                setattr(patch.owner, patch.name, patch.wrapper)

    def _planned(self, owner: type, name: str, how: LocalSpec | Callable[..., Any]) -> _Patch:
        original = getattr(owner, name)
        wrapper = self.recorded(original, how) if isinstance(how, LocalSpec) else how(original)
        functools.update_wrapper(wrapper, original)
        return _Patch(owner, name, vars(owner).get(name, _MISSING), wrapper)


class _SwitchedOn:
    """What the process-wide switch keeps to turn one library's recording off."""

    def __init__(self, library: Library) -> None:
        self.library = library

    @property
    def failure(self) -> str | None:
        """Why the library could not be patched once imported; ``None``: patched, or not
        imported yet."""
        return self.library.failure

    def undo(self) -> None:
        self.library.switch_off()


def _logged_failure(module: str, exc: BaseException) -> None:
    if isinstance(exc, Exception):
        logged(exc)


_report_failure: Callable[[str, BaseException], None] = _logged_failure


def when_patching_fails(report: Callable[[str, BaseException], None]) -> None:
    """Have ``report(library, exception)`` told when a library's classes cannot be patched
    (by default the failure is logged by type)."""
    global _report_failure
    _report_failure = report


_MISSING = object()
_lock = _forksafe.module_lock(globals(), "_lock", threading.RLock)
