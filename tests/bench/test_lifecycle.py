"""Lifecycle faults (elect_bench.faults.lifecycle, elect_bench.rollout): each kind's plan, the measures read from a
history, the scenario's refusals, and rollouts carried out on real members against a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from elect.errors import ConfigError
from elect_bench import faults, scenario, suite
from elect_bench.faults.lifecycle import Fresh, LifecycleFault, Step
from elect_bench.judging.history import FaultRecord, History
from elect_bench.rollout import Rollout, join_url, measure, raft_address


def plan(name: str, ids: list[str], members: int = 3) -> list[tuple[str, str]]:
    fault = faults.fault(name)
    assert isinstance(fault, LifecycleFault)
    return [(s.action, s.member) for s in fault.plan(ids, members, Fresh(ids))]


def test_each_kind_goes_through_the_group_one_member_at_a_time() -> None:
    ids = ["m0", "m1", "m2"]
    assert plan("rolling-restart", ids) == [("stop", "m0"), ("start", "m0"), ("stop", "m1"), ("start", "m1"),
                                            ("stop", "m2"), ("start", "m2")]
    assert plan("rolling-kill", ids)[:2] == [("kill", "m0"), ("start", "m0")]
    # a replacement starts first (the group never runs short), with an id never used before
    assert plan("rolling-replace", ids) == [("join", "n0"), ("leave", "m0"), ("join", "n1"), ("leave", "m1"),
                                            ("join", "n2"), ("leave", "m2")]
    assert plan("scale-out", ids) == [("join", "n0"), ("join", "n1"), ("join", "n2")]
    assert plan("scale-in", [*ids, "n0", "n1", "n2"]) == [("leave", "n2"), ("leave", "n1"), ("leave", "n0")]


def test_a_group_of_another_size_is_first_brought_to_where_the_rollout_starts() -> None:
    scale_in, scale_out = faults.fault("scale-in"), faults.fault("scale-out")
    assert isinstance(scale_in, LifecycleFault) and isinstance(scale_out, LifecycleFault)
    assert scale_in.members_at_start(3) == 6 and scale_out.members_at_start(3) == 3
    ids = ["m0", "m1", "m2"]
    assert [s.action for s in scale_in.prepare(ids, 3, Fresh(ids))] == ["join"] * 3
    grown = [*ids, "n0", "n1", "n2"]
    assert [(s.action, s.member) for s in scale_out.prepare(grown, 3, Fresh(grown))] == [
        ("leave", "n2"), ("leave", "n1"), ("leave", "n0")]
    assert scale_out.prepare(ids, 3, Fresh(ids)) == []


def test_steps_say_what_they_do_to_the_member() -> None:
    assert Step("kill", "m0").away and Step("kill", "m0").kills and not Step("stop", "m0").kills
    assert Step("leave", "m0").away and not Step("leave", "m0").arrives
    assert Step("join", "n0").arrives and Step("start", "m0").arrives
    assert faults.kills_process("step-kill") and not faults.kills_process("step-stop")
    assert Fresh(["n0", "n2"])() == "n1"


def test_a_new_raft_member_joins_through_the_running_ones() -> None:
    base = "raft://m0@127.0.0.1:7000?peers=m0@127.0.0.1:7000,m1@127.0.0.1:7001&budget=1&data_dir=/s/m0"
    url = join_url(base, "n0", "127.0.0.1:7100", {"m1": "127.0.0.1:7001", "m0": "127.0.0.1:7000"}, Path("/s/n0"))
    assert url == "raft://n0@127.0.0.1:7100?join=m0@127.0.0.1:7000,m1@127.0.0.1:7001&budget=1&data_dir=/s/n0"
    assert raft_address(url) == "127.0.0.1:7100"


def _acquired(member: str, role: str, at: float, token: int) -> dict[str, object]:
    return {"mono": at, "member": member, "role": role, "event": "acquired", "token": token}


def _revoked(member: str, role: str, at: float, token: int) -> dict[str, object]:
    return {"mono": at, "member": member, "role": role, "event": "revoked", "token": token}


def test_a_rollout_is_measured_from_the_history() -> None:
    # two members, two roles; m0 (leading r0) is stopped at 10: r0 is leaderless 0.05 s, moves to m1 and back at 12
    # (0.02 s leaderless); r1 stays with m1 throughout
    lines = [_acquired("m0", "r0", 1.0, 1), _acquired("m1", "r1", 1.0, 2),
             _revoked("m0", "r0", 10.0, 1), _acquired("m1", "r0", 10.05, 3),
             _revoked("m1", "r0", 12.0, 3), _acquired("m0", "r0", 12.02, 4)]
    history = History(lines, [FaultRecord(10.0, "rolling-restart", "m0,m1"), FaultRecord(10.0, "step-stop", "m0"),
                              FaultRecord(11.0, "step-start", "m0"), FaultRecord(12.5, "rolled", "m0,m1")],
                      end=15.0)
    done = Rollout(began=10.0, ended=12.5, last_step=11.0, needed=2, steps=2)
    got = measure(history, done, ["r0", "r1"], 2, sent=250)
    assert (got.leaderless_max, got.leaderless_sum) == (0.05, 0.07)
    assert (got.moves, got.moves_needed, got.moves_max_role) == (2, 2, 2)
    assert got.balanced and got.to_balance == pytest.approx(1.02)
    assert got.seconds == 2.5 and got.store_rps == 100.0 and got.unsettled == 0


def test_a_rollout_that_ends_unbalanced_says_so() -> None:
    lines = [_acquired("m0", "r0", 1.0, 1), _acquired("m1", "r1", 1.0, 2),
             _revoked("m0", "r0", 10.0, 1), _acquired("m1", "r0", 10.05, 3)]  # m0 never gets r0 back
    history = History(lines, [FaultRecord(10.0, "step-stop", "m0")], end=15.0)
    got = measure(history, Rollout(began=10.0, ended=12.0, last_step=11.0, steps=2), ["r0", "r1"], 2)
    assert not got.balanced and got.to_balance is None and got.store_rps is None


def test_new_member_faults_are_refused_where_peers_are_fixed_at_start() -> None:
    with pytest.raises(ConfigError, match="rolling-replace start members of new ids"):
        scenario.load({"methods": ["jraft"], "faults": ["rolling-replace"]})
    assert scenario.load({"methods": ["jraft"], "faults": ["rolling-restart"]}).faults  # their own ids: fine
    with pytest.raises(ConfigError, match="not on network-namespace hosts"):
        scenario.load({"methods": ["etcd"], "faults": ["scale-out"], "hosts": True})


@pytest.mark.infra
@pytest.mark.parametrize(("method", "kind"), [("etcd", "rolling-restart"), ("raft", "scale-in")])
def test_a_rollout_on_real_members_keeps_every_role_led(tmp_path: Path, method: str, kind: str) -> None:
    chosen = scenario.load({"name": "lifecycle-smoke", "methods": [method], "faults": [kind], "trials": 1,
                            "members": 3, "roles": 6, "budget": 1.0, "hold": 1.0})
    result = suite.run(chosen, tmp_path / "work", lambda *_: None, command="pytest")
    trial = result.cells[0].trials[0]
    assert trial.ok, trial.error
    assert trial.violations == [], trial.violations
    rolled = trial.rollout
    steps = 6 if kind == "rolling-restart" else 3  # scale-in: 6 members to 3, each drained (raft: `leave`)
    assert rolled["steps"] == steps and rolled["unsettled"] == 0, rolled
    assert rolled["balanced"], rolled
    # graceful steps: no role waits out a lease (a kill would cost about one budget)
    assert rolled["leaderless_max"] < 0.5, rolled
    assert rolled["moves"] >= rolled["moves_needed"] > 0, rolled
    kinds = [f["kind"] for f in trial.history["faults"]]
    assert kinds[0] == kind and kinds[-1] == "rolled" and len(kinds) == steps + 2, kinds
