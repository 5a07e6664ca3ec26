"""A class method replaced by a wrapper that calls what it stands on the way Python would.

Other libraries wrap the same methods (OpenTelemetry's instrumentors with wrapt, OpenInference,
OpenLLMetry), before spanledger or after it, on the class or on a base class. So a wrapper
calls what the class held, or, when the class inherited the method, whatever the classes after
it in the instance's MRO hold at the moment of the call; and it binds that the way attribute
access does (the descriptor protocol), so a wrapt ``FunctionWrapper``, a plain or
``functools.wraps``'d function, a staticmethod or a classmethod each gets the arguments it
would have got without spanledger.

Undone, a patch puts back what it replaced while its wrapper is still on top. Once another
library has wrapped it, the wrapper stays under theirs, off, passing every call through; a
patch made again on the same attribute switches that wrapper back on instead of stacking a
second one on top.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ClassPatch", "bound", "looked_up", "patch_class"]

_MISSING = object()
_DEPTH = 64
"""How far down a chain of wrappers a switched-off wrapper is looked for."""

_left: dict[tuple[type, str], ClassPatch] = {}
"""Patches switched off while another library's wrapper sat on theirs, by attribute."""


def bound(attribute: object, instance: object) -> Any:
    """``attribute``, held by the class of ``instance``, as ``instance.<name>`` gives it."""
    get = getattr(type(attribute), "__get__", None)
    return attribute if get is None else get(attribute, instance, type(instance))


def looked_up(kind: type, name: str, instance: object, *, after: type | None = None) -> Any:
    """``name`` as the MRO of ``kind`` holds it now (past ``after``, when given), bound to
    ``instance``; ``AttributeError`` as attribute access raises it when no class holds it."""
    mro = kind.__mro__
    start = mro.index(after) + 1 if after is not None and after in mro else 0
    for klass in mro[start:]:
        held = vars(klass).get(name, _MISSING)
        if held is not _MISSING:
            return bound(held, instance)
    raise AttributeError(f"{type(instance).__name__!r} object has no attribute {name!r}")


class ClassPatch:
    """``owner.name`` replaced by a wrapper; ``on`` is off once undone (the wrapper then passes
    every call through, wherever it still is)."""

    def __init__(self, owner: type, name: str) -> None:
        self.owner = owner
        self.name = name
        self.replaced: object = vars(owner).get(name, _MISSING)  # ``_MISSING``: inherited
        self.wrapper: object = None
        self.on = False

    def beneath(self, instance: object) -> Callable[..., Any]:
        """What the wrapper calls for ``instance``: what ``owner`` held, or the inherited method
        as the classes after ``owner`` hold it now; bound as attribute access binds."""
        found: Callable[..., Any]
        if self.replaced is _MISSING:
            kind = type(instance) if isinstance(instance, self.owner) else self.owner
            found = looked_up(kind, self.name, instance, after=self.owner)
        else:
            found = bound(self.replaced, instance)
        return found

    def undo(self) -> None:
        """Put back what was replaced; a wrapper another library has wrapped since stays, off."""
        self.on = False
        if vars(self.owner).get(self.name) is not self.wrapper:
            _left[(self.owner, self.name)] = self
            return
        if self.replaced is _MISSING:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.replaced)


def patch_class(owner: type, name: str, make: Callable[[ClassPatch], object]) -> ClassPatch:
    """Replace ``owner.name`` with ``make(patch)``; or, when a wrapper of an earlier patch of
    the same attribute was left under another library's, switch that one back on."""
    left = _left.pop((owner, name), None)
    if left is not None and _reaches(vars(owner).get(name, _MISSING), left.wrapper):
        left.on = True
        return left
    patch = ClassPatch(owner, name)
    patch.wrapper = make(patch)
    patch.on = True
    setattr(owner, name, patch.wrapper)
    return patch


def _reaches(top: object, wrapper: object) -> bool:
    """Whether ``wrapper`` is ``top`` or found down its chain of ``__wrapped__``."""
    node = top
    for _ in range(_DEPTH):
        if node is wrapper:
            return True
        try:
            node = getattr(node, "__wrapped__", _MISSING)
        except Exception:
            return False
        if node is _MISSING:
            return False
    return False
