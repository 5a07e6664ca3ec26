"""The rules of a class patch, on small classes of our own with a peer's tools (wrapt's
``wrap_function_wrapper`` and OpenTelemetry's ``unwrap``, as OpenLLMetry, OpenInference and OTel
contrib use them): what the patch stands on is called as Python would call it, an inherited
method is looked up at each call past the patched class, and undoing in either order leaves
every wrapper working."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import wrapt
from opentelemetry.instrumentation.utils import unwrap

from spanledger.capture.installation import Installation
from spanledger.capture.patching import ClassPatch, patch_class
from spanledger.capture.sdk_calls import MethodSpec
from spanledger.wire.endpoints import OPENAI_EMBEDDINGS


def _plain(self: Any, value: int) -> tuple[str, Any, int]:
    return ("plain", type(self).__name__, value)


@functools.wraps(_plain)
def _wrapsd(*args: Any) -> tuple[str, Any, int]:
    return ("wraps", *_plain(*args)[1:])


def _static(value: int) -> tuple[str, int]:
    return ("static", value)


def _class(kind: type, value: int) -> tuple[str, str, int]:
    return ("class", kind.__name__, value)


class _NoDescriptor:
    """A callable class attribute that attribute access hands over unbound."""

    def __call__(self, value: int) -> tuple[str, int]:
        return ("callable", value)


def _peer(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """A wrapt wrapper, as a peer writes one: it reads its instance and arguments."""
    return ("peer", type(instance).__name__, wrapped(*args, **kwargs))


HELD: dict[str, Callable[[], object]] = {
    "function": lambda: _plain,
    "functools.wraps": lambda: _wrapsd,
    "staticmethod": lambda: staticmethod(_static),
    "classmethod": lambda: classmethod(_class),
    "no __get__": _NoDescriptor,
}


class Calls:
    """A pass-through wrapper's count of the calls it saw while on."""

    def __init__(self) -> None:
        self.seen = 0

    def make(self, patch: ClassPatch) -> Callable[..., Any]:
        def wrapper(instance: Any, *args: Any, **kwargs: Any) -> Any:
            if patch.on:
                self.seen += 1
            return patch.beneath(instance)(*args, **kwargs)

        return wrapper


def fresh_classes() -> tuple[type, type]:
    """``Child`` inherits ``method`` from ``Base``."""

    class Base:
        def method(self, value: int) -> tuple[str, int]:
            return ("base", value)

    class Child(Base):
        pass

    return Base, Child


@pytest.mark.parametrize("kind", list(HELD))
def test_what_the_class_held_is_called_as_attribute_access_calls_it(kind: str) -> None:
    class Holder:
        pass

    setattr(Holder, "method", HELD[kind]())  # noqa: B010 (a name of our choosing)
    held = vars(Holder)["method"]
    instance: Any = Holder()
    bare = instance.method(7)
    calls = Calls()
    patch = patch_class(Holder, "method", calls.make)
    assert instance.method(7) == bare
    assert calls.seen == 1
    patch.undo()
    assert vars(Holder)["method"] is held


def test_a_wrapt_wrapper_held_by_the_class_gets_the_instance_and_the_arguments() -> None:
    """The peer's wrapper sees the instance it would see bare, and the argument after it."""
    base, child = fresh_classes()
    wrapt.wrap_function_wrapper(base, "method", _peer)
    bare = child().method(3)
    patch = patch_class(base, "method", Calls().make)
    assert child().method(3) == bare == ("peer", "Child", ("base", 3))
    patch.undo()
    unwrap(base, "method")
    assert child().method(3) == ("base", 3)


def test_a_peer_wrapping_the_base_class_after_the_patch_runs() -> None:
    base, child = fresh_classes()
    calls = Calls()
    patch = patch_class(child, "method", calls.make)
    wrapt.wrap_function_wrapper(base, "method", _peer)
    assert child().method(1) == ("peer", "Child", ("base", 1))
    unwrap(base, "method")
    assert child().method(1) == ("base", 1)
    assert calls.seen == 2
    patch.undo()
    assert "method" not in vars(child)


def test_an_inherited_method_is_looked_up_past_the_patched_class_in_the_instances_mro() -> None:
    """A subclass whose MRO puts another class between the patched one and the class that
    defined the method reaches that other class, as it does bare."""
    base, child = fresh_classes()

    class Other(base):  # type: ignore[valid-type, misc]
        def method(self, value: int) -> tuple[str, int]:
            return ("other", value)

    class Diamond(child, Other):  # type: ignore[valid-type, misc]
        pass

    bare = Diamond().method(2)
    patch = patch_class(child, "method", Calls().make)
    assert Diamond().method(2) == bare == ("other", 2)
    assert child().method(2) == ("base", 2)
    patch.undo()


def test_undo_puts_back_what_the_class_held_or_nothing_when_it_inherited() -> None:
    base, child = fresh_classes()
    held = vars(base)["method"]
    for owner in (base, child):
        patch_class(owner, "method", Calls().make).undo()
    assert vars(base)["method"] is held
    assert "method" not in vars(child)


PEERED = ("peer", "Child", ("base", 5))
BARE = ("base", 5)


@pytest.mark.parametrize("off_first", ["ours", "peer"])
@pytest.mark.parametrize("on_first", ["ours", "peer"])
def test_undone_in_any_order_every_wrapper_still_on_works_and_ours_passes_through(
    on_first: str, off_first: str
) -> None:
    _, child = fresh_classes()
    calls = Calls()
    patches: list[ClassPatch] = []

    def ours_on() -> None:
        patches.append(patch_class(child, "method", calls.make))

    def peer_on() -> None:
        wrapt.wrap_function_wrapper(child, "method", _peer)

    for switch_on in (ours_on, peer_on) if on_first == "ours" else (peer_on, ours_on):
        switch_on()
    [patch] = patches
    assert child().method(5) == PEERED
    assert calls.seen == 1
    if off_first == "ours":
        patch.undo()
        assert child().method(5) == PEERED  # the peer's wrapper runs, ours passes through
        unwrap(child, "method")
        assert child().method(5) == BARE
        assert calls.seen == 1
    else:
        unwrap(child, "method")
        # OTel's ``unwrap`` takes off only a wrapt wrapper on top: a peer switched on before
        # spanledger and off while spanledger's patch sat over it stays, and keeps running.
        stuck = on_first == "peer"
        assert child().method(5) == (PEERED if stuck else BARE)
        assert calls.seen == 2
        patch.undo()
        assert child().method(5) == (PEERED if stuck else BARE)
        assert calls.seen == 2


def test_a_patch_made_again_switches_the_wrapper_left_under_a_peer_back_on() -> None:
    _, child = fresh_classes()
    calls = Calls()
    first = patch_class(child, "method", calls.make)
    wrapt.wrap_function_wrapper(child, "method", _peer)
    first.undo()
    assert child().method(4) == ("peer", "Child", ("base", 4))
    assert calls.seen == 0
    again = patch_class(child, "method", calls.make)
    assert again is first
    assert vars(child)["method"].__wrapped__ is first.wrapper  # no second layer
    assert child().method(4) == ("peer", "Child", ("base", 4))
    assert calls.seen == 1
    unwrap(child, "method")  # the peer's own unwrap still finds its wrapper on top
    assert vars(child)["method"] is first.wrapper
    again.undo()
    assert "method" not in vars(child)


def test_a_client_instrumented_by_hand_calls_its_class_as_attribute_access_would() -> None:
    """The per-client wrapper of a method the client takes from its class looks the class up
    at each call and binds what it finds as Python does: a staticmethod gets no instance, a
    peer's wrapper added after ``instrument(client)`` runs."""

    class Client:
        method = staticmethod(_static)

    client: Any = Client()
    installation = Installation(client, lambda part: None, lambda part: None)
    spec = MethodSpec(lambda args, kwargs: None, OPENAI_EMBEDDINGS, lambda result: None, "")
    installation.wrap(client, "method", spec)
    assert client.method(9) == ("static", 9)
    Client.method = _plain  # type: ignore[assignment]
    wrapt.wrap_function_wrapper(Client, "method", _peer)
    assert client.method(9) == ("peer", "Client", ("plain", "Client", 9))
    installation.undo()
    assert "method" not in vars(client)
