"""A real browser for the tests that look at pages as a person would: headless Chromium through its driver
(Debian's `chromium` and `chromium-driver`, which ./setup installs), and where their screenshots are kept."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

#: Screenshots the tests take, kept after the run (ignored by git).
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


@contextmanager
def chromium(height: int = 1400) -> Iterator[webdriver.Chrome]:
    """Headless Chromium, its console kept for `errors`; always quit."""
    driver_path = shutil.which("chromedriver")
    assert driver_path, "chromedriver is missing: ./setup installs Debian's chromium-driver"
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size=1280,{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()


def errors(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """What the page's console said at the level of an error (a failed script, a resource it could not load)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def screenshot(driver: webdriver.Chrome, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))
