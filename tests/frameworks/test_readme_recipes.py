"""Every framework recipe in the README runs as written and ends in a cited token share."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
RECIPE = re.compile(r"<!-- recipe: (\w+) -->\n```python\n(.*?)\n```", re.DOTALL)


def recipes() -> dict[str, str]:
    return dict(RECIPE.findall(README.read_text(encoding="utf-8")))


def test_the_readme_has_a_recipe_per_framework() -> None:
    assert set(recipes()) == {"langchain", "llamaindex", "haystack"}


@pytest.mark.parametrize("name", ["langchain", "llamaindex", "haystack"])
def test_a_recipe_runs_as_written(name: str, tmp_path: Path) -> None:
    script = tmp_path / f"recipe_{name}.py"
    script.write_text(recipes()[name], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.fullmatch(r"billed \d+ (tokens|search unit); cited token share \d+%\n", done.stdout)
