"""The old address of a module that moved: it gives every public name of its new home, found
there on first use, so users' imports keep working and the old address adds no import arrow to
the layers.

A module left behind is its docstring and one call, and a ``.pyi`` stub beside it that star-
imports the new home for type checkers::

    forward(globals(), "spanledger.chains")
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["forward"]


def forward(namespace: dict[str, Any], home: str) -> None:
    """Make the module whose globals are ``namespace`` give each name of ``home``'s
    ``__all__`` (and that list itself) as ``home`` defines it, importing ``home`` when a name
    is first asked for."""
    module = namespace["__name__"]

    def target() -> ModuleType:
        return importlib.import_module(home)

    def __getattr__(name: str) -> object:
        names: list[str] = target().__all__
        if name == "__all__":
            value: object = list(names)
        elif name in names:
            value = getattr(target(), name)
        else:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        own = {name for name in namespace if not name.startswith("_")}
        return sorted(own | set(target().__all__))

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
    namespace["__moved_to__"] = home
