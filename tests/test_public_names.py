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
def test_an_old_address_and_its_stub_give_the_same_names(module_name: str) -> None:
    """Type checkers read the ``.pyi`` beside an old address; it must declare exactly the names
    the module forwards, each from the home the module forwards to."""
    module = importlib.import_module(module_name)
    stub = Path(module.__file__ or "").with_suffix(".pyi")
    declared: dict[str, str] = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name, "a stub re-exports a name as itself"
            declared[alias.name] = node.module or ""
    assert sorted(declared) == sorted(module.__all__)
    home = module.__moved_to__
    for name, source in declared.items():
        assert source == home or source.startswith(home + "."), (name, source)
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
