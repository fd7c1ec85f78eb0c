"""A deterministic, virtual-time world for the lease core: an in-memory store and members run by it.

The store is the simulator's (`elect_bench.simulation.cas_store.SimStore`): etcd's semantics, or with
`sessions=True` ZooKeeper's (the store deletes a session's keys, role keys too, once it has not heard from it for
`ttl`, for a core that trusts it to: `Timing.silence_takeover=False`; its renewals here check nothing, so the
core's own rules are what is tested). Members execute the core's
actions at once, see every change after `watch_delay`, and keep leaderships as every elector keeps them
(`elect.leaderships`: a deadline fences). `check()` asserts that no
two members hold a valid leadership of a role at any step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from cas_lease.core import LeaseCore, Timing
from cas_lease.model import Done, Observation, Snapshot, StoreAction
from elect.core import LeadershipChange, Revoke
from elect.leaderships import Leaderships
from elect.roles import Role
from elect_bench.simulation.cas_store import SessionGone, SimStore
from elect_bench.simulation.recorded import Recorded, Recorder, lines_of


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


@dataclass
class SimMember:
    name: str
    core: LeaseCore
    recorder: Recorder
    inbox: list[tuple[float, Observation]] = field(default_factory=list)
    releases: list[tuple[float, Role]] = field(default_factory=list)
    handovers: list[Role] = field(default_factory=list)  # the handover thread's queue: one at a time
    handover_free_at: float = 0.0
    blind: bool = False  # sees nothing of others: no watch events, no snapshots
    alive: bool = True
    frozen: bool = False
    reachable: bool = True
    revoke_delay: float = 0.0
    keeper: Leaderships = field(init=False)

    def __post_init__(self) -> None:
        self.keeper = Leaderships(self.recorder)

    @property
    def leading(self) -> dict[Role, tuple[int, float]]:
        """Role -> (token, deadline) of the leaderships held, valid or not yet fenced."""
        return {role: (held.token, held.until()) for role, held in self.keeper.held.items()}

    @property
    def events(self) -> list[Event]:
        """The event lines this member printed, in order."""
        return [Event(cast(str, line["event"]), cast(Role, line["role"]), cast(int, line["token"]),
                      cast(float, line["mono"]), cast("float | None", line.get("until")))
                for line in lines_of(self.recorder.history)]

    def held(self) -> set[Role]:
        return set(self.keeper.held)


class Sim:
    """Members of one group on one store, stepped every `dt` seconds of virtual time."""

    def __init__(self, timing: Timing, *, sessions: bool = False, watch_delay: float = 0.005, dt: float = 0.005,
                 suspend_after: float | None = None) -> None:
        self.timing = timing
        self.store = SimStore("zookeeper" if sessions else "etcd", timing.ttl if sessions else 2 * timing.ttl,
                              ephemeral_roles=sessions)
        self.sessions = sessions
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
        member = SimMember(name, core, Recorder(name, list[Recorded]()), revoke_delay=revoke_delay)
        self.members[name] = member
        self._broadcast(self.store.open(session, core.record(self.now), self.now)[1])
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
            if self.sessions:
                self._broadcast(self.store.expire(self.now))
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
            for role, held in member.keeper.held.items():
                if self.now < held.until():
                    holders.setdefault(role, []).append(member.name)
        overlap = {r: names for r, names in holders.items() if len(names) > 1}
        assert not overlap, f"two valid leaders at t={self.now}: {overlap}"

    # ------------------------------------------------------------------------------------------ one member
    def _step(self, m: SimMember) -> None:
        now = self.now
        if not m.frozen:  # the DeadlineTimer, on any member
            for role in m.keeper.expire(now):
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
            m.keeper.apply([Revoke(role)], now)
            m.handover_free_at = now + m.revoke_delay
            m.releases.append((m.handover_free_at, role))
        work = decide(m.core, now)
        while work:
            out = work.pop(0)
            if isinstance(out, Revoke):
                m.handovers.append(out.role)
            elif isinstance(out, LeadershipChange):
                for role in m.keeper.apply([out], now).lapsed:
                    m.core.lapsed(role, now)
            else:
                self._execute(m, out)
                work = decide(m.core, now) + work

    def _execute(self, m: SimMember, action: StoreAction) -> None:
        now = self.now
        if not m.reachable:
            m.core.step(Done(action, False, now), now)
            return
        try:
            mine, theirs = self.store.execute(m.core.session, m.name, action, now, now)
        except SessionGone:
            m.core.step(Done(action, False, now), now)
            return
        for obs in mine:
            if not (m.blind and isinstance(obs, Snapshot)):
                m.core.step(obs, now)
        m.core.step(Done(action, True, now), now)
        self._broadcast(theirs)
