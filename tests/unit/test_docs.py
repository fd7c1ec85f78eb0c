"""The documentation site builds with MkDocs in strict mode (a broken link or a bad page fails), its configuration
reference covers every scheme's every option, its API reference every public name, each with a docstring; and one
page opens in headless Chromium without errors (the screenshot kept in test-artifacts/)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _browser import chromium, errors, screenshot

import elect
from elect import options, registry

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    run = subprocess.run([sys.executable, "-m", "elect", "docs", "build", "--out", str(out)],  # mkdocs --strict
                         capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_the_configuration_reference_lists_every_option_of_every_scheme(site: Path) -> None:
    page = (site / "configuration" / "index.html").read_text()
    for scheme, plugin in registry.plugins().items():
        assert f"{scheme}://" in page
        missing = [name for name, _, _ in options.describe(plugin.options) if f"<code>{name}</code>" not in page]
        assert not missing, f"{scheme}: {missing}"


def test_every_committed_report_is_listed(site: Path) -> None:
    page = (site / "reports" / "index.html").read_text()
    committed = [p for p in (ROOT / "docs" / "results").rglob("*.md") if p.name in ("report.md", "soak.md")]
    assert committed and all(p.parent.relative_to(ROOT / "docs" / "results").as_posix() in page for p in committed)


def test_every_public_name_is_in_the_api_reference_with_a_docstring(site: Path) -> None:
    page = (site / "api" / "index.html").read_text()
    for name in elect.__all__:
        assert re.search(rf'id="elect\.{name}"', page) or f"<code>{name}</code>" in page, name
        target = getattr(elect, name)
        assert inspect.getdoc(target), f"elect.{name} has no docstring"
        if inspect.isclass(target):
            undocumented = [m for m, f in vars(target).items() if not m.startswith("_") and callable(f)
                            and not inspect.getdoc(f)]
            assert not undocumented, f"elect.{name}: {undocumented} have no docstring"


def test_a_page_opens_in_a_browser_without_errors(site: Path) -> None:
    with chromium(height=1000) as driver:
        driver.get((site / "methods" / "raft" / "index.html").as_uri())
        assert "raft://" in driver.page_source
        assert errors(driver) == []  # nothing fetched from the network, no failing script
        screenshot(driver, "docs-raft.png")
