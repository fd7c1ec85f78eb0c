"""A simulated `raft://` node: the real `RaftElector` (its host, renewals, handovers and leaderships as a member runs
them), its I/O simulated by the Raft world (`elect_bench.simulation.raft_world`).

What is simulated: the disk (term and vote in the world's dict for the node, kept across restarts), the links
(batches to peers through the world's network, from the elector's own `Outbox`), the clock, deadline timer and event
delivery (`elect_bench.simulation.runtime`), and the driver's thread (the world turns the elector's driver). The
first configuration is the one the node's URL gives (its peers), or, for a node that joins, none (a learner until
the cluster adds it), as a member asking its peers would start. The application's callbacks take no time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from elect.roles import Role
from elect_bench.simulation.runtime import SimRuntime, SimTimer, World
from raft_priority.elector import RaftElector
from raft_priority.messages import Conf, HardState, Message
from raft_priority.options import RaftOptions


class SimDisk:
    """A node's `StateStore` in the simulator: the world's dict for it, which a restart finds as it was left."""

    __slots__ = ("states",)

    def __init__(self, states: dict[int, HardState]) -> None:
        self.states = states

    def load_all(self) -> dict[int, HardState]:
        return dict(self.states)

    def save(self, states: Mapping[int, HardState]) -> None:
        self.states.update(states)

    def close(self) -> None:
        pass

    def __str__(self) -> str:
        return "the simulated disk"


class SimRaftElector(RaftElector):
    """The real elector of node `node` of `world` (see the module). `first`: whether the node is one of the cluster's
    first members (else it joins); `addresses`: every first member's address, from the URLs."""

    def __init__(self, world: World, node: Any, options: RaftOptions, roles: tuple[Role, ...],
                 rng: random.Random, *, first: bool, addresses: Mapping[str, str], disk: dict[int, HardState],
                 send: Callable[[Mapping[str, list[Message]]], None], wake: Callable[[], None],
                 resume: bool = True) -> None:
        self.resume = resume
        super().__init__(options, node.name, roles, runtime=SimRuntime(world, node), rng=rng)
        self._first = first
        self._addresses = dict(addresses)
        self._disk = SimDisk(disk)
        self._sim_send = send
        self._sim_wake = wake

    def _on_start(self) -> None:
        first = self._first_members(self._addresses) if self._first else Conf(voters={}, learners=(self.member,))
        self._begin(self._disk, self._disk.load_all(), first, self._addresses)

    def _wake_loop(self) -> Callable[[], None]:
        return self._sim_wake

    def _send(self, batches: Mapping[str, list[Message]]) -> None:
        self._sim_send(batches)

    def due(self) -> float:
        """When the node next wants a turn for its leaderships' renewals (its deadlines are on its timer)."""
        return self._renewing().next_sweep

    def clock_changed(self) -> None:
        """The node's clock runs at another rate from now: its deadline timer is armed again on it."""
        timer = self._deadlines
        if isinstance(timer, SimTimer):
            timer.rearm()
