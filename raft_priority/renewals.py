"""How a `raft://` node's leaderships follow its groups' leases: the policy between the election core and the
deadlines the application's leaderships keep. Pure (no clock, thread or I/O): it says what happens to the
leaderships as leadership changes (`Acquire`, `Extend`, `Follow`, `ExtendShared`, `elect.core`), which the elector
applies as it applies every core's (`BaseElector._apply_change`), telling it back of those that came too late
(`lapsed`); the simulator runs the elector itself, so what decides when a role's deadline moves, lapses and comes
back is simulated as it runs.

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

from elect.core import Acquire, Extend, ExtendShared, Follow, LeadershipChange
from elect.roles import Role
from raft_priority.core import RaftState
from raft_priority.host import NodeHost

INF = math.inf


@dataclass
class _Quiet:
    """The leaderships of the quiet partitions whose leases rest on one node-link quorum: their shared deadline's key
    (`ExtendShared`, `Follow`) and how far it holds."""

    key: tuple[tuple[str, ...], int]
    name: str
    until: float
    roles: dict[Role, int] = field(default_factory=dict)  # role -> its partition


class Renewals:
    """The leaderships node `member` renews from its groups' leases (see the module). `roles_on(p)`: the roles the
    node contends for on partition `p`; `renewed(seconds)`: a renewal rested on evidence that old (the metrics'). What
    it decides accumulates in `changes` until the elector takes it (`take_changes`).
    `resume=False` leaves lapsed roles of a group the node still leads unled (the design before 50d4eea, which a soak
    found leaving roles leaderless for minutes), to show what `_resume` prevents."""

    def __init__(self, member: str, host: NodeHost, roles_on: Callable[[int], list[Role]],
                 renewed: Callable[[float], None], *, resume: bool = True) -> None:
        self.member = member
        self.host = host
        self.roles_on = roles_on
        self.renewed = renewed
        config = host.config
        self.quantum = config.lease_window / 4
        """Deadlines move in steps of a quarter lease: a leader's lease end trails "now + lease" by up to a heartbeat
        period plus the ack delay; the deadline trails the lease by at most a step."""
        self.every = min(config.heartbeat_interval / 2, config.lease_window / 16)
        """How often `tick` sweeps."""
        self.next_sweep = 0.0
        self.stopping = False
        """Set once the node hands everything over: nothing is resumed from then on."""
        self.changes: list[LeadershipChange] = []
        self.leased: dict[Role, tuple[int, float]] = {}  # leaderships on a deadline of their own: (partition, lease)
        self._quiet: dict[tuple[tuple[str, ...], int], _Quiet] = {}
        self._quiet_of: dict[Role, _Quiet] = {}  # leaderships following a quiet quorum's shared deadline
        self._quiet_on: dict[int, set[Role]] = {}  # ... by partition
        self._lapsed_leading: set[int] = set()  # see `_resume`
        self._resumes = resume

    def take_changes(self) -> list[LeadershipChange]:
        """What was decided since the last call, in order."""
        out, self.changes = self.changes, []
        return out

    def take(self, role: Role, p: int, term: int, lease: float) -> None:
        """The node leads `role` (on partition `p`) under `term` until the group's `lease`."""
        self.forget(role)
        self.changes.append(Acquire(role, term, lease))
        self.leased[role] = (p, lease)

    def holds(self, role: Role) -> bool:
        """Whether a leadership of `role` is renewed here (it was taken and has not ended since)."""
        return role in self.leased or role in self._quiet_of

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

    def shared_by(self) -> dict[Role, str]:
        """The leaderships following a quiet quorum's shared deadline, each with that deadline's key."""
        return {role: quiet.name for role, quiet in self._quiet_of.items()}

    def tick(self, now: float) -> float:
        """Sweep if one is due; when the next one is."""
        if now >= self.next_sweep:
            self.next_sweep = now + self.every
            self.sweep(now)
        return self.next_sweep

    def sweep(self, now: float) -> None:
        """Renew every leadership from its lease (see the module)."""
        host, quantum, changes = self.host, self.quantum, self.changes
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
                changes.append(Extend(role, lease))
                self.leased[role] = (p, lease)
                if p not in renewed:  # once per partition, however many roles it carries
                    renewed.add(p)
                    self.renewed(now - group.quorum_ack)

    def lapsed(self, role: Role, p: int, now: float) -> bool:
        """The leadership of `role` (on partition `p`) passed its deadline on this node's clock (and was fenced),
        or a change of it came too late: True if the node should hand the partition on, its core leading it still
        (the application was told Fenced; another node may lead under a newer term). A group whose lease had run out
        as well is resumed once it holds again (`_resume`)."""
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
            quiet = self._quiet[key] = _Quiet(key, f"{self.member} quiet with {','.join(key[0])}",
                                              self._quorum_lease(key)[1])
            self.changes.append(ExtendShared(quiet.until, quiet.name))
        if quiet.until < given:
            return False
        self.changes.append(Follow(role, quiet.name))
        del self.leased[role]
        quiet.roles[role] = p
        self._quiet_of[role] = quiet
        self._quiet_on.setdefault(p, set()).add(role)
        return True

    def _renew_quiet(self, quiet: _Quiet, now: float) -> None:
        """Renew every leadership following `quiet` at once, a quantum at a time as the others."""
        acked, lease = self._quorum_lease(quiet.key)
        if lease >= quiet.until + self.quantum:
            quiet.until = lease
            self.changes.append(ExtendShared(lease, quiet.name))
            self.renewed(now - acked)

    def _wake(self, p: int) -> None:
        """Partition `p`'s lease no longer rests on its quorum: its leaderships go back to deadlines of their own,
        keeping the shared deadline they had (within its lease)."""
        for role in self._quiet_on.pop(p, ()):
            quiet = self._quiet_of.pop(role)
            del quiet.roles[role]
            self.changes.append(Extend(role, quiet.until))
            self.leased[role] = (p, quiet.until)

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
                    if not self.holds(role):
                        self.take(role, p, g.term, g.lease_until)
