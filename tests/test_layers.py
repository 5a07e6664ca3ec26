"""Import structure: private modules stay inside their package, neither the top-level parts of
spanledger nor any two of its modules import one another in a cycle, and the layers contract
in pyproject.toml (``lint-imports``) holds.

Each failure names the offending imports with their file line, so the fix is where it points.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import grimp
import pytest

ROOT = "spanledger"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """spanledger's import graph, TYPE_CHECKING imports included (they couple modules too)."""
    return grimp.build_graph(ROOT, cache_dir=None)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_boundary(module: str) -> str | None:
    """The package a private module (or a module inside one) is private to: the parent of its
    outermost private component. ``None`` for a public module."""
    parts = module.split(".")
    for depth, part in enumerate(parts):
        if _is_private(part):
            return ".".join(parts[:depth])
    return None


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _lines(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    return ", ".join(f"l.{detail['line_number']}" for detail in details) or "l.?"


def test_private_modules_are_imported_only_inside_their_package(
    graph: grimp.ImportGraph,
) -> None:
    """``pkg._mod`` (and anything inside it) may be imported by ``pkg`` and what ``pkg``
    contains, never from outside ``pkg``: a private module is free to change under its package."""
    offences = []
    for imported in sorted(graph.modules):
        boundary = _private_boundary(imported)
        if boundary is None:
            continue
        for importer in sorted(graph.find_modules_that_directly_import(imported)):
            if not _inside(importer, boundary):
                lines = _lines(graph, importer, imported)
                offences.append(f"{importer} -> {imported} ({lines}): private to {boundary}")
    assert not offences, "private modules imported from outside their package:\n" + "\n".join(
        offences
    )


def _unit(module: str) -> str:
    """The top-level part of spanledger a module belongs to (the root package is its own)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _strongly_connected(edges: dict[str, set[str]]) -> Iterator[list[str]]:
    """Tarjan's components with more than one member: the groups of units in a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> Iterator[list[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(edges.get(node, ())):
            if successor not in index:
                yield from visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                yield sorted(members)

    for node in sorted(edges):
        if node not in index:
            yield from visit(node)


def _cycles(graph: grimp.ImportGraph, unit: Callable[[str], str]) -> list[str]:
    """Every cycle among the units that ``unit`` squashes modules into, each with the imports
    that close it (importer, imported and their lines): empty when there is none."""
    edges: dict[str, set[str]] = {}
    witnesses: dict[tuple[str, str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            source, target = unit(importer), unit(imported)
            if source == target:
                continue
            edges.setdefault(source, set()).add(target)
            lines = _lines(graph, importer, imported)
            witnesses.setdefault((source, target), []).append(f"{importer} -> {imported} ({lines})")
    report = []
    for members in _strongly_connected(edges):
        report.append("cycle among " + ", ".join(members) + ":")
        for source in members:
            for target in sorted(edges[source] & set(members)):
                report.extend(f"  {witness}" for witness in witnesses[(source, target)])
    return report


def test_top_level_parts_import_one_another_without_cycles(graph: grimp.ImportGraph) -> None:
    """Squash every module into its top-level part (``spanledger.ledger.pricing`` is
    ``spanledger.ledger``; the root package is a part too, so importing ``spanledger`` from
    inside is caught): the parts must form no cycle."""
    report = _cycles(graph, _unit)
    assert not report, "import cycles between top-level parts:\n" + "\n".join(report)


def test_modules_import_one_another_without_cycles(graph: grimp.ImportGraph) -> None:
    """No module of spanledger, at any depth, imports itself back through others: a module
    that builds another (a pipeline its exporter) hands it what it needs, rather than being
    imported back by it."""
    report = _cycles(graph, lambda module: module)
    assert not report, "import cycles between modules:\n" + "\n".join(report)


def test_the_import_contracts_in_pyproject_hold() -> None:
    """``lint-imports`` (import-linter, configured in pyproject.toml) from the repository root."""
    binary = Path(sys.executable).parent / "lint-imports"
    assert binary.exists(), "lint-imports is missing: install the dev extra (import-linter)"
    result = subprocess.run(
        [str(binary), "--no-cache", "--no-logo"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_two_public_classes_share_a_name() -> None:
    """A public class name means one thing: two unrelated classes called alike (as two
    ``RerankAttempt`` once were) make imports and docs ambiguous."""
    import importlib
    import inspect
    import pkgutil

    import spanledger

    homes: dict[str, set[str]] = {}
    for module_info in pkgutil.walk_packages(spanledger.__path__, "spanledger."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and not name.startswith("_")
                and value.__module__.startswith("spanledger")
            ):
                homes.setdefault(name, set()).add(f"{value.__module__}.{value.__qualname__}")
    shared = {name: places for name, places in homes.items() if len(places) > 1}
    assert not shared, shared
