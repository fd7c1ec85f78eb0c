"""The lease methods in seeded simulation (`elect_bench.simulation.lease_world`): the real elector against a
simulated etcd / ZooKeeper, a nemesis, and the real checker."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from sim_kills import kill_a_leader

from elect.errors import ConfigError
from elect_bench.faults.member import Kill, Lossy, Slow
from elect_bench.simulation import chaos_runner, seeded_chaos
from elect_bench.simulation.chaos_runner import ChaosScenario
from elect_bench.simulation.seeded_chaos import LEASE_KINDS, ChaosShape, build, chaos, replay

# A seed found before members' clocks were simulated replays as found with `drift=0` (no clock-rate episodes drawn
# beside its faults: the schedule that found it, event for event).
SEEDS = 200  # per store: 4-7 s each on an idle machine (`elect bench sim-lease` runs as many as asked)


@pytest.mark.parametrize("kind", LEASE_KINDS)
def test_a_seed_replays_the_same_history(kind: str) -> None:
    """In one process, and in fresh ones with string hashing fixed as `elect bench sim-lease` runs them."""
    assert chaos(kind, 7) == chaos(kind, 7)
    first, again = replay(kind, 7), replay(kind, 7)
    assert first == again
    assert first.lines > 20 and first.events > 1000  # it did something


@pytest.mark.parametrize("kind", LEASE_KINDS)
def test_seeds_of_chaos_break_no_promise(kind: str) -> None:
    """Kills, graceful stops, pauses, cuts between a member and the store, and store freezes, five per seed:
    never two leaders of a role, tokens only grow, every role led again within 3 TTLs of the heal."""
    result = chaos_runner.run(ChaosScenario(methods=(kind,), seeds=SEEDS), lambda *_: None, command="pytest")
    assert result.cells[0].seeds == SEEDS and result.cells[0].violating == []


def test_without_its_renewal_checks_a_zookeeper_member_cut_off_resumes_a_role_taken_meanwhile() -> None:
    """What `cas_lease.zookeeper`'s renewal checks are for, found by the simulator: a member cut from the store long
    enough for the others to take its roles, but not for its session to end, reconnects; its watch has not told it
    yet, its renewal succeeds, and it resumes a role under its old token beside the new holder. With the checks
    the renewal is refused and shows the node as it is now (seed 12 of the default shape, and 129 and 197 of the
    first two hundred; 570 before the simulator ran the real elector)."""
    assert replay("zookeeper", 12, drift=0).violations == ()
    broken = replay("zookeeper", 12, renewal_checks=False, drift=0).violations
    assert {v.kind for v in broken} >= {"overlap", "token"}


def test_the_soaks_finding_of_a_woken_zookeeper_leader_is_reproduced_against_the_design_before_it() -> None:
    """The soaks of 2026-11-23 (docs/results/soak/zookeeper) saw overlaps of 0-18 ms right after a frozen ZooKeeper
    leader woke: it expired live sessions on its stale tracker and committed that, and the role nodes, ephemeral
    then, went with them. Simulated against that design (the core trusting the store's expiry), seed 46 breaks the
    same way (and 83 and 94 of the first hundred; 179 did before the simulator ran the real elector); against today's
    (persistent role nodes, silence timed by the members) it does not."""
    assert replay("zookeeper", 46, drift=0).violations == ()
    outcome = replay("zookeeper", 46, trust_store_expiry=True, drift=0)
    woke = [f.mono for f in outcome.faults if f.kind == "infra-pause"]
    overlaps = [v for v in outcome.violations if v.kind == "overlap"]
    assert overlaps and all(v.at > woke[0] for v in overlaps)


@pytest.mark.parametrize("kind", LEASE_KINDS)
def test_a_killed_leaders_roles_move_after_the_ttl_as_on_the_real_store(kind: str) -> None:
    """The simulated failover after a kill is the core's rule (a holder silent for ttl is taken over, seen within a
    renewal interval), as measured on the real stores (docs/results/default-9a069ac: p50 0.94-0.97 s at ttl 1 s)."""
    moved, roles = kill_a_leader(kind)
    assert moved and len(moved) == roles
    for f in moved:
        assert f.latency is not None and 0.5 <= f.latency <= 1.0 + 0.25 + 0.05, (f.role, f.latency)


def test_a_woken_etcd_leader_that_revokes_live_leases_breaks_only_the_design_that_trusted_them() -> None:
    """The etcd soak of 2026-11-23 (16 overlaps right after a frozen etcd leader woke; etcd-io/etcd#15247): seed 12
    freezes the store's leader at 0.54 s for 1.56 s; another is elected and serves, and the woken one's lessor
    revokes every member's lease by the times it held when it froze. With role keys on the holder's lease and the
    store's expiry trusted (the design before the fix), contenders take the roles while their holders still lead
    (0.18 s); as `cas_lease.etcd` writes them now (role keys without a lease, a holder's silence timed by the
    contenders), nothing overlaps."""
    assert replay("etcd", 12, drift=0).violations == ()
    broken = replay("etcd", 12, trust_store_expiry=True, drift=0).violations
    assert broken and {v.kind for v in broken} == {"overlap"}


def test_elect_bench_runs_seeded_chaos_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "elect", "bench", "sim-lease", "--trials", "6", "--members", "4",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "seeds violating" in done.stdout
    data = json.loads((out / "results.json").read_text())
    assert [s["method"] for s in data["summary"]] == ["etcd", "zookeeper"]
    assert all(s["seeds"] == 6 and s["violating"] == 0 for s in data["summary"])
    assert data["scenario"]["shape"]["members"] == 4
    assert "| etcd | 6 | 42 | 0 | - |" in (out / "report.md").read_text()  # 5 faults and 2 drifts per seed


def test_seeds_run_over_processes_with_the_same_outcomes_as_one() -> None:
    def outcomes(workers: int) -> list[dict[str, object]]:
        result = chaos_runner.run(ChaosScenario(seeds=9, workers=workers), lambda *_: None, command="pytest")
        return [{k: v for k, v in c.summary().items() if k not in ("wall", "per_second")} for c in result.cells]

    assert outcomes(1) == outcomes(2)


def test_a_fault_kind_a_world_cannot_simulate_is_refused_before_the_run() -> None:
    """A kind without a move in the world's table is an error, never another fault in its place."""
    world = build("etcd", 1)
    move: seeded_chaos.Moves = {Kill: lambda victim, t, rng: lambda: None}
    with pytest.raises(ValueError, match="the etcd simulation has no move for slow, lossy"):
        seeded_chaos._nemesis(world, list(world.members), "etcd", 1, ChaosShape(), (Kill, Slow), move,
                              (1, (Lossy,), 2))
    assert world.now == 0.0


def test_bad_chaos_scenarios_are_refused() -> None:
    with pytest.raises(ConfigError, match="raft-zeebe"):
        ChaosScenario.from_mapping({"methods": ["raft-zeebe"]})
    with pytest.raises(ConfigError, match="seeds"):
        ChaosScenario.from_mapping({"seeds": 0})
    with pytest.raises(ConfigError, match="unknown chaos scenario keys: trials"):
        ChaosScenario.from_mapping({"trials": 3})


@pytest.mark.parametrize(("kind", "seed"), [("etcd", 1), ("zookeeper", 1)])
def test_clocks_further_apart_than_the_stated_bound_break_exclusivity(kind: str, seed: int) -> None:
    """What `max_drift` is for: the seed's two drifts within the bound the lease timings state (1/3) keep every
    promise; at 3 (rates up to 2 apart) a contender whose clock runs twice as fast times out the silence of a
    leader cut from the store (etcd: m2 from 5.52 s, m0 cut at 5.31 s) and takes its roles while it still leads."""
    assert chaos(kind, seed).violations == ()
    assert "overlap" in {v.kind for v in chaos(kind, seed, drift=3.0).violations}


def test_a_timer_set_on_a_members_clock_moves_when_its_rate_changes() -> None:
    """A member's timer is due when its own clock reads the time: set for 1 s on, then the clock halved at 0.5 s, it
    fires at 1.5 s of true time; what the member records is stamped in true time."""
    world = build("etcd", 0)
    m = world.members["m0"]
    fired: list[float] = []
    world.after(m, 1.0, lambda: fired.append(world.now))
    world.at(0.5, partial(world.set_rate, "m0", 0.5))
    world.run_until(3.0)
    assert fired == [pytest.approx(1.5)]
    assert world.local(m) == pytest.approx(0.5 + 2.5 * 0.5)
    assert all(r.at <= world.now for r in world.history)


def test_a_run_cut_short_goes_on_from_its_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run checkpoints as it goes; resumed from a checkpoint taken part-way, it runs only the seeds not done
    and ends with the same figures as a run straight through. A checkpoint of another scenario is refused."""
    scenario = ChaosScenario(methods=("etcd", "zookeeper"), seeds=4, workers=1)
    monkeypatch.setattr(chaos_runner, "CHECKPOINT_EVERY", 0.0)
    checkpoints: list[dict[str, object]] = []
    whole = chaos_runner.run(scenario, lambda *_: None, "pytest", checkpoint=lambda r: checkpoints.append(r.to_json()))
    part = next(c for c in checkpoints if c["cells"][0]["seeds"] == 4 and c["cells"][1]["seeds"] == 0)  # type: ignore[index]
    ran: list[int] = []
    resumed = chaos_runner.run(scenario, lambda cell, done, total, status: ran.append(done), "pytest", resume=part)

    def figures(result: chaos_runner.ChaosResult) -> list[dict[str, object]]:
        return [{k: v for k, v in c.summary().items() if k not in ("wall", "per_second")} for c in result.cells]

    assert figures(resumed) == figures(whole)
    assert ran[0] > 4 and ran[-1] == 8  # only the second cell's seeds ran
    assert resumed.made.command.startswith("pytest (resumed")
    with pytest.raises(ConfigError, match="seeds"):
        chaos_runner.run(ChaosScenario(methods=("etcd", "zookeeper"), seeds=5), lambda *_: None, resume=part)
