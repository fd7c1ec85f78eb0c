"""A simulated `raft://` node's elector: what `RaftElector` does between its election core and the application's
leaderships, on virtual time. The policy itself is the member's code (`raft_priority.renewals.Renewals`: renewals
from a group's lease, quiet partitions on one shared deadline, lapses handed on, lapsed roles of a still-led group
resumed); around it, what the elector's driver-thread callbacks do (`RaftElector._on_ready`, `_on_idle`, `_lapsed`,
`_begin_stop`), with the leaderships kept by `elect.leaderships` as every elector keeps them, fenced at their
deadlines.

What is left out: the application's callbacks take no time (a Revoked hand-over goes on at once, where a member
waits for them, bounded by `revoke_timeout`), and roles do not change while a node runs. A role is its partition's
number: one role per partition, contended for by every replica unless the simulation's `interest` says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from elect.core import Acquire, ExtendShared, Fence, Ready, Revoke
from elect.leaderships import Leaderships, SharedDeadline
from elect.roles import Role
from elect_bench.simulation.recorded import Recorded, Recorder
from raft_priority.core import RaftState
from raft_priority.host import NodeHost
from raft_priority.messages import HardState, Message
from raft_priority.renewals import Renewals


class SimElector:
    """The elector of simulated node `name` around its `host`, recording into `history`; `clock()` is the world's
    node's virtual time (its own clock's); `roles_on(p)`: the roles the node contends for on partition `p`; `resume`:
    see `Renewals`; `on_true_time`: see `Recorder`."""

    def __init__(self, name: str, host: NodeHost, history: list[Recorded], clock: Callable[[], float],
                 roles_on: Callable[[int], list[Role]], *, resume: bool = True,
                 on_true_time: Callable[[Recorded], Recorded] | None = None) -> None:
        self.host = host
        self.keeper = Leaderships(Recorder(name, history, on_true_time))
        self.clock = clock
        self.renewals: Renewals[SharedDeadline] = Renewals(name, host, self, roles_on, resume=resume)
        self.stopping = False

    # ---------------------------------------------------------------- Keeping, for Renewals

    def acquire(self, role: Role, token: int, deadline: float | None) -> None:
        self.keeper.acquire(role, token, deadline, self.clock())

    def extend(self, role: Role, deadline: float) -> bool:
        return self.keeper.extend(role, deadline, self.clock())

    def shared(self, name: str, until: float) -> SharedDeadline:
        return SharedDeadline(name, until)

    def share(self, role: Role, shared: SharedDeadline) -> bool:
        return self.keeper.share(role, shared, self.clock())

    def renew_shared(self, shared: SharedDeadline, until: float) -> bool:
        return self.keeper.renew_shared(shared, until, self.clock())

    def renewed(self, seconds: float) -> None:
        pass  # no metrics in simulation

    def holds(self, role: Role) -> bool:
        return role in self.keeper.leading(self.clock())

    # ---------------------------------------------------------------- the elector's driver-thread callbacks

    def apply(self, ready: Ready[Message, HardState], now: float) -> None:
        """The core's changes onto every role of their partition (`RaftElector._on_ready`)."""
        renewals = self.renewals
        for c in ready.changes:
            if isinstance(c, ExtendShared):
                continue
            p = cast(int, c.role)
            roles = renewals.roles_on(p)
            if isinstance(c, Acquire):
                if self.stopping or p in self.host.interest.giving_up:
                    self.give_up(p, now)
                    continue
                for role in roles:
                    renewals.take(role, p, c.token, c.deadline)
            elif isinstance(c, Revoke):
                for role in roles:
                    renewals.forget(role)
                    self.keeper.revoke(role, now, c.reason)
            elif isinstance(c, Fence):
                for role in roles:
                    renewals.forget(role)
                    self.keeper.fence(role, c.until, now, c.reason)
        if ready.changes:
            self.host.recount(now)

    def idle(self, now: float) -> float:
        """After each turn (`RaftElector._on_idle`, with the deadline timer's fences and `_lapsed` first): when the
        node next wants a turn for its leaderships."""
        for role in self.keeper.expire(now):
            p = cast(int, role)
            if self.renewals.lapsed(role, p, now):
                self.give_up(p, now)
        return min(self.renewals.tick(now), self.keeper.next_deadline())

    def due(self) -> float:
        return min(self.renewals.next_sweep, self.keeper.next_deadline())

    def give_up(self, p: int, now: float) -> None:
        """Hand partition `p` on (`RaftElector._give_up` with its callbacks returned at once): Revoked, then a
        transfer to the best live successor, else a resignation."""
        for role in self.renewals.roles_on(p):
            self.renewals.forget(role)
            self.keeper.revoke(role, now, "handover")
        self.host.hand_on(p, now)

    def begin_stop(self, now: float) -> None:
        """A graceful stop's first half (`RaftElector._begin_stop`): every partition it leads handed on."""
        self.stopping = self.renewals.stopping = True
        for p, g in self.host.groups.items():
            if g.state is RaftState.LEADER:
                self.give_up(p, now)

    def handed_over(self) -> bool:
        return all(g.state is not RaftState.LEADER for g in self.host.groups.values())

    def crashed(self, now: float) -> None:
        """The process died: every leadership ends now (or at its deadline, if that came first)."""
        self.keeper.fence_all(now, "crashed")
