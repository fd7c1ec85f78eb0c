"""The fault registry: each kind's name, what the measures may expect of it, and how it reaches a member or
the infrastructure (through recording stand-ins for the placement and the infrastructure); and a real trial
of the restart fault on Raft members."""

from __future__ import annotations

from pathlib import Path

import pytest

from elect.errors import ConfigError
from elect_bench.faults import FAULTS, InfraFault, MemberFault, fault, kills_process
from elect_bench.infrastructure import Victim
from elect_bench.judging.history import FaultRecord as Record
from elect_bench.judging.history import History
from elect_bench.methods import METHODS, Group
from elect_bench.placement import LocalPlacement
from elect_bench.trial import Environment, TrialSpec, member_process, run_trial
from elect_cluster.waiting import wait_until


class Recorder:
    """A placement and an infrastructure that record what they were asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, action: str) -> object:
        def record(target: object, *_: object, **__: object) -> Victim:
            self.calls.append((action, getattr(target, "member_id", getattr(target, "label", str(target)))))
            return Victim("etcd", 0)
        return record


class Member:
    member_id = "m1"


def test_every_kind_is_registered_by_name() -> None:
    assert list(FAULTS) == ["drift", "infra", "infra-pause", "kill", "stop", "pause", "cut", "cut-in", "cut-out",
                            "lossy", "slow", "restart", "none", "rolling-restart", "rolling-kill", "rolling-replace",
                            "scale-out", "scale-in"]
    assert all(fault(name).name == name for name in FAULTS)
    assert fault("kill") == fault("kill") and fault("kill") != fault("stop") and str(fault("cut")) == "cut"
    with pytest.raises(ConfigError, match="unknown fault 'crash'; known: drift, infra, infra-pause, kill"):
        fault("crash")


@pytest.mark.parametrize(("name", "calls", "healed"), [
    ("kill", [("kill", "m1")], []),
    ("stop", [("stop", "m1")], []),
    ("pause", [("pause", "m1")], [("resume", "m1")]),
    ("cut", [("cut", "m1")], [("heal", "m1")]),
    ("cut-in", [("block", "m1")], [("heal", "m1")]),
    ("cut-out", [("block", "m1")], [("heal", "m1")]),
    ("lossy", [("lossy", "m1")], [("heal", "m1")]),
    ("slow", [("slow", "m1")], [("heal", "m1")]),
    ("restart", [("kill", "m1")], [("restart", "m1")]),
])
def test_member_faults_reach_the_victim_through_the_placement(name: str, calls: list[tuple[str, str]],
                                                              healed: list[tuple[str, str]]) -> None:
    chosen = fault(name)
    assert isinstance(chosen, MemberFault)
    placement, victim = Recorder(), Member()
    chosen.inject(placement, victim)  # type: ignore[arg-type]
    assert placement.calls == calls
    chosen.heal(placement, victim)  # type: ignore[arg-type]
    assert placement.calls == calls + healed
    assert (chosen.healed_as is not None) == bool(healed)  # a healed fault writes a record of its end


@pytest.mark.parametrize(("name", "calls"), [
    ("infra", [("kill", "etcd"), ("restart", "etcd[0]")]),
    ("infra-pause", [("pause", "etcd"), ("resume", "etcd[0]")]),
])
def test_infrastructure_faults_reach_the_service(name: str, calls: list[tuple[str, str]]) -> None:
    chosen = fault(name)
    assert isinstance(chosen, InfraFault) and chosen.infrastructure and chosen.healed_as
    infra = Recorder()
    victim = chosen.inject(infra, "etcd")  # type: ignore[arg-type]
    chosen.heal(infra, victim, timeout=1.0)  # type: ignore[arg-type]
    assert infra.calls == calls


def test_what_the_measures_may_expect_of_each_kind() -> None:
    expect = {name: (f.kills_process, f.removes_victim, f.infrastructure, f.needs_hosts, f.injects, f.fails_over)
              for name, f in FAULTS.items()}
    assert expect == {
        "kill": (True, True, False, False, True, True),
        "stop": (False, True, False, False, True, True),
        "pause": (False, False, False, False, True, True),
        "cut": (False, False, False, True, True, True),
        "cut-in": (False, False, False, True, True, True),
        "cut-out": (False, False, False, True, True, True),
        "lossy": (False, False, False, True, True, False),  # a bad link, not a dead one: roles may stay
        "slow": (False, False, False, True, True, False),
        "restart": (True, False, False, False, True, True),
        "infra": (False, False, True, False, True, True),
        "infra-pause": (False, False, True, False, True, True),
        "none": (False, False, False, False, False, True),
        "drift": (False, False, False, False, True, False),  # a clock at 0.95 moves nothing: measured as disruption
        # a rollout kills (rolling-kill) step by step, and waits after each for what that step needs
        **dict.fromkeys(("rolling-restart", "rolling-kill", "rolling-replace", "scale-out", "scale-in"),
                        (False, False, False, False, True, False)),
    }


def test_records_are_answered_by_the_registry() -> None:
    assert kills_process(Record(1.0, "kill", "a").kind) and kills_process("restart")
    assert not any(kills_process(kind) for kind in ("stop", "pause", "resume", "heal", "restarted"))
    # belief of a killed member ends at the kill; a paused one's does not
    lines = [{"mono": 0.0, "member": m, "role": "r", "event": "acquired", "token": 1} for m in ("a", "b")]
    history = History(lines, [Record(2.0, "kill", "a"), Record(3.0, "pause", "b")], end=5.0)
    assert {i.member: (i.end, i.ended_by) for i in history.intervals()["r"]} == {"a": (2.0, "killed"),
                                                                              "b": (5.0, "open")}


def test_a_record_says_alone_whether_it_is_a_fault_or_a_healing() -> None:
    healings = {f.healed_as for f in FAULTS.values() if f.healed_as is not None}
    assert healings == {"resume", "heal", "restarted", "clock-restored"} and not healings & set(FAULTS)


class Ghost:
    member_id = "m9"


def test_network_faults_and_restarts_say_where_they_cannot_be_done() -> None:
    local = LocalPlacement()
    for name in ("cut-in", "cut-out", "lossy", "slow"):
        chosen = fault(name)
        assert isinstance(chosen, MemberFault)
        with pytest.raises(RuntimeError, match="network-namespace hosts"):
            chosen.inject(local, Ghost())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="m9 cannot be started again"):
        local.restart(Ghost())  # type: ignore[arg-type]


def test_a_restarted_raft_member_leads_again_in_its_second_life(tmp_path: Path) -> None:
    spec = TrialSpec(METHODS["raft"], fault("restart"), budget=1.0, members=3, roles=6, hold=2.0)
    result = run_trial(spec, Environment(None, tmp_path), 0, "restart")
    assert result.ok, result.error
    kill, back = result.history["faults"]
    assert (kill["kind"], back["kind"]) == ("restart", "restarted") and kill["target"] == back["target"]
    victim = kill["target"]
    first = [line for line in result.history["lines"] if line["member"] == victim and line["mono"] < kill["mono"]]
    second = [line for line in result.history["lines"] if line["member"] == victim and line["mono"] > back["mono"]]
    assert any(line["event"] == "acquired" for line in first)
    assert any(line["event"] == "acquired" for line in second), "the restarted member never led again"
    assert result.failover and result.unrecovered == 0  # the survivors took its roles while it was away
    assert result.violations == []
    assert (tmp_path / "restart" / f"member-{victim}.log").read_text().count("started again") == 1


def test_a_restarted_members_first_life_ends_at_the_kill_and_its_second_is_new() -> None:
    def line(mono: float, member: str, event: str, token: int) -> dict[str, object]:
        return {"mono": mono, "member": member, "role": "r", "event": event, "token": token, "until": mono}

    lines = [line(0.0, "a", "acquired", 1), line(3.0, "b", "acquired", 2), line(6.0, "b", "revoked", 2),
             line(7.0, "a", "acquired", 3), line(9.0, "a", "revoked", 3)]
    history = History(lines, [Record(2.0, "restart", "a"), Record(5.0, "restarted", "a")], end=10.0)
    assert [(i.member, i.start, i.end, i.ended_by) for i in history.intervals()["r"]] == [
        ("a", 0.0, 2.0, "killed"), ("b", 3.0, 6.0, "revoked"), ("a", 7.0, 9.0, "revoked")]


def test_infrastructure_faults_on_kubernetes_strike_the_api_server_and_its_etcd_in_turn() -> None:
    """kubernetes:// depends on kube-apiserver and on the etcd beneath it: its infrastructure faults take them in
    turn, trial by trial (a soak: round by round); a method on one service always strikes that one."""
    for name in ("kubernetes", "client-go", "k8s-python"):
        assert [METHODS[name].strikes(turn) for turn in range(4)] == ["kubernetes", "etcd"] * 2
    assert {METHODS["etcd"].strikes(turn) for turn in range(3)} == {"etcd"}
    assert METHODS["kafka-fast"].strikes(1) == "kafka"


def test_a_killed_members_temporary_files_stay_under_the_runs_work_directory(tmp_path: Path) -> None:
    """A PySyncObj member without a data_dir keeps its journals in a temporary directory, which SIGKILL leaves
    behind: the harness gives each local member a TMPDIR under the run's work directory, removed with it."""
    method = METHODS["pysyncobj"]
    group = Group(["m0"], 1, "tmp-test")
    url = method.member_urls(group, 1.0, {})["m0"]
    proc = member_process(method, 1, Environment(None, tmp_path), "tmp-test", url, "m0", [])
    try:
        proc.start()
        wait_until(proc.started, 60, what="the PySyncObj member to start")
        journals = list((tmp_path / "tmp-test" / "tmp").glob("elect-pysyncobj-m0-*"))
        assert journals, sorted(p.name for p in tmp_path.rglob("*"))
        proc.kill()
        assert journals[0].exists()  # left behind by SIGKILL, where the run's work directory takes it away
    finally:
        proc.kill()
