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


def test_the_committed_configuration_reference_is_what_the_code_says() -> None:
    """docs/configuration.md is committed (its links work on GitHub too) and written by `elect docs reference`; the
    site build refuses a stale one as well."""
    from elect_cli.docs import REFERENCE, configuration_page

    assert REFERENCE.read_text() == configuration_page(), "run `elect docs reference` and commit docs/configuration.md"


def test_code_blocks_are_highlighted(site: Path) -> None:
    page = (site / "getting-started" / "index.html").read_text()
    assert 'class="highlight"' in page and '<span class="kn">import</span>' in page


#: what a listing of methods next to each word lists: the schemes whose characteristics say so
_CAPABILITY = {"transfer": "transfers", "observe": "observes_leaders", "whom it sees lead": "observes_leaders"}
_NAMES = {"raft": "raft", "etcd": "etcd", "zookeeper": "zookeeper", "zk": "zookeeper", "kubernetes": "kubernetes",
          "memory": "memory", "kafka": "kafka", "neli": "kafka", "pysyncobj": "pysyncobj"}
_LISTING = re.compile(r"\(((?:%s)(?:, (?:%s))+)[;)]" % (("|".join(_NAMES),) * 2), re.IGNORECASE)


def _capable(capability: str) -> set[str]:
    found = set()
    probes = {"raft": "raft://a@127.0.0.1:1?peers=b@127.0.0.1:2", "memory": "memory://x"}
    for scheme in registry.plugins():
        if scheme in ("pysyncobj",):  # the baseline, not a method a user picks
            continue
        probe = probes.get(scheme, f"{scheme}://127.0.0.1:1/x")
        elector = elect.connect(probe, ["r"], member="a")
        if getattr(elector.characteristics, capability):
            found.add(scheme)
    return found


def _texts() -> list[tuple[str, str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "docs" / "methods").glob("*.md"))]
    found = [(str(p.relative_to(ROOT)), p.read_text()) for p in pages]
    for package in ("elect", "cas_lease", "neli", "raft_priority", "elect_cli", "elect_bench", "elect_cluster"):
        for path in sorted((ROOT / package).glob("*.py")):
            found.append((str(path.relative_to(ROOT)), path.read_text()))
    return found


def test_every_listing_of_methods_lists_the_registrys() -> None:
    """Where a page or a docstring lists the methods that can transfer, or that observe whom they see lead, it lists
    exactly those whose characteristics say so; where it says what the CAS leases run on, it names all three stores.
    Such lists went stale as methods grew (issue 54: `transfer` listed differently in the README and docs/api.md)."""
    wrong = []
    for name, text in _texts():
        for line_no, line in enumerate(text.splitlines(), 1):
            for match in _LISTING.finditer(line):
                before = line[:match.start()].lower()
                words = [w for w in _CAPABILITY if w in before]
                if not words:
                    continue
                listed = {_NAMES[w.strip().lower()] for w in match.group(1).split(",")}
                expected = _capable(_CAPABILITY[max(words, key=before.rfind)])
                if listed != expected:
                    wrong.append(f"{name}:{line_no}: lists {sorted(listed)}, the registry says {sorted(expected)}")
        flat = " ".join(text.split()).lower()
        for match in re.finditer(r"cas leases? (?:per role )?on etcd(?:,| or| and) zookeeper(?!,? (?:or|and) kube)",
                                 flat):
            wrong.append(f"{name}: the CAS leases without Kubernetes: {flat[match.start():match.end() + 40]}")
    assert not wrong, "\n".join(wrong)
