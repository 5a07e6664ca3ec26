"""Names a module gives but imports only on first use.

The old address of a module that moved gives every public name of its new home, found there on
first use, so users' imports keep working and the old address adds no import arrow to the
layers. A module left behind is its docstring and one call, and a ``.pyi`` stub beside it that
star-imports the new home for type checkers::

    forward(globals(), "spanledger.chains")

A package gives its public names from the modules that define them the same way
(``give_on_first_use``), so importing it, or one part of it, imports no other part.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["forward", "give_on_first_use"]


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


def give_on_first_use(namespace: dict[str, Any], homes: Mapping[str, str]) -> None:
    """Make the package whose globals are ``namespace`` give each name of ``homes`` (name: the
    module that defines it; a submodule names itself), importing that module when the name is
    first asked for. ``dir()`` lists the package's ``__all__``."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(namespace["__all__"])

    namespace["__getattr__"] = __getattr__
    namespace["__dir__"] = __dir__
