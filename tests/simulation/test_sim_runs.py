"""Simulation runs: the Raft core in virtual time, configured from the same URLs as the real runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from elect.errors import ConfigError
from elect_bench.simulation import raft_runner as simulation
from elect_bench.simulation.raft_runner import RaftShape, SimScenario


def test_methods_are_configured_as_their_real_members_are() -> None:
    improved, strategy = simulation.core_config("raft", RaftShape(3, 6, 1), 1.0)
    zeebe, zeebe_strategy = simulation.core_config("raft-zeebe", RaftShape(3, 6, 1), 1.0)
    stock, stock_strategy = simulation.core_config("raft-stock", RaftShape(3, 6, 1), 1.0)
    assert (strategy, zeebe_strategy, stock_strategy) == ("balanced", "zeebe", "off")
    assert improved.fast_failover and not zeebe.fast_failover
    assert improved.election_timeout == zeebe.election_timeout == stock.election_timeout == 1.0


def test_simulated_nodes_send_through_the_members_outbox() -> None:
    """A simulated node lets heartbeat acknowledgements ride along with its next batch to the peer, as a `raft://`
    member does (`acks_after`, 0.15 s at a budget of 1 s): between quiet nodes that is one batch each way per
    heartbeat interval instead of two, and the figures are those of acknowledgements sent at once."""
    from elect_bench.simulation import experiments

    shape = RaftShape(10, 100, 1, 3)
    cfg, strategy = simulation.core_config("raft", shape, 1.0)
    delay = simulation.acks_after("raft", shape, 1.0)
    assert delay == pytest.approx(0.15)
    sims = [experiments.build(10, 100, 3, cfg, 4, strategy=strategy, ack_delay=d) for d in (0.0, delay)]
    for sim in sims:
        sim.run_until(4.0)
    at_once, riding = sims
    assert riding.events_processed < 0.75 * at_once.events_processed
    assert riding.leader_counts() == at_once.leader_counts()
    crashes = [experiments.crash_one(10, 100, 3, cfg, seed, strategy=strategy, ack_delay=d).failover
               for seed in range(5) for d in (0.0, delay)]
    assert all(0.5 < t <= 1.01 for failover in crashes for t in failover)


def test_a_small_run_shows_the_improvement_over_zep006() -> None:
    result = simulation.run(SimScenario(methods=("raft", "raft-zeebe", "raft-stock"), shapes=(RaftShape(3, 6, 30),)),
                            lambda *_: None, command="pytest")
    by = {c.method: c.summary(1.0) for c in result.cells}
    # deterministic (seeded) behaviour, not speed: one election timeout with the improvements, two for ZEP006
    assert by["raft"]["failover_p99"] <= 1.1 < by["raft-zeebe"]["failover_p50"]
    assert by["raft"]["cold_balanced"] == 1.0 and by["raft"]["after_balanced"] == 1.0
    assert by["raft-stock"]["cold_balanced"] < 1.0  # stock Raft concentrates leaders
    assert all(s["unrecovered"] == 0 and s["trials"] == 30 for s in by.values())


def test_bad_simulation_scenarios_are_refused() -> None:
    with pytest.raises(ConfigError, match="shape"):
        SimScenario.from_mapping({"shapes": [[3, 6]]})
    with pytest.raises(ConfigError, match="replication"):
        SimScenario.from_mapping({"shapes": [[3, 6, 1, 5]]})
    with pytest.raises(ConfigError, match="NAME"):
        SimScenario.from_mapping({"methods": ["etcd"], "shapes": [[3, 6, 1]]})
    with pytest.raises(ConfigError, match="NAME"):
        SimScenario.from_mapping({"methods": ["raft-stock jitter"], "shapes": [[3, 6, 1]]})


def test_stock_raft_runs_as_others_configure_it() -> None:
    narrow = "raft-stock election_jitter=0.25 pre_vote=off check_quorum=off"
    cfg, _ = simulation.core_config(narrow, RaftShape(3, 6, 1), 1.0)
    assert cfg.jitter == 0.25 and not cfg.pre_vote and not cfg.check_quorum
    result = simulation.run(SimScenario.from_mapping({"methods": f"raft-stock, {narrow}", "shapes": [[3, 6, 20]]}),
                            lambda *_: None, command="pytest")
    by = {c.method: c.summary(1.0) for c in result.cells}
    assert set(by) == {"raft-stock", narrow} and all(s["unrecovered"] == 0 for s in by.values())
    # timeouts drawn from [ET, 1.25 ET) rather than [ET, 2 ET) (seeded, so the same figures every run)
    assert by[narrow]["failover_p50"] < 1.25 < by["raft-stock"]["failover_p50"]


def test_elect_bench_runs_a_simulation_scenario_and_writes_its_report(tmp_path: Path) -> None:
    scenario = tmp_path / "sim.yaml"
    scenario.write_text("name: tiny\nmethods: [raft, raft-zeebe]\nshapes:\n  - [3, 6, 4]\n  - [6, 12, 2, 3]\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "elect", "bench", str(scenario), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "raft-zeebe" in done.stdout and "balanced cold start" in done.stdout
    data = json.loads((out / "results.json").read_text())
    assert len(data["summary"]) == 4 and data["command"].startswith("elect bench")
    assert "| raft | 3 | 6 | 3 | 4 |" in (out / "report.md").read_text()


def test_trials_run_over_processes_with_the_same_figures_as_one() -> None:
    """Seeds are taken in order whatever process ran them, and each trial's cold start and crash share one
    simulation exactly as two separate runs would (experiments.trial): workers change the wall time only."""
    from elect_bench.simulation import experiments

    def figures(workers: int) -> list[dict[str, object]]:
        scenario = SimScenario(methods=("raft", "raft-stock"), shapes=(RaftShape(3, 6, 12), RaftShape(6, 12, 4, 3)),
                               workers=workers)
        result = simulation.run(scenario, lambda *_: None, command="pytest")
        return [{k: v for k, v in c.summary(1.0).items() if k != "wall"} for c in result.cells]

    assert figures(1) == figures(2)
    cfg, strategy = simulation.core_config("raft-stock", RaftShape(5, 20, 1), 1.0)
    for seed in range(4):
        cold, crash = experiments.trial(5, 20, 3, cfg, seed, strategy=strategy)
        assert cold == experiments.cold_start(5, 20, 3, cfg, seed, strategy=strategy)
        assert crash == experiments.crash_one(5, 20, 3, cfg, seed, strategy=strategy)
    with pytest.raises(ConfigError, match="workers"):
        SimScenario.from_mapping({"workers": -1})


def test_a_trials_phases_are_reported_with_their_messages() -> None:
    """bench/sim_phases.py (where the 1000-trial run's time goes) runs the run's own trial: a cold start of elections
    and per-group heartbeats, the node links carrying only each node's greeting of its peers (a beat per pair until
    it is acked: fewer than 2 per pair), then the node links' beats while every group is quiet."""
    script = Path(__file__).resolve().parents[2] / "bench" / "sim_phases.py"
    out = subprocess.run([sys.executable, str(script), "--nodes", "5", "--partitions", "10", "--seeds", "1"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    cold, quiet, crash, total = out.splitlines()
    assert "cold start" in cold and "VoteRequest" in cold
    greetings = re.search(r"NodeBeat (\d+),", cold)
    assert greetings is not None and int(greetings[1]) < 2 * 5 * 4
    assert "quiet until 3 ET" in quiet and "NodeBeat" in quiet
    assert "crash to re-led" in crash and "PreVoteRequest" in crash
    assert total.startswith("seed 0 | trial:")
