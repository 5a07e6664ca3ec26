"""MkDocs hooks that give every public module of spanledger a page in the API reference.

The pages are made at build time from the package itself, so a module added to spanledger is
documented (and its docstrings checked by ``mkdocs build --strict``) without anyone editing
the navigation. Each page renders one top-level module or package with its public submodules.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path
from typing import Any

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "spanledger"

SECTION = "API reference"
"""The nav entry whose list the generated pages are appended to."""

FIRST = (
    "providers",
    "chains",
    "instrumentation",
    "integrations",
    "recorder",
    "events",
    "exporters",
    "ledger",
    "attribution",
    "testing",
    "configuration",
    "eventlog",
)
"""The modules a reader looks for first, in this order; the rest follow by name."""

COMMANDS = {"cli", "demo"}
"""Modules that are the command line, documented as commands in the guides, not as an API."""


def public_modules() -> list[str]:
    """The dotted names of spanledger itself and its public top-level modules, in nav order."""
    found = {
        module.name
        for module in pkgutil.iter_modules([str(PACKAGE)])
        if not module.name.startswith("_") and module.name not in COMMANDS
    }
    ordered = [name for name in FIRST if name in found]
    ordered += sorted(found - set(ordered))
    return ["spanledger", *(f"spanledger.{name}" for name in ordered)]


def page_path(module: str) -> str:
    return f"reference/{module}.md"


def page_text(module: str, package: griffe.Module) -> str:
    if module == "spanledger":
        return top_level_text(package)
    found = package[module.removeprefix("spanledger.")]
    assert isinstance(found, griffe.Module)
    return "\n".join([f"---\ntitle: {module}\n---\n", *module_blocks(found)])


def module_blocks(module: griffe.Module, level: int = 1) -> list[str]:
    """One ``:::`` block for the module and one per public submodule, each object rendered once.

    A package's own page shows the names it exports; a submodule's block leaves those out (they
    are the same objects), and shows what else it defines.
    """
    blocks = [directive(module.path, level, members=None if level == 1 else [])]
    if not module.modules:
        return blocks
    exported = {
        member.target_path
        for member in module.members.values()
        if isinstance(member, griffe.Alias) and member.is_public
    }
    for name, submodule in sorted(module.modules.items()):
        if name.startswith("_") or not isinstance(submodule, griffe.Module):
            continue
        own = [
            member_name
            for member_name, member in submodule.members.items()
            if not member_name.startswith("_")
            and not member.is_alias
            and not member.is_module
            and member.is_public
            and member.path not in exported
        ]
        blocks.append(directive(submodule.path, level + 1, members=own))
    return blocks


def directive(path: str, level: int, *, members: list[str] | None) -> str:
    """A mkdocstrings block for ``path``: all its public members, or only ``members``."""
    options = [f"      heading_level: {level}", "      show_submodules: false"]
    if members is not None:
        listed = ", ".join(members)
        options.append(f"      members: [{listed}]" if members else "      members: false")
    return "\n".join([f"::: {path}", "    options:", *options, ""])


def top_level_text(package: griffe.Module) -> str:
    """The package's own page: its docstring and each top-level name linked to its home.

    The names are documented where they are defined; rendering them here as well would give
    each two primary anchors, which cross-references could not choose between.
    """
    import spanledger

    homes: dict[str, str] = spanledger._HOMES  # each public name's defining module
    rows = []
    for name in sorted(homes, key=str.lower):
        home = homes[name]
        summary = first_paragraph(package, home, name)
        if home == f"spanledger.{name}":
            rows.append(f"| [`{name}`][{home}] | the module itself | {summary} |")
        else:
            rows.append(f"| [`{name}`][{home}.{name}] | [`{home}`][{home}] | {summary} |")
    table = "\n".join(["| name | defined in | what it is |", "|---|---|---|", *rows])
    return (
        "---\ntitle: spanledger\n---\n\n"
        "::: spanledger\n    options:\n      members: false\n      show_submodules: false\n\n"
        "## Top-level names\n\n"
        "`import spanledger` is cheap: each of these loads its module on first use.\n\n"
        f"{table}\n"
    )


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append one nav entry per public module to the API reference section."""
    for entry in config.nav or []:
        if isinstance(entry, dict) and SECTION in entry:
            pages = entry[SECTION]
            pages.extend({module: page_path(module)} for module in public_modules())
            return config
    raise ValueError(f"mkdocs.yml has no nav section named {SECTION!r}")


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """Add each module's page, made here rather than written in docs/."""
    package = griffe.load("spanledger", search_paths=[str(PACKAGE.parent)], resolve_aliases=False)
    assert isinstance(package, griffe.Module)
    for module in public_modules():
        text = page_text(module, package)
        files.append(File.generated(config, page_path(module), content=text))
    return files


def first_paragraph(package: griffe.Module, home: str, name: str) -> str:
    """The first paragraph of a top-level name's docstring, as read from the source (a type
    alias's own docstring included), fit for a table cell."""
    module = package[home.removeprefix("spanledger.")] if home != "spanledger" else package
    found = module if home == f"spanledger.{name}" else module[name]
    docstring = found.docstring
    text = docstring.value if docstring is not None else ""
    paragraph = text.split("\n\n", 1)[0].replace("\n", " ").strip().removesuffix(":")
    return paragraph.replace("|", "\\|")
