"""How a `raft://` node's leaderships follow its groups' leases: the policy between the election core and the
deadlines the application's leaderships keep. Pure (no clock, thread or I/O): the elector runs it on its driver
thread with `BaseElector`'s leaderships, in a member and in the simulator (which runs the elector itself on virtual
time), so what decides when a role's deadline moves, lapses and comes back is simulated as it runs.

- A partition led aloud renews its roles from its group's lease (`RaftGroup.lease_until`), a quantum at a time.
- A quiet partition's lease rests on the node links (`RaftGroup.shared_lease`), as does every other quiet partition's
  with the same peers: its roles follow that quorum's one shared deadline, renewed once for all of them, so at rest a
  sweep costs the same for ten partitions as for ten thousand. When the group wakes or steps down (`Links.woke`) its
  roles go back to deadlines of their own, keeping the shared one they had.
- A role whose deadline passed while its group's core still leads is handed on (the application was told Fenced);
  one whose group's lease had run out as well is resumed under the same term once the lease holds again (`_resume`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from elect.roles import Role
from raft_priority.core import RaftState
from raft_priority.host import NodeHost

INF = math.inf


class Shared(Protocol):
    """One deadline many leaderships follow (`elect.deadlines.SharedDeadline` in a member)."""

    until: float


S = TypeVar("S", bound=Shared)


class Keeping(Protocol[S]):
    """Where the leaderships are kept and fenced at their deadlines: the elector's (`BaseElector._acquire`,
    `_extend`, `_share`, `_renew_shared`, `_renewed`; in tests, anything that keeps them so)."""

    def acquire(self, role: Role, token: int, deadline: float | None) -> None: ...

    def extend(self, role: Role, deadline: float) -> bool:
        """Move a leadership in force on to `deadline`; False (and fenced) if it had lapsed."""
        ...

    def shared(self, name: str, until: float) -> S: ...

    def share(self, role: Role, shared: S) -> bool:
        """Let `role` follow `shared`; False if it is not in force or `shared` ends before its own deadline."""
        ...

    def renew_shared(self, shared: S, until: float) -> bool:
        """Move `shared` on; False if it had passed already (its leaderships lapsed)."""
        ...

    def renewed(self, seconds: float) -> None:
        """One renewal rested on evidence `seconds` old (the metrics' renewal age)."""
        ...

    def holds(self, role: Role) -> bool: ...


@dataclass
class _Quiet(Generic[S]):
    """The leaderships of the quiet partitions whose leases rest on one node-link quorum."""

    key: tuple[tuple[str, ...], int]
    deadline: S
    roles: dict[Role, int] = field(default_factory=dict)  # role -> its partition


class Renewals(Generic[S]):
    """The leaderships node `member` renews from its groups' leases (see the module). `roles_on(p)`: the roles the
    node contends for on partition `p`.
    `resume=False` leaves lapsed roles of a group the node still leads unled (the design before 50d4eea, which a soak
    found leaving roles leaderless for minutes), to show what `_resume` prevents."""

    def __init__(self, member: str, host: NodeHost, keeping: Keeping[S], roles_on: Callable[[int], list[Role]], *,
                 resume: bool = True) -> None:
        self.member = member
        self.host = host
        self.keeping = keeping
        self.roles_on = roles_on
        config = host.config
        self.quantum = config.lease_window / 4
        """Deadlines move in steps of a quarter lease: a leader's lease end trails "now + lease" by up to a heartbeat
        period plus the ack delay; the deadline trails the lease by at most a step."""
        self.every = min(config.heartbeat_interval / 2, config.lease_window / 16)
        """How often `tick` sweeps."""
        self.next_sweep = 0.0
        self.stopping = False
        """Set once the node hands everything over: nothing is resumed from then on."""
        self.leased: dict[Role, tuple[int, float]] = {}  # leaderships on a deadline of their own: (partition, lease)
        self._quiet: dict[tuple[tuple[str, ...], int], _Quiet[S]] = {}
        self._quiet_of: dict[Role, _Quiet[S]] = {}  # leaderships following a quiet quorum's shared deadline
        self._quiet_on: dict[int, set[Role]] = {}  # ... by partition
        self._lapsed_leading: set[int] = set()  # see `_resume`
        self._resumes = resume

    def take(self, role: Role, p: int, term: int, lease: float) -> None:
        """The node leads `role` (on partition `p`) under `term` until the group's `lease`."""
        self.forget(role)
        self.keeping.acquire(role, term, None if lease == INF else lease)
        self.leased[role] = (p, lease)

    def forget(self, role: Role) -> None:
        """Stop renewing the leadership of `role` (it ended, is handed over, or starts again)."""
        self.leased.pop(role, None)
        quiet = self._quiet_of.pop(role, None)
        if quiet is not None:
            p = quiet.roles.pop(role)
            on = self._quiet_on[p]
            on.discard(role)
            if not on:
                del self._quiet_on[p]

    def shared_by(self) -> dict[Role, S]:
        """The leaderships following a quiet quorum's shared deadline, each with that deadline."""
        return {role: quiet.deadline for role, quiet in self._quiet_of.items()}

    def tick(self, now: float) -> float:
        """Sweep if one is due; when the next one is."""
        if now >= self.next_sweep:
            self.next_sweep = now + self.every
            self.sweep(now)
        return self.next_sweep

    def sweep(self, now: float) -> None:
        """Renew every leadership from its lease (see the module)."""
        host, keeping, quantum = self.host, self.keeping, self.quantum
        groups = host.groups
        woke = host.links.woke
        while woke:
            self._wake(woke.pop())
        if self._lapsed_leading:
            self._resume(now)
        for quiet in self._quiet.values():
            if quiet.roles:
                self._renew_quiet(quiet, now)
        renewed: set[int] = set()
        leases: dict[int, float] = {}  # per partition, computed once per sweep
        for role, (p, given) in list(self.leased.items()):
            group = groups[p]
            key = group.shared_lease()
            if key is not None and self._join_quiet(role, p, key, given):
                continue
            lease = leases.get(p)
            if lease is None:
                lease = leases[p] = group.lease_until
            if lease >= given + quantum and lease != INF:
                if keeping.extend(role, lease):
                    self.leased[role] = (p, lease)
                    if p not in renewed:  # once per partition, however many roles it carries
                        renewed.add(p)
                        keeping.renewed(now - group.quorum_ack)
                else:
                    self.leased.pop(role, None)

    def lapsed(self, role: Role, p: int, now: float) -> bool:
        """The leadership of `role` (on partition `p`) passed its deadline on this node's clock (and was fenced):
        True if the node should hand the partition on, its core leading it still (the application was told Fenced;
        another node may lead under a newer term). A group whose lease had run out as well is resumed once it holds
        again (`_resume`)."""
        self.forget(role)
        g = self.host.groups.get(p)
        if g is None:
            return False
        if g.is_leader(now) and p not in self.host.interest.giving_up:
            return True
        if g.state is RaftState.LEADER and g.serving and self._resumes:
            self._lapsed_leading.add(p)
        return False

    def _quorum_lease(self, key: tuple[tuple[str, ...], int]) -> tuple[float, float]:
        """(the quorum's newest agreeing node ack, the lease it proves)."""
        acked = self.host.links.quorum(*key)
        return acked, acked + self.host.config.leader_lease

    def _join_quiet(self, role: Role, p: int, key: tuple[tuple[str, ...], int], given: float) -> bool:
        """Move the leadership of `role` (deadline `given`) onto its quiet quorum's shared deadline, if that is not
        earlier; True if it moved."""
        quiet = self._quiet.get(key)
        if quiet is None or not quiet.roles:  # nobody follows it: start it afresh at what the quorum proves now
            name = f"{self.member} quiet with {','.join(key[0])}"
            quiet = self._quiet[key] = _Quiet(key, self.keeping.shared(name, self._quorum_lease(key)[1]))
        if quiet.deadline.until < given or not self.keeping.share(role, quiet.deadline):
            return False
        del self.leased[role]
        quiet.roles[role] = p
        self._quiet_of[role] = quiet
        self._quiet_on.setdefault(p, set()).add(role)
        return True

    def _renew_quiet(self, quiet: _Quiet[S], now: float) -> None:
        """Renew every leadership following `quiet` at once, a quantum at a time as the others."""
        acked, lease = self._quorum_lease(quiet.key)
        if lease >= quiet.deadline.until + self.quantum and self.keeping.renew_shared(quiet.deadline, lease):
            self.keeping.renewed(now - acked)

    def _wake(self, p: int) -> None:
        """Partition `p`'s lease no longer rests on its quorum: its leaderships go back to deadlines of their own,
        keeping the shared deadline they had (within its lease)."""
        for role in self._quiet_on.pop(p, ()):
            quiet = self._quiet_of.pop(role)
            del quiet.roles[role]
            if self.keeping.extend(role, quiet.deadline.until):
                self.leased[role] = (p, quiet.deadline.until)

    def _resume(self, now: float) -> None:
        """Partitions whose leaderships lapsed while their group's lease had run out as well, and whose group this
        node still leads: a quiet leader is not ticked, so it does not step down when its node acks stall; it leads
        on under the same term once they count again. Then no other leader can have been elected meanwhile (the
        lease holds again: a quorum was quiet under it all along), so its roles are led again under the same token,
        as a lease method resumes a claim it finds still standing. A group that stepped down instead leaves the set
        (whoever wins next acquires as usual)."""
        groups, giving_up = self.host.groups, self.host.interest.giving_up
        for p in list(self._lapsed_leading):
            g = groups.get(p)
            if g is None or g.state is not RaftState.LEADER or not g.serving or p in giving_up or self.stopping:
                self._lapsed_leading.discard(p)
            elif g.is_leader(now):
                self._lapsed_leading.discard(p)
                for role in self.roles_on(p):
                    if role not in self.leased and role not in self._quiet_of and not self.keeping.holds(role):
                        self.take(role, p, g.term, g.lease_until)
