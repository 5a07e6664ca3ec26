"""The old address of a module that moved: it resolves its names from their new home on first
use, so users' imports keep working and the old address adds no import arrow to the layers.

A module left behind is its docstring, its ``__all__`` and one call::

    __all__ = ["with_fallback", ...]
    forward(globals(), "spanledger.chains")

Beside it, a ``.pyi`` stub re-exports the same names from the new home for type checkers.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["forward"]


def forward(namespace: dict[str, Any], home: str) -> None:
    """Make the module whose globals are ``namespace`` give each name of its ``__all__`` as
    ``home`` defines it, importing ``home`` when a name is first asked for."""
    names = frozenset(namespace["__all__"])
    module = namespace["__name__"]

    def __getattr__(name: str) -> object:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(names | {name for name in namespace if not name.startswith("_")})

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
    namespace["__moved_to__"] = home
