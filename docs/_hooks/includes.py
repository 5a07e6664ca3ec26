"""A MkDocs hook that puts files kept elsewhere in the repository into a page.

A page line ``<!-- include dashboards/README.md -->`` becomes that file without its title (the
page has its own), so a folder's README or the changelog stays the one copy of what it says and
the site cannot drift from it.
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
    """The file's Markdown without its ``# `` title line."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")
