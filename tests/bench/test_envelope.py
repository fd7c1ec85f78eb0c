"""`elect bench` on an envelope: real etcd:// members at two points, the floor pass (idle and beside a busy
process) and the cost pass (requests counted by relays), through the same command, table and report as any
scenario (tiny settings: one trial per cell, windows of a second or two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.infra


def _run(tmp_path: Path, spec_text: str) -> Path:
    """`elect bench SPEC --out DIR` to the end; DIR."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "elect", "bench", str(spec), "--out", str(out)],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    return out


def test_an_envelope_measures_each_point_the_floor_and_the_cost(tmp_path: Path) -> None:
    out = _run(tmp_path, "kind: envelope\nname: tiny-envelope\nmethods: [etcd]\nbudget: 1.0\nroles: 4\nmembers: 2\n"
                         "faults: [kill]\ntrials: 1\nrest: 1.5\nsweep: {roles: [8]}\n"
                         "floor: {budgets: [1.0], busy: [0, 1], screen: 1, rest: 1.5, starts: 2, start_rest: 1,\n"
                         "        start_budgets: [1.0]}\ncost: 1.5\n")
    data = json.loads((out / "results.json").read_text())
    rows = data["summary"]
    assert [(r["axis"], r["roles"], r["method"], r["fault"], r["ok"]) for r in rows] == \
        [("base", 4, "etcd", "kill", 1), ("roles", 8, "etcd", "kill", 1)]
    for row in rows:
        assert row["rest_seconds"] >= 1.5 and row["rest_changes"] == 0 and row["false_per_member_hour"] == 0
        assert 0.5 <= row["failover_p99_ratio"] <= 1.5 and 0 < row["startup_max"] < 30
        # measured (a second and a half at rest can be a few of the kernel's 10 ms CPU ticks, or none)
        assert 0 <= row["rest_cpu_mean"] < 1 and 0 < row["cpu_mean"] < 1
    assert [(r["budget"], r["busy"], r["stage"]) for r in data["floor"]] == \
        [(1.0, 0, "start"), (1.0, 0, "start"), (1.0, 0, "screen"), (1.0, 1, "screen"), (1.0, 0, "hold"),
         (1.0, 1, "hold")]
    assert data["floors"] == {"etcd": 1.0}
    [starts] = data["cold_starts"]
    assert (starts["method"], starts["budget"], starts["ran"], starts["clean"], starts["looping"]) == \
        ("etcd", 1.0, 2, 2, 0) and starts["settled_median"] > 0
    assert [(r["roles"], r["ok"]) for r in data["cost"]] == [(4, 1), (8, 1)]
    assert all(r["sent_rps_mean"] > 0 for r in data["cost"])  # renewals, counted by the relays
    report = (out / "report.md").read_text()
    assert "Cold starts: a fresh group per start" in report
    for heading in ("# elect operating envelope: tiny-envelope", "## Which method for me", "## The floor",
                    "## Cost at rest", "## Every cell"):
        assert heading in report
    for plot in ("envelope-failover.png", "envelope-false-failovers.png", "envelope-cost.png"):
        assert (out / plot).stat().st_size > 0 and plot in report


def test_the_floor_pass_alone_writes_its_report(tmp_path: Path) -> None:
    """bench/floor.yaml's shape, `faults: []` (no sweep, no cost): the run ends with its report and the floor's
    pictures; it once ended in an IndexError drawing a failover picture it had no fault for."""
    out = _run(tmp_path, "kind: envelope\nname: tiny-floor\nmethods: [etcd]\nbudget: 1.0\nroles: 2\nmembers: 2\n"
                         "faults: []\ntrials: 1\nrest: 1\n"
                         "floor: {budgets: [1.0], busy: [0], screen: 1, rest: 1, starts: 1, start_rest: 1,\n"
                         "        start_budgets: [1.0]}\n")
    data = json.loads((out / "results.json").read_text())
    assert data["floors"] == {"etcd": 1.0} and data["summary"] == []
    report = (out / "report.md").read_text()
    assert "## The floor" in report and "envelope-false-failovers.png" in report
    assert not (out / "envelope-failover.png").exists()
