"""report.html as a person sees it: a real trial and a real soak rendered, opened in headless Chromium (Debian's
`chromium` and `chromium-driver`, which ./setup installs), every leadership drawn as a bar, no console errors, the
tables sortable, a violation's link zooming its timeline; the screenshots are kept in test-artifacts/."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import chromium, errors, screenshot
from selenium import webdriver
from selenium.webdriver.common.by import By

from elect_bench import html, report
from elect_bench.faults import fault
from elect_bench.judging.history import History
from elect_bench.methods import METHODS
from elect_bench.provenance import Provenance, machine
from elect_bench.scenario import load
from elect_bench.suite import Cell, RunResult
from elect_bench.trial import Environment, TrialSpec, run_trial
from elect_cluster.endpoints import Endpoints


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    with chromium() as driver:
        yield driver


def bars(driver: webdriver.Chrome, key: str) -> int:
    return int(driver.execute_script(f"return document.querySelectorAll('svg[data-trial=\"{key}\"] .bar').length"))


def test_a_trials_timelines_draw_every_leadership(tmp_path: Path, infra: Endpoints,
                                                  browser: webdriver.Chrome) -> None:
    spec = TrialSpec(METHODS["etcd"], fault("pause"), budget=1.0, members=3, roles=6, hold=2.0)
    trial = run_trial(spec, Environment(infra, tmp_path), 0, "html")
    assert trial.ok, trial.error
    cells = [Cell(METHODS["etcd"], fault("pause"), 3, [trial])]
    result = RunResult(load({"methods": ["etcd"], "faults": ["pause"], "trials": 1}), cells, {},
                       Provenance("pytest", 0.0, 1.0, machine()))
    page = html.write(report.html_page(result), tmp_path / "out")
    assert "<script src" not in page.read_text() and "<link" not in page.read_text()  # nothing to fetch
    browser.get(page.as_uri())
    intervals = sum(len(ivs) for ivs in History.from_json(trial.history).intervals().values())
    assert intervals >= 6 and bars(browser, "trial-0") == intervals
    assert browser.execute_script("return document.querySelectorAll('svg.chart path').length") == 1  # etcd's CDF
    header = browser.find_elements(By.CSS_SELECTOR, "table.sortable th")[1]
    header.click()
    assert "sorted-up" in header.get_attribute("class")
    ticks = ("return Array.from(document.querySelectorAll('svg.timeline .axis'))"
             ".map(t => t.textContent).filter(t => t.endsWith(' s'))")
    before = browser.execute_script(ticks)
    browser.execute_script("document.querySelector('svg.timeline').dispatchEvent(new WheelEvent('wheel', "
                           "{deltaY: -100, clientX: 600, clientY: 50, bubbles: true, cancelable: true}))")
    assert browser.execute_script(ticks) != before  # the wheel zoomed in: the axis shows other times
    assert errors(browser) == []
    screenshot(browser, "report-trial.png")


def test_a_soaks_violations_link_to_their_moment(tmp_path: Path, browser: webdriver.Chrome) -> None:
    """A soak's page from a soak.json made here: two members lead role 0 at once from 1.0 to 1.5."""
    lines = [{"ts": 0.0, "mono": m, "member": who, "role": "0", "event": e, "token": k}
             for m, who, e, k in ((0.2, "a", "acquired", 1), (1.0, "b", "acquired", 2), (1.5, "a", "revoked", 1),
                                  (3.0, "b", "revoked", 2))]
    data = {"command": "made in a test", "started": 0.0, "seconds": 4.0, "machine": machine(), "method": "etcd",
            "by_kind": [{"fault": "pause", "strikes": 1, "failover_p50": 0.8, "failover_p99": 0.8,
                         "failover_max": 0.8, "unrecovered": 0, "leaderless": 0, "failed_starts": 0,
                         "overlap": 0.5}],
            "violations": [{"violation": "overlap on 0 at 1.000: a, b both led for 0.500 s", "lines": []}],
            "strikes": [{"index": 0, "fault": "pause", "target": "a", "at": 0.5, "failover": [0.5], "unrecovered": 0,
                         "leaderless": 0, "overlap": 0.5}],
            "history": {"start": 0.0, "end": 20.0, "lines": lines,
                        "faults": [{"mono": 0.5, "kind": "pause", "target": "a", "detail": ""},
                                   {"mono": 1.4, "kind": "resume", "target": "a", "detail": ""}]}}
    page = html.write(html.of_soak(json.loads(json.dumps(data))), tmp_path / "soak")
    browser.get(page.as_uri())
    assert bars(browser, "soak") == 2
    assert browser.execute_script("return document.querySelectorAll('svg.timeline .overlap').length") == 1
    assert browser.execute_script("return document.querySelectorAll('svg.timeline .fault-span').length") == 1
    browser.find_element(By.CSS_SELECTOR, "a[data-zoom]").click()
    labels = browser.execute_script("return Array.from(document.querySelectorAll('svg.timeline .axis'))"
                                    ".map(t => t.textContent)")
    assert "15 s" not in labels and any(label.startswith("1") for label in labels)  # zoomed to 1 s +- 3 s
    assert errors(browser) == []
    screenshot(browser, "report-soak.png")
