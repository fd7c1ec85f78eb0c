"""The harness end to end on real processes and a real store: every fault kind, the network cut included,
and the network-namespace hosts torn down even when a run fails."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from elect_bench import plots, report, scenario, suite
from elect_cluster.netns import leftovers
from elect_cluster.waiting import wait_until

from _infra_fixtures import process_alive

pytestmark = pytest.mark.infra


def test_every_fault_kind_against_etcd(tmp_path: Path) -> None:
    chosen = scenario.load({"name": "smoke", "methods": ["etcd"], "faults": ["kill", "stop", "pause", "cut"],
                            "trials": 1, "members": 3, "roles": 4, "budget": 1.0, "hold": 2.5})
    statuses: list[str] = []
    result = suite.run(chosen, tmp_path / "work", lambda cell, done, total, status: statuses.append(status),
                       command="pytest")
    by_fault = {c.fault.name: c for c in result.cells}
    for fault, cell in by_fault.items():
        trial = cell.trials[0]
        assert trial.ok, f"{fault}: {trial.error}"
        assert trial.failover and trial.unrecovered == 0, f"{fault}: no survivor took over"
        assert trial.violations == [], f"{fault}: {trial.violations}"
    assert by_fault["stop"].trials[0].failover[0] < by_fault["kill"].trials[0].failover[0]  # graceful is faster
    for fault in ("pause", "cut"):  # the frozen or cut-off leader ended its leadership by its own deadline
        lines = by_fault[fault].trials[0].history["lines"]
        assert any(line["event"] == "fenced" for line in lines), f"{fault}: the victim never reported fenced"
    assert not leftovers(mine=True)  # ours are gone (another run on the machine may hold its own)
    summary = by_fault["kill"].summary(chosen.budget)
    assert summary["ok"] == 1 and not math.isnan(summary["failover_p99"])
    pictures = plots.draw(result, tmp_path / "out")
    data, md = report.write(result, tmp_path / "out", pictures)
    assert data.exists() and "| etcd | kill |" in md.read_text() and len(pictures) >= 3
    assert any("kill" in s for s in statuses)  # progress was reported


def test_network_hosts_are_torn_down_when_a_run_fails(tmp_path: Path) -> None:
    chosen = scenario.load({"methods": ["etcd"], "faults": ["cut"], "trials": 1})
    with pytest.raises(RuntimeError, match="boom"), suite.environment(chosen, tmp_path) as env:
        assert env.placement.can_cut
        raise RuntimeError("boom")
    assert not leftovers(mine=True)  # ours are gone (another run on the machine may hold its own)


def test_infrastructure_faults_kill_and_freeze_a_store_member(tmp_path: Path) -> None:
    chosen = scenario.load({"name": "infra-smoke", "methods": ["etcd", "raft"], "faults": ["infra", "infra-pause"],
                            "trials": 1, "members": 3, "roles": 4, "budget": 1.0, "hold": 2.0,
                            "store_members": 3})
    result = suite.run(chosen, tmp_path / "work", lambda *_: None, command="pytest")
    assert {c.method.name for c in result.cells} == {"etcd"}  # raft has no infrastructure to fault: skipped, saying so
    assert "no infrastructure" in result.skipped["raft / infra"]
    for cell in result.cells:
        trial = cell.trials[0]
        assert trial.ok, f"{cell.fault}: {trial.error}"
        faults = trial.history["faults"]
        back = "restarted" if cell.fault.name == "infra" else "resume"
        assert [f["kind"] for f in faults] == [cell.fault.name, back], faults
        assert faults[0]["target"].startswith("etcd[") and faults[0]["detail"] == "1 of 3"
        assert trial.unrecovered == 0 and len(trial.failover) == trial.disrupted, f"{cell.fault}: not led again"
        assert trial.violations == [], f"{cell.fault}: {trial.violations}"
        assert trial.after_max_led >= 1  # every role is led at the end
    summary = result.cells[0].summary(chosen.budget)
    assert summary["disrupted"] == result.cells[0].trials[0].disrupted


def test_load_is_counted_per_member_by_relays_that_parse_each_protocol(tmp_path: Path) -> None:
    chosen = scenario.load({"name": "load-smoke", "methods": ["raft", "kafka-fast", "etcd", "zookeeper"],
                            "faults": ["none"], "trials": 1, "sizes": [3], "roles": 4, "load_window": 2.0,
                            "meter": True})
    result = suite.run(chosen, tmp_path / "work", lambda *_: None, command="pytest")
    for cell in result.cells:
        trial = cell.trials[0]
        assert trial.ok, f"{cell.method.name}: {trial.error}"
        # every member sends: heartbeats / renewals / pings / requests, each one counted for that member
        assert set(trial.sent_rps) == {"m0", "m1", "m2"}, f"{cell.method.name}: {trial.sent_rps}"
        assert all(rate > 0 for rate in trial.sent_rps.values()), f"{cell.method.name}: {trial.sent_rps}"
        assert set(trial.sent_pps) == {"m0", "m1", "m2"}  # and packets on each member's link
        assert not math.isnan(cell.summary(chosen.budget)["sent_rps_mean"])
    assert not leftovers(mine=True)  # ours are gone (another run on the machine may hold its own)


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                children = {int(c) for c in (task / "children").read_text().split()}
            except OSError:
                continue
            todo += list(children - found)
            found |= children
    return found


def test_a_terminated_run_stops_its_members_and_infrastructure(tmp_path: Path) -> None:
    run = subprocess.Popen([sys.executable, "-m", "elect", "bench", "--methods", "etcd", "--faults", "kill",
                            "--trials", "20", "--out", str(tmp_path / "out"), "--keep-logs"],
                           stderr=subprocess.PIPE, text=True)
    try:
        # members (python) and etcd running under the run
        wait_until(lambda: len(_descendants(run.pid)) >= 4, 120, 0.1, what="the run's members and etcd")
        started = _descendants(run.pid)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 128 + signal.SIGTERM
        # --keep-logs: what the members printed is kept, also for a run cut short
        assert list((tmp_path / "out" / "logs").glob("etcd-kill-3-0-*/member-m*.log")), \
            list((tmp_path / "out").rglob("*"))
        wait_until(lambda: not [p for p in started if process_alive(p)], 30, 0.1,
                   what="every process the run started to be gone")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
