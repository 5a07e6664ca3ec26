"""A MkDocs hook that puts files kept elsewhere in the repository into a page.

A page line ``<!-- include dashboards/README.md -->`` becomes that file, its title dropped and
its headings one level down, so a folder's README stays the one copy of what it lists (the
metrics and their labels, the alert rules) and the site cannot drift from it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

INCLUDE = re.compile(r"^<!-- include (?P<path>[\w./-]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Put each included file in place."""
    return INCLUDE.sub(lambda match: included(match["path"]), markdown)


def included(path: str) -> str:
    """The file's Markdown without its title, every heading outside code one level down."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    shifted, fenced = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
        shifted.append(f"#{line}" if line.startswith("#") and not fenced else line)
    return "\n".join(shifted).strip("\n")
