"""A deterministic, virtual-time world for the lease core: an in-memory store and members run by it.

The store follows etcd's semantics (compare-and-swap on the revision of a key's last write, a global revision,
membership entries whose mod revision is the last renewal) or, with `sessions=True`, ZooKeeper's (the
store deletes a session's keys once it has not heard from it for `ttl`). Members execute the core's
actions at once, see every change after `watch_delay`, and keep leaderships the way BaseElector does
(a deadline fences). `check()` asserts that no two members hold a valid leadership of a role at any step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from cas_lease.core import LeaseCore, Timing
from cas_lease.model import (
    Create,
    Delete,
    Done,
    Expire,
    Holder,
    KeepAlive,
    LeaseSeen,
    MemberRecord,
    MemberSeen,
    Observation,
    Publish,
    Renew,
    RoleSeen,
    Snapshot,
    StoreAction,
    Take,
)
from elect.core import Acquire, Extend, ExtendShared, Fence, LeadershipChange, Revoke
from elect.roles import Role


def decide(core: LeaseCore, now: float) -> list[LeadershipChange | StoreAction]:
    """Tick `core` and take what it decided: leadership changes first, then store actions (the order the
    driver handles them in)."""
    core.tick(now)
    ready = core.ready()
    return [*ready.changes, *ready.messages]


@dataclass
class Event:
    kind: str  # acquired, revoked, fenced
    role: Role
    token: int
    t: float
    until: float | None = None


class SimStore:
    def __init__(self, sessions: bool = False, ttl: float = 1.0) -> None:
        self.rev = 0
        self.roles: dict[Role, Holder] = {}
        self.members: dict[str, tuple[MemberRecord, int]] = {}
        self.sessions = sessions
        self.ttl = ttl
        self.touched: dict[str, float] = {}
        self.requests = 0

    def register(self, session: str, record: MemberRecord, now: float) -> list[Observation]:
        self.rev += 1
        self.members[session] = (record, self.rev)
        self.touched[session] = now
        return [MemberSeen(session, record, self.rev, self.rev)]

    def expire_sessions(self, now: float) -> list[Observation]:
        """ZooKeeper: drop every key of a session not heard from for ttl."""
        if not self.sessions:
            return []
        seen: list[Observation] = []
        for session, last in list(self.touched.items()):
            if now - last >= self.ttl and session in self.members:
                seen += self.drop(session)
        return seen

    def drop(self, session: str) -> list[Observation]:
        seen: list[Observation] = []
        for role, holder in list(self.roles.items()):
            if holder.session == session:
                self.rev += 1
                del self.roles[role]
                seen.append(RoleSeen(role, None, self.rev))
        self.rev += 1
        self.members.pop(session, None)
        self.touched.pop(session, None)
        seen.append(MemberSeen(session, None, 0, self.rev))
        return seen

    def execute(self, session: str, member: str, action: StoreAction, now: float) -> tuple[list[Observation],
                                                                                           list[Observation]]:
        """(what the caller sees, what watchers see)."""
        self.requests += 1
        if session not in self.members:
            raise LookupError("session gone")
        self.touched[session] = now
        if isinstance(action, Renew):
            self.rev += 1
            record, _ = self.members[session]
            self.members[session] = (record, self.rev)
            changed = MemberSeen(session, record, self.rev, self.rev)
            snap = Snapshot(dict(self.roles), dict(self.members), self.rev)
            return ([snap] if not self.sessions else []), [changed]
        if isinstance(action, KeepAlive):
            return [LeaseSeen(now + 2 * self.ttl)], []
        if isinstance(action, Publish):
            self.rev += 1
            self.members[session] = (action.record, self.rev)
            published = MemberSeen(session, action.record, self.rev, self.rev)
            return [published], [published]
        if isinstance(action, Create):
            current = self.roles.get(action.role)
            if current is None:
                self.rev += 1
                current = self.roles[action.role] = Holder(session, member, self.rev)
                seen = RoleSeen(action.role, current, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev)], []
        if isinstance(action, Expire | Take):
            current = self.roles.get(action.role)
            entry = self.members.get(action.holder.session)
            version = entry[1] if entry else 0
            if current is not None and current.token == action.holder.token and version == action.version:
                self.rev += 1
                if isinstance(action, Take):
                    current = self.roles[action.role] = Holder(session, member, self.rev)
                    seen = RoleSeen(action.role, current, self.rev)
                else:
                    del self.roles[action.role]
                    seen = RoleSeen(action.role, None, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev),
                    MemberSeen(action.holder.session, entry[0] if entry else None, version, self.rev)], []
        if isinstance(action, Delete):
            current = self.roles.get(action.role)
            if current is not None and current.session == session and current.token == action.token:
                self.rev += 1
                del self.roles[action.role]
                seen = RoleSeen(action.role, None, self.rev)
                return [seen], [seen]
            return [RoleSeen(action.role, current, self.rev)], []
        raise AssertionError(action)


@dataclass
class SimMember:
    name: str
    core: LeaseCore
    inbox: list[tuple[float, Observation]] = field(default_factory=list)
    leading: dict[Role, tuple[int, float]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    releases: list[tuple[float, Role]] = field(default_factory=list)
    handovers: list[Role] = field(default_factory=list)  # the handover thread's queue: one at a time
    shared: set[Role] = field(default_factory=set)  # leaderships acquired on the core's shared deadline
    handover_free_at: float = 0.0
    blind: bool = False  # sees nothing of others: no watch events, no snapshots
    alive: bool = True
    frozen: bool = False
    reachable: bool = True
    revoke_delay: float = 0.0

    def held(self) -> set[Role]:
        return set(self.leading)


class Sim:
    """Members of one group on one store, stepped every `dt` seconds of virtual time."""

    def __init__(self, timing: Timing, *, sessions: bool = False, watch_delay: float = 0.005, dt: float = 0.005,
                 suspend_after: float | None = None) -> None:
        self.timing = timing
        self.store = SimStore(sessions=sessions, ttl=timing.ttl)
        self.members: dict[str, SimMember] = {}
        self.now = 0.0
        self.dt = dt
        self.watch_delay = watch_delay
        self.suspend_after = suspend_after  # ZooKeeper: a cut-off member learns it is SUSPENDED after this
        self._cut_since: dict[str, float] = {}
        self._count = 0

    def add(self, name: str, roles: Iterable[Role], revoke_delay: float = 0.0, *, weight: float = 1.0,
            max_roles: int | None = None) -> SimMember:
        self._count += 1
        session = f"s{self._count}"
        roles = list(roles)
        core = LeaseCore(name, session, self.timing, roles, self.now, lease_until=math.inf, weight=weight,
                         max_roles=max_roles)
        member = SimMember(name, core, revoke_delay=revoke_delay)
        self.members[name] = member
        self._broadcast(self.store.register(session, core.record(self.now), self.now))
        for seen in [Snapshot(dict(self.store.roles), dict(self.store.members), self.store.rev)]:
            core.step(seen, self.now)
        return member

    def crash(self, name: str) -> None:
        self.members[name].alive = False

    def _broadcast(self, seen: list[Observation]) -> None:
        for member in self.members.values():
            for obs in seen:
                member.inbox.append((self.now + self.watch_delay, obs))

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end - 1e-9:
            self.now = round(self.now + self.dt, 9)
            self._broadcast(self.store.expire_sessions(self.now))
            for member in list(self.members.values()):
                self._step(member)
            self.check()

    def run_until(self, predicate: object, limit: float) -> float:
        """Run until `predicate()` holds; return the virtual time it took (fails after `limit`)."""
        start = self.now
        assert callable(predicate)
        while not predicate():
            assert self.now - start < limit, f"not reached within {limit} s of virtual time"
            self.run(self.dt)
        return self.now - start

    def check(self) -> None:
        holders: dict[Role, list[str]] = {}
        for member in self.members.values():
            for role, (_, deadline) in member.leading.items():
                if self.now < deadline:
                    holders.setdefault(role, []).append(member.name)
        overlap = {r: names for r, names in holders.items() if len(names) > 1}
        assert not overlap, f"two valid leaders at t={self.now}: {overlap}"

    # ------------------------------------------------------------------------------------------ one member
    def _step(self, m: SimMember) -> None:
        now = self.now
        for role, (token, deadline) in list(m.leading.items()):  # the DeadlineTimer, on any member
            if now >= deadline and not m.frozen:
                del m.leading[role]
                m.events.append(Event("fenced", role, token, now, deadline))
                m.core.lapsed(role, now)
        if not m.alive or m.frozen:
            return
        if not m.reachable and self.suspend_after is not None:
            since = self._cut_since.setdefault(m.name, now)
            if now - since >= self.suspend_after and since >= 0:
                m.core.suspended(now)
                self._cut_since[m.name] = -1.0
        elif m.reachable:
            self._cut_since.pop(m.name, None)
        due = [obs for t, obs in m.inbox if t <= now and not m.blind]
        m.inbox = [(t, obs) for t, obs in m.inbox if t > now]
        for obs in due:
            m.core.step(obs, now)
        for t, role in [r for r in m.releases if r[0] <= now]:
            m.releases.remove((t, role))
            m.core.released(role, now)
        if m.handovers and now >= m.handover_free_at:
            role = m.handovers.pop(0)
            if role in m.leading:
                token, deadline = m.leading.pop(role)
                m.events.append(Event("revoked" if now < deadline else "fenced", role, token, now))
            m.handover_free_at = now + m.revoke_delay
            m.releases.append((m.handover_free_at, role))
        work = decide(m.core, now)
        while work:
            out = work.pop(0)
            if isinstance(out, Acquire):
                assert out.role not in m.leading
                m.leading[out.role] = (out.token, out.deadline)
                if out.shared:
                    m.shared.add(out.role)
                else:
                    m.shared.discard(out.role)
                m.events.append(Event("acquired", out.role, out.token, now))
            elif isinstance(out, Extend):
                if out.role in m.leading:
                    token, deadline = m.leading[out.role]
                    m.leading[out.role] = (token, max(deadline, out.deadline))
            elif isinstance(out, ExtendShared):  # as BaseElector: every shared leadership still in force
                for role, (token, deadline) in list(m.leading.items()):
                    if role in m.shared and now < deadline:
                        m.leading[role] = (token, max(deadline, out.deadline))
            elif isinstance(out, Fence):
                if out.role in m.leading:
                    token, _ = m.leading.pop(out.role)
                    m.events.append(Event("fenced", out.role, token, now, out.until))
            elif isinstance(out, Revoke):
                m.handovers.append(out.role)
            else:
                self._execute(m, out)
                work = decide(m.core, now) + work

    def _execute(self, m: SimMember, action: StoreAction) -> None:
        now = self.now
        if not m.reachable:
            m.core.step(Done(action, False, now), now)
            return
        try:
            mine, theirs = self.store.execute(m.core.session, m.name, action, now)
        except LookupError:
            m.core.step(Done(action, False, now), now)
            return
        for obs in mine:
            if not (m.blind and isinstance(obs, Snapshot)):
                m.core.step(obs, now)
        m.core.step(Done(action, True, now), now)
        self._broadcast(theirs)
