"""Every public name keeps its address: what a user could import from a public module of
spanledger still imports from there, and is the object its new home defines.

``tests/data/public_names.json`` is the inventory of every public module's ``__all__`` as it
stood before the package was laid out one room per concern. A module may move (its old path
then re-exports it); a name may be added; nothing in the inventory may stop importing.
"""

from __future__ import annotations

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
