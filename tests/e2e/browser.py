"""Debian's Chromium, headless, driven by selenium through Debian's chromedriver: what a person
would see in a backend's UI. Never downloads a browser or a driver."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .conftest import require_backend

if TYPE_CHECKING:
    from selenium.webdriver import Chrome

WINDOW = "1600,1000"


@contextmanager
def headless_chromium() -> Iterator[Chrome]:
    """A headless Chromium session; missing Chromium or its driver skips the test (fails it
    under ``SPANLEDGER_REQUIRE_E2E=1``)."""
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        require_backend("Chromium not installed: apt-get install chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        require_backend("selenium not installed: pip install -e '.[dev]'")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW}",
    ):
        options.add_argument(argument)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()
