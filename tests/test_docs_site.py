"""The documentation site builds with ``mkdocs build --strict``: every page in the nav exists,
every link and anchor resolves, every public docstring renders, and every public module of
spanledger has its page in the API reference.

The site is built once, into a temporary directory, with this interpreter's MkDocs (the ``docs``
extra, part of ``dev``). Without MkDocs the tests skip locally and fail under
``SPANLEDGER_REQUIRE_E2E=1``, as CI runs them.
"""

from __future__ import annotations

import html
import importlib.util
import os
import pkgutil
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "spanledger"

RESERVED_PAGES = ("guides/local-models.md", "guides/fallback-chains.md", "guides/html-report.md")
"""Pages other parts of the project write; the nav links them wherever they stand."""

COMMAND_MODULES = {"cli", "demo"}
"""Documented as commands in the guides, not as an API."""


def require_tool(reason: str) -> NoReturn:
    """Fail when ``SPANLEDGER_REQUIRE_E2E=1`` (as in CI), else skip."""
    if os.environ.get("SPANLEDGER_REQUIRE_E2E") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass(frozen=True)
class Build:
    site: Path
    output: str
    seconds: float


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    if importlib.util.find_spec("mkdocs") is None:
        require_tool("MkDocs not installed: pip install -e '.[docs]'")
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    seconds = time.perf_counter() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    return Build(site, output, seconds)


def nav_pages(entries: object) -> list[str]:
    """Every Markdown page the nav of ``mkdocs.yml`` names, in order."""
    if isinstance(entries, str):
        return [entries] if entries.endswith(".md") else []
    if isinstance(entries, list):
        return [page for entry in entries for page in nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in nav_pages(value)]
    return []


def built_page(site: Path, page: str) -> Path:
    """Where MkDocs writes a page (directory URLs: ``a/b.md`` is ``a/b/index.html``)."""
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site / f"{stem}.html"
    return site / stem / "index.html"


def public_modules() -> list[str]:
    """spanledger's public top-level modules, found independently of the site's own hook."""
    return sorted(
        module.name
        for module in pkgutil.iter_modules([str(PACKAGE)])
        if not module.name.startswith("_") and module.name not in COMMAND_MODULES
    )


def config() -> dict[str, object]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def test_the_build_is_strict_and_warns_of_nothing(build: Build) -> None:
    assert config()["strict"] is True
    warnings = [line for line in build.output.splitlines() if line.startswith("WARNING")]
    assert warnings == []
    print(f"mkdocs build --strict took {build.seconds:.1f} s")


def test_every_page_in_the_nav_is_built(build: Build) -> None:
    pages = nav_pages(config()["nav"])
    assert len(pages) >= 30
    assert set(RESERVED_PAGES) <= set(pages)
    missing = [page for page in pages if not built_page(build.site, page).is_file()]
    assert missing == []


def test_every_page_written_in_docs_is_in_the_nav() -> None:
    written = {
        path.relative_to(ROOT / "docs").as_posix()
        for path in (ROOT / "docs").rglob("*.md")
        if "_hooks" not in path.parts
    }
    assert written - set(nav_pages(config()["nav"])) == set()


def test_every_public_module_has_a_reference_page(build: Build) -> None:
    modules = public_modules()
    assert {"providers", "instrumentation", "exporters", "ledger", "attribution", "testing"} <= set(
        modules
    )
    for name in ["spanledger", *(f"spanledger.{module}" for module in modules)]:
        page = built_page(build.site, f"reference/{name}.md")
        assert page.is_file(), name
        assert f'id="{name}"' in page.read_text(encoding="utf-8"), name


def test_the_reference_renders_the_public_names_with_their_docstrings(build: Build) -> None:
    providers = built_page(build.site, "reference/spanledger.providers.md").read_text()
    for name in ["CohereReranker", "OpenAIEmbeddings", "ClientOptions"]:
        assert f'id="spanledger.providers.{name}"' in providers, name
    chains = built_page(build.site, "reference/spanledger.chains.md").read_text()
    for name in ["with_fallback", "BM25Step", "spend_below", "CancelToken"]:
        assert f'id="spanledger.chains.{name}"' in chains, name
    integrations = built_page(build.site, "reference/spanledger.integrations.md").read_text()
    assert 'id="spanledger.integrations.openai"' in integrations
    attribution = built_page(build.site, "reference/spanledger.attribution.md").read_text()
    heading = attribution.split('id="spanledger.attribution.DEFAULT_CITATION"', 1)[1][:2000]
    assert "\\\\" not in html.unescape(heading)  # a pattern shown as written, no doubled \\
    top = built_page(build.site, "reference/spanledger.md").read_text()
    import spanledger

    for name in spanledger.__all__:
        if not name.startswith("__"):
            assert f"<code>{name}</code>" in top, name
    events = built_page(build.site, "reference/spanledger.events.md").read_text()
    assert 'id="spanledger.events.Event"' in events  # a type alias, documented by its docstring


def test_the_guides_carry_the_readme_examples(build: Build) -> None:
    """The README is a landing page: its Quickstart is also the site's, and it links the site."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    getting_started = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    quickstart = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert quickstart in getting_started
    for page in ["docs/getting-started.md", "docs/rules.md", "docs/reference/index.md"]:
        assert f"]({page})" in readme, page
    assert built_page(build.site, "getting-started.md").is_file()


def test_the_prometheus_page_shows_the_dashboards_folder_as_it_is(build: Build) -> None:
    """The folder's README is included at build time, so the metric list cannot drift."""
    listed = (ROOT / "dashboards" / "README.md").read_text(encoding="utf-8")
    metrics = re.findall(r"^\| `(\w+)` \|", listed, re.MULTILINE)
    alerts = re.findall(r"`(Spanledger\w+)`", listed)
    assert len(metrics) >= 6
    assert len(alerts) >= 2
    page = built_page(build.site, "guides/backends/prometheus.md").read_text(encoding="utf-8")
    for name in [*metrics, *alerts]:
        assert f"<code>{name}</code>" in page, name
    assert "include dashboards" not in page


def test_the_changelog_page_is_the_changelog(build: Build) -> None:
    versions = re.findall(r"^## \[([^\]]+)\]", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert versions
    page = built_page(build.site, "changelog.md").read_text(encoding="utf-8")
    headings = re.findall(r"<h2 id=[^>]*>(.*?)</h2>", page)
    for version in versions:
        assert any(version in heading for heading in headings), version
