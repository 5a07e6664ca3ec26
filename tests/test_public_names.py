"""Every public name keeps its address: what a user could import from a public module of
spanledger still imports from there, and is the object its new home defines.

``tests/data/public_names.json`` is the inventory of every public module's ``__all__`` as it
stood before the package was laid out one room per concern. A module may move (its old path
then re-exports it); a name may be added; nothing in the inventory may stop importing.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

INVENTORY: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "data" / "public_names.json").read_text()
)


@pytest.mark.parametrize("module_name", sorted(INVENTORY))
def test_every_public_name_still_imports_from_its_module(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = []
    for name in INVENTORY[module_name]:
        try:
            namespace: dict[str, object] = {}
            exec(f"from {module_name} import {name}", namespace)  # the user's own spelling
        except ImportError:
            missing.append(name)
            continue
        assert namespace[name] is getattr(module, name)
    assert not missing, f"{module_name} no longer gives {missing}"


@pytest.mark.parametrize("module_name", sorted(INVENTORY))
def test_a_public_module_still_lists_its_names(module_name: str) -> None:
    """``from module import *`` still brings every name it brought."""
    module = importlib.import_module(module_name)
    assert set(INVENTORY[module_name]) <= set(module.__all__)


def _old_addresses() -> list[str]:
    """The modules left at an old address that forward their names (``spanledger._moved``)."""
    package = Path(importlib.import_module("spanledger").__file__ or "").parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.stem != "_moved" and "forward(globals()" in path.read_text(encoding="utf-8"):
            relative = path.relative_to(package.parent).with_suffix("")
            found.append(".".join(relative.parts))
    return found


@pytest.mark.parametrize("module_name", _old_addresses())
def test_an_old_address_gives_everything_of_its_home_and_so_does_its_stub(
    module_name: str,
) -> None:
    """An old address gives each public name of the module it moved to, as that module defines
    it (and nothing else); type checkers read the ``.pyi`` beside it, which must star-import
    that same module."""
    module = importlib.import_module(module_name)
    home = importlib.import_module(module.__moved_to__)
    assert module.__all__ == home.__all__
    for name in home.__all__:
        assert getattr(module, name) is getattr(home, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        module.nothing_here  # noqa: B018
    stub = Path(module.__file__ or "").with_suffix(".pyi")
    imports = list(ast.parse(stub.read_text(encoding="utf-8")).body)
    assert all(isinstance(node, ast.ImportFrom) for node in imports)
    assert {node.module for node in imports if isinstance(node, ast.ImportFrom)} == {home.__name__}
    assert any(alias.name == "*" for node in imports for alias in getattr(node, "names", []))
