"""Membership changes as faults: a node added, one removed, one replaced, while the others run (raft://, the one
method whose members are configured). The simulator's nemesis (`elect_bench.simulation.seeded_chaos`, kind
`raft-members`) strikes them beside kills, cuts, pauses and drifting clocks. They are not in the registry of
`elect bench --faults`: a trial's placement cannot start new members or ask a cluster to change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elect_bench.faults.base import MemberFault

if TYPE_CHECKING:
    from elect_bench.placement import Placement, Signalled


class MembershipFault(MemberFault):
    """Carried out by whoever runs the members (they must start new ones and ask the cluster); not by a signal."""

    fails_over = False  # a graceful change: the roles may well stay where they are
    gradual = True

    def inject(self, placement: Placement, victim: Signalled) -> None:
        raise NotImplementedError(f"{self.name} is carried out by the soak or the simulator, not by a placement")


class Add(MembershipFault, register=False):
    """A new node starts with join= and is made a voter."""

    name = "add"


class Remove(MembershipFault, register=False):
    """A voter leaves: drained, then removed from the configuration (`elect member --leave`)."""

    name = "remove"
    removes_victim = True


class Replace(MembershipFault, register=False):
    """A new node joins, then an old one leaves."""

    name = "replace"
    removes_victim = True
