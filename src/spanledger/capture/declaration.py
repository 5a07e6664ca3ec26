"""What one library integration declares, in one record the process-wide switch reads.

An integration (a package of ``spanledger.integrations``) declares: the library's import name
(the name ``instrument(sdks=[...])`` takes) and its distribution on the package index, the
version ranges the tests cover, the methods the switch patches on the library's classes, the
module whose ``hook(adopt)`` catches objects as the library makes them (for a library reached
through per-client hooks or import hooks rather than class patches), and the module whose
``install(client, installation)`` instruments one client or model. Reading a declaration never
imports the library: the modules it names are imported when they are needed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from spanledger.capture.installation import Installation

__all__ = ["ClassMethod", "CreationModule", "InstallModule", "Integration", "Undoable", "Versions"]


@dataclass(frozen=True)
class ClassMethod:
    """One library method the switch replaces: ``module.owner.name``; ``client_of`` finds the
    client an instance belongs to (the instance itself, or an OpenAI resource's client)."""

    module: str
    owner: str
    name: str
    is_async: bool
    client_of: Callable[[Any], Any] = lambda instance: instance

    @property
    def dotted(self) -> str:
        """``module.owner.name``, as a message names it."""
        return f"{self.module}.{self.owner}.{self.name}"

    def found(self) -> bool:
        """Whether the installed library has this method (importing its module to look): a
        release that moved or dropped it does not."""
        try:
            owner = getattr(importlib.import_module(self.module), self.owner)
            return callable(getattr(owner, self.name))
        except Exception:  # an ImportError, or whatever else the library's import raised
            return False


Versions = tuple[tuple[int, ...], tuple[int, ...]]
"""A range of versions: ``lowest <= version < below``."""


class Undoable(Protocol):
    """A change the switch made (a class patch, a creation hook), taken back by ``undo``."""

    def undo(self) -> None: ...


class InstallModule(Protocol):
    """The module an integration names in ``installs``."""

    def install(self, client: Any, installation: Installation) -> None: ...


class CreationModule(Protocol):
    """The module an integration names in ``creation``: ``hook(adopt)`` hands each object the
    library makes from then on to ``adopt``, until the returned change is undone."""

    def hook(self, adopt: Callable[[Any], None]) -> Undoable: ...


@dataclass(frozen=True)
class Integration:
    """One library spanledger records, as the switch and ``instrument(client)`` see it."""

    name: str
    """The library's import name: what ``instrument(sdks=[...])`` takes, and the module prefix
    of the classes ``instrument(client)`` hands to this integration."""
    distribution: str
    """Its distribution on the package index, whose installed version is checked."""
    tested: tuple[Versions, ...]
    """The version ranges the tests cover."""
    accepts: str = ""
    """What ``instrument(client)`` takes, as a user names it (for error messages); empty for a
    library recorded only by the switch (a framework whose runs it hears)."""
    installs: str | None = None
    """The module whose ``install(client, installation)`` instruments one client (``None``:
    ``instrument(client)`` takes nothing of this library)."""
    methods: tuple[ClassMethod, ...] = ()
    """The methods the switch replaces on the library's classes."""
    creation: str | None = None
    """The module whose ``hook(adopt)`` catches objects as the library makes them."""

    def installer(self) -> InstallModule:
        if self.installs is None:
            raise TypeError(f"spanledger.instrument takes no {self.name} object: switch it on")
        found: InstallModule = importlib.import_module(self.installs)
        return found

    def creation_hook(self) -> CreationModule | None:
        if self.creation is None:
            return None
        found: CreationModule = importlib.import_module(self.creation)
        return found

    def covers(self, module: str) -> bool:
        """Whether a class defined in ``module`` belongs to this library."""
        return module == self.name or module.startswith(self.name + ".")

    def installed_version(self) -> str | None:
        """The installed release of ``distribution``; ``None`` when it is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def tests(self, version: str) -> bool:
        """Whether ``version`` lies in one of the ranges the tests cover."""
        found = _numbers(version)
        return any(lowest <= found < below for lowest, below in self.tested)

    def tested_versions(self) -> str:
        """The tested ranges in words: ``"5.21 and later, below 6, or 7.3 and later, below 8"``."""
        return ", or ".join(
            f"{_dotted(lowest)} and later, below {_dotted(below)}" for lowest, below in self.tested
        )

    def specifiers(self) -> tuple[str, ...]:
        """The tested ranges as version specifiers, one a range: ``(">=5.21,<6", ">=7.3,<8")``."""
        return tuple(f">={_dotted(lowest)},<{_dotted(below)}" for lowest, below in self.tested)

    def untested(self) -> str | None:
        """A sentence naming the installed release and the tested ranges when that release lies
        outside them; ``None`` when it lies inside, or nothing is installed."""
        installed = self.installed_version()
        if installed is None or self.tests(installed):
            return None
        return (
            f"{self.distribution} {installed} is installed; spanledger's tests cover "
            f"{self.distribution} {self.tested_versions()}"
        )

    def missing_methods(self) -> tuple[str, ...]:
        """The declared methods the installed library does not have (``module.owner.name``)."""
        return tuple(method.dotted for method in self.methods if not method.found())


def _numbers(version: str) -> tuple[int, ...]:
    """The release numbers leading a version string (``"7.3.1rc2"``: ``(7, 3, 1)``)."""
    release = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in release.group().split(".")) if release else ()


def _dotted(numbers: tuple[int, ...]) -> str:
    return ".".join(map(str, numbers))
