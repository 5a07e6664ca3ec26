"""The HTML report opened from disk in Debian's headless Chromium: nothing logged to the
console, nothing requested but the file itself, and the charts hold the figures the text
report prints. A full-page screenshot is left in the temporary directory for review.

Without Chromium, its driver or selenium the test is skipped, and fails under
``SPANLEDGER_REQUIRE_E2E=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .logs import SCRIPT_MODEL, mixed_calls, mixed_records, write_log
from .page import run

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

SCREENSHOT = "spanledger-report-html.png"
_NETWORK = ("http:", "https:", "ws:", "wss:", "ftp:")


def _require(reason: str) -> NoReturn:
    if os.environ.get("SPANLEDGER_REQUIRE_E2E") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@contextmanager
def _chromium(profile: Path) -> Iterator[Chrome]:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        _require("Chromium not installed: apt-get install chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _require("selenium not installed: pip install -e '.[dev]'")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1200,900",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


def _texts(session: Chrome, selector: str) -> list[str]:
    found: list[str] = session.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent)", selector
    )
    return found


def _log(session: Any, kind: str) -> list[dict[str, Any]]:
    """The browser's ``kind`` log since last read (selenium leaves ``get_log`` untyped)."""
    return list(session.get_log(kind))


def _requested(performance_log: list[dict[str, Any]], page: str) -> set[str]:
    """What the page asked for, and anything at all that went to a network (what Chromium's
    own ``chrome://`` pages load from themselves is neither)."""
    urls = set()
    for entry in performance_log:
        message = json.loads(entry["message"])["message"]
        if message["method"] != "Network.requestWillBeSent":
            continue
        params = message["params"]
        url = params["request"]["url"]
        if params.get("documentURL") == page or url.startswith(_NETWORK):
            urls.add(url)
    return urls


def test_the_page_in_chromium_is_offline_quiet_and_holds_the_figures(tmp_path: Path) -> None:
    log = write_log(tmp_path / "events.jsonl", mixed_calls(), mixed_records())
    target = tmp_path / "report.html"
    assert run("report", str(log), "--html", str(target))[0] == 0
    _, text, _ = run("report", str(log))
    with _chromium(tmp_path / "profile") as session:
        session.get(target.as_uri())
        console = _log(session, "browser")
        requested = _requested(_log(session, "performance"), target.as_uri())
        resources = session.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        statuses = _texts(session, 'figure[data-chart="calls-by-status"] g.bar > title')
        by_model = _texts(session, 'figure[data-chart="spend-by-model-USD"] g.bar > title')
        not_priced = _texts(session, 'figure[data-chart="not-priced-by-model"] g.bar > title')
        shares = _texts(session, 'figure[data-chart="cited-share"] g.bar > title')
        cells = _texts(session, "table[data-totals] td")
        drawn = session.execute_script(
            "return [...document.querySelectorAll('figure svg')]"
            ".map(s => s.getBoundingClientRect().height)"
        )
        height = session.execute_script("return document.documentElement.scrollHeight")
        session.set_window_size(1200, min(height + 120, 12000))
        shot = Path(tempfile.gettempdir()) / SCREENSHOT
        assert session.save_screenshot(str(shot))
    print(f"screenshot of the HTML report: {shot}")
    assert console == []
    assert requested == {target.as_uri()}
    assert resources == []
    status_line = text.splitlines()[1]
    assert sorted(
        f"{status} · calls: {count}"
        for status, count in (part.split(": ") for part in status_line.split("  "))
    ) == sorted(statuses)
    for title in by_model:
        assert title.rpartition(": ")[2] in text
    assert f"acme/{SCRIPT_MODEL} · no_price_entry: 2" in not_priced
    distribution = next(line for line in text.splitlines() if "distribution:" in line)
    for band in distribution.split("distribution: ")[1].split(", "):
        name, count = band.split(": ")
        assert f"{name} · requests: {count}" in shares
    assert SCRIPT_MODEL in cells
    assert drawn
    assert all(height > 100 for height in drawn)
    assert shot.stat().st_size > 10_000
