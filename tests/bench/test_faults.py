"""The fault registry: each kind's name, what the measures may expect of it, and how it reaches a member or
the infrastructure (through recording stand-ins for the placement and the infrastructure)."""

from __future__ import annotations

import pytest

from elect.errors import ConfigError
from elect_bench.faults import FAULTS, InfraFault, MemberFault, fault, kills_process
from elect_bench.history import FaultRecord as Record
from elect_bench.history import History
from elect_bench.infrastructure import Victim


class Recorder:
    """A placement and an infrastructure that record what they were asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, action: str) -> object:
        def record(target: object, **_: object) -> Victim:
            self.calls.append((action, getattr(target, "member_id", getattr(target, "label", str(target)))))
            return Victim("etcd", 0)
        return record


class Member:
    member_id = "m1"


def test_every_kind_is_registered_by_name() -> None:
    assert list(FAULTS) == ["infra", "infra-pause", "kill", "stop", "pause", "cut", "none"]
    assert all(fault(name).name == name for name in FAULTS)
    assert fault("kill") == fault("kill") and fault("kill") != fault("stop") and str(fault("cut")) == "cut"
    with pytest.raises(ConfigError, match="unknown fault 'crash'; known: infra, infra-pause, kill"):
        fault("crash")


@pytest.mark.parametrize(("name", "calls", "healed"), [
    ("kill", [("kill", "m1")], []),
    ("stop", [("stop", "m1")], []),
    ("pause", [("pause", "m1")], [("resume", "m1")]),
    ("cut", [("cut", "m1")], [("heal", "m1")]),
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
    expect = {name: (f.kills_process, f.removes_victim, f.infrastructure, f.needs_hosts, f.injects)
              for name, f in FAULTS.items()}
    assert expect == {
        "kill": (True, True, False, False, True),
        "stop": (False, True, False, False, True),
        "pause": (False, False, False, False, True),
        "cut": (False, False, False, True, True),
        "infra": (False, False, True, False, True),
        "infra-pause": (False, False, True, False, True),
        "none": (False, False, False, False, False),
    }


def test_records_are_answered_by_the_registry() -> None:
    assert kills_process(Record(1.0, "kill", "a"))
    assert not any(kills_process(Record(1.0, kind, "a")) for kind in ("stop", "pause", "resume", "heal", "restart"))
    # belief of a killed member ends at the kill; a paused one's does not
    lines = [{"mono": 0.0, "member": m, "role": "r", "event": "acquired", "token": 1} for m in ("a", "b")]
    history = History(lines, [Record(2.0, "kill", "a"), Record(3.0, "pause", "b")], end=5.0)
    assert {i.member: (i.end, i.ended_by) for i in history.intervals()["r"]} == {"a": (2.0, "killed"),
                                                                              "b": (5.0, "open")}
