"""Deterministic simulation of a lease group (etcd:// or zookeeper://) on virtual time: the real core and driver.

Every member runs `cas_lease.core.LeaseCore` on `elect.driver.Driver` (its `turn` called on virtual time, no
thread), as `cas_lease.driver.LeaseElector` does, against `SimStore` (`elect_bench.simulation.cas_store`). What
the elector does around its core is done here the same way:

- **Requests** go down two lanes per member, one request at a time each (renewals on their own, as the elector's
  renew lane keeps them from queueing behind role writes), with a latency drawn per request each way. A request
  not answered within the request timeout is reported failed with an unknown outcome (`Done(ok=False)`); the store
  may still carry it out, later, as a real one may.
- **Watches**: every change reaches every member after a drawn delay, in order per member. While a member is cut
  from the store its watch stalls, and catches up when the link heals (etcd resumes from a revision; ZooKeeper
  re-reads what its watches cover: here a snapshot).
- **Leaderships** are kept as `elect.base.BaseElector` keeps them: each until its deadline (shared ones moved on
  together by `ExtendShared`), fenced by the member's own timer when it passes (the core told, `lapsed`); a
  `Revoke` publishes the end at once and releases the key once the callbacks returned (`revoke_delay`).
- **Sessions**: an etcd lease is kept alive by the core's `KeepAlive`; a ZooKeeper session by any contact and the
  client's pings (every third of its timeout while the member runs and reaches the store). A ZooKeeper client
  that hears nothing for two thirds of its session timeout is SUSPENDED (every leadership fenced at once, as the
  elector does on the reporting thread); when it reconnects, a session the store ended is LOST: a new one begins.

Faults (`kill`, `restart`, `stop`, `pause`, `cut`/`heal`, `freeze_store`, `set_rate`) are scheduled with `at`. A member
whose clock runs at another rate reads it for everything the elector and the client library time: its core, its
deadlines, its request timeouts, a ZooKeeper client's pings and silence, and the lease end a keep-alive answer
gives (its own send time plus the TTL); the store times sessions on its own (true) clock. Freezing the store's
leader (of three members) stops its service until another leader serves: after `ETCD_ELECTION` (etcd) or
`ZK_ELECTION` (ZooKeeper) seconds, or when it wakes if that comes first; the new leader gives every lease or
session a fresh timeout. When the frozen leader wakes it ends, on its stale tracker, the sessions it had not heard
from for their timeout before it froze, and that is committed, as the soaks of 2026-11-23 saw of both stores: a
ZooKeeper leader re-elected with the highest zxid expires them (`docs/results/soak/zookeeper`), etcd's lessor
revokes the leases and its proposals are forwarded to the new leader (etcd-io/etcd#15247, `docs/results/soak/etcd`).
`history` records every leadership change as `Recorded`, read by `lines_of` into the event lines members print.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from cas_lease.core import LeaseCore, Timing
from cas_lease.model import Done, KeepAlive, LeaseInput, MemberRecord, Observation, Publish, Renew, StoreAction
from elect.core import Ready
from elect.driver import Driver, FunctionIO
from elect.roles import Role
from elect_bench.simulation.cas_store import Refuted, SessionGone, SimStore
from elect_bench.simulation.linked import LinkedWorld, ServerLink, SimMember
from elect_bench.simulation.recorded import Recorder

INF = math.inf
PING_FRACTION = 1 / 3
"""A ZooKeeper client pings after a third of its session timeout without other traffic."""
ZK_ELECTION = 0.2
"""Seconds a ZooKeeper ensemble takes to elect a new leader when its leader freezes (tickTime 50 ms, a few
ticks)."""
ETCD_ELECTION = 0.75
"""... and three etcd members (`elect_cluster.etcd`: election timeout 500 ms, randomized up to twice that)."""
SUSPEND_FRACTION = 2 / 3
"""... and declares the connection lost (SUSPENDED) after two thirds of it without an answer (kazoo's read
timeout)."""


@dataclass
class _Member(SimMember):
    sessions: int = 0
    session: str = ""
    opening: str = ""  # the session being opened (a late answer for an earlier attempt is ignored)
    session_down: bool = True  # no session yet, or lost: actions are dropped until a new one opens
    suspended: bool = False  # ZooKeeper: the client declared its connection lost
    heard_at: float = 0.0  # when the store last answered it (ZooKeeper's read timeout counts from here)
    core: LeaseCore | None = None
    releases: list[tuple[float, Role]] = field(default_factory=list)
    queues: dict[str, list[StoreAction]] = field(default_factory=dict)  # lane -> actions waiting
    busy: set[str] = field(default_factory=set)  # lanes with a request in flight
    watch_free: float = -INF  # watch events arrive in order: none before the last one's arrival
    backlog: list[Observation] = field(default_factory=list)  # watch events held while cut
    stopping: bool = False

    def forget_session(self) -> None:
        """What belonged to the session that ended: requests queued, watch events held, roles being released."""
        self.queues.clear()
        self.busy.clear()
        self.backlog = []
        self.releases.clear()


class LeaseWorld(LinkedWorld[_Member]):
    """Members of one lease group on one simulated store (see the module docstring)."""

    def __init__(self, store: SimStore, timing: Timing, members: Mapping[str, Sequence[Role]], seed: int,
                 link: ServerLink | None = None, *, request_timeout: float, revoke_delay: float = 0.002,
                 start_jitter: float = 0.1) -> None:
        super().__init__(seed, link or ServerLink())
        self.kind = store.kind
        self.timing = timing
        self.store = store
        self.request_timeout = request_timeout
        self.revoke_delay = revoke_delay
        self.members = {name: _Member(name, tuple(roles), Recorder(name, self.history))
                        for name, roles in members.items()}
        self._lapse_checks: set[tuple[str, float]] = set()
        self.start_all(start_jitter)

    # ------------------------------------------------------------------ faults
    def kill(self, name: str) -> None:
        """The process dies: its leaderships end now (at their deadline if that came first); its session lives on
        in the store until it lapses, and requests already on the wire may still be carried out."""
        m = self.members[name]
        if not m.up:
            return
        m.keeper.fence_all(self.local(m), "killed")
        m.forget_session()
        m.up, m.core, m.driver, m.stopping = False, None, None, False
        m.incarnation += 1
        m.wake_at = INF
        m.session, m.opening, m.session_down, m.suspended = "", "", True, False

    def stop(self, name: str, limit: float = 5.0) -> None:
        """A graceful stop (SIGTERM): the member hands its roles over, closes its session and exits; after `limit`
        seconds it exits whatever is left (as `Elector.stop` gives up on a store that does not answer)."""
        m = self.members[name]
        if not m.up:
            return
        if self.held(m, partial(self.stop, name, limit)):
            return
        if m.core is None:
            self.kill(name)  # no session yet: nothing to hand over
            return
        m.stopping = True
        m.core.stop(self.local(m))
        self.after(m, limit, partial(self._exit, m, m.incarnation))
        self._turn(m, [])

    def _exit(self, m: _Member, inc: int) -> None:
        """The stopped member closes its session (the store drops its keys at once) and its process exits."""
        if not self.current(m, inc):
            return
        session = m.session
        if session and not m.session_down:
            self.to_server(m, lambda: self._broadcast(self.store.drop(session)))
        self.kill(m.name)

    def _healed(self, m: _Member) -> None:
        """The client reconnects (a round trip later), stalled watches catch up."""
        self.at(self.now + self.link.request(self.rng), partial(self._reconnect, m, m.incarnation))

    def freeze_store(self, duration: float) -> None:
        """The store's leader stops for `duration`: nothing is answered or seen until another leader serves (after
        `ZK_ELECTION` or `ETCD_ELECTION`) or it wakes, whichever comes first; then see the module."""
        stale = dict(self.store.contact)  # the frozen leader's lease or session tracker, as it stops
        self.at(self.now + duration, partial(self._stale_leader_wakes, stale))
        until = self.now + min(duration, ZK_ELECTION if self.kind == "zookeeper" else ETCD_ELECTION)
        if until > self.frozen_until:
            self.frozen_until = until
            self.at(until, self._store_wakes)

    # ------------------------------------------------------------------ observation
    def _start(self, name: str) -> None:
        m = self.members[name]
        m.up = True
        m.incarnation += 1
        m.paused_until = -INF
        m.watch_free = -INF
        self._open(m, m.incarnation)

    def _open(self, m: _Member, inc: int) -> None:
        """Open a session (the first, or one after a loss): a round trip; tried again after the request timeout."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._open, m, inc)):
            return
        m.sessions += 1
        session = m.opening = f"{m.name}.{m.incarnation}.{m.sessions}"
        sent = self.local(m)
        record = m.core.record(sent) if m.core is not None else MemberRecord(m.name, frozenset(m.roles))

        def register() -> None:
            mine, theirs = self.store.open(session, record, self.now)
            self._watch_lapse(session)
            self._broadcast(theirs)
            self.to_member(m, inc, lambda: self._opened(m, inc, session, sent, mine))

        def retry() -> None:
            if self.current(m, inc) and m.opening == session:
                self._open(m, inc)

        self.to_server(m, register)
        self.at_local(m, sent + self.request_timeout, retry)

    def _opened(self, m: _Member, inc: int, session: str, sent: float, mine: list[Observation]) -> None:
        now = self.local(m)
        if m.opening != session or now >= sent + self.request_timeout:
            return  # given up on (`retry`): the store ends that session when it lapses
        m.session, m.opening, m.session_down, m.suspended, m.heard_at = session, "", False, False, now
        lease_until = sent + self.store.session_ttl if self.kind == "etcd" else INF
        if m.core is None:
            m.core = LeaseCore(m.name, session, self.timing, m.roles, now, lease_until)
            io: FunctionIO[StoreAction, None] = FunctionIO(
                apply=partial(self._apply, m), send=lambda actions, now: self._send(m, actions), halted=_raise,
                idle=partial(self._idle, m))
            m.driver = Driver(m.core, io, name=f"sim-{m.name}", max_inbox=None, tick_every_turn=True)
        else:
            m.core.rebind(session, now, lease_until)
        self._turn(m, list[LeaseInput](mine))
        if self.kind == "zookeeper":
            self._ping(m, inc, session)

    def _apply(self, m: _Member, ready: Ready[StoreAction, None], now: float) -> None:
        core = m.core
        assert core is not None
        applied = m.keeper.apply(ready.changes, now)
        for role in applied.lapsed:
            core.lapsed(role, now)
        m.releases += [(now + self.revoke_delay, role) for role in applied.revoked]

    def _idle(self, m: _Member, now: float) -> float:
        """The member's deadline timer and handover thread: leaderships past their deadline are fenced (the core
        told), released roles reported; the next time either is due."""
        core = m.core
        assert core is not None
        for role in m.keeper.expire(now):
            core.lapsed(role, now, now)
        if m.releases and m.releases[0][0] <= now:
            due = [role for t, role in m.releases if t <= now]
            m.releases = [(t, role) for t, role in m.releases if t > now]
            for role in due:
                core.released(role, now)
        if m.stopping and core.finished:
            self.at(self.now, partial(self._exit, m, m.incarnation))
        nxt = m.keeper.next_deadline()
        return min(nxt, m.releases[0][0]) if m.releases else nxt

    def _send(self, m: _Member, actions: list[StoreAction]) -> None:
        """Actions down their lanes, one request in flight per lane (renewals on their own)."""
        if m.session_down:
            return  # the core forgets them when it binds a new session
        for action in actions:
            m.queues.setdefault("renew" if isinstance(action, Renew | KeepAlive | Publish) else "store",
                                []).append(action)
        for lane in list(m.queues):
            self._next_request(m, lane)

    def _next_request(self, m: _Member, lane: str) -> None:
        queue = m.queues.get(lane)
        if lane in m.busy or not queue or m.session_down:
            return
        m.busy.add(lane)
        self._request(m, m.incarnation, m.session, queue.pop(0), lane)

    def _request(self, m: _Member, inc: int, session: str, action: StoreAction, lane: str) -> None:
        """One request: to the store and back, or failed (outcome unknown) at the request timeout."""
        if not self.current(m, inc) or m.session != session:
            return
        if self.held(m, partial(self._request, m, inc, session, action, lane)):
            return
        sent = self.local(m)
        deadline = sent + self.request_timeout  # on the member's clock
        over = [False]
        ours = self._ours(m, session) if isinstance(action, Renew) else None

        def finish(inputs: list[LeaseInput]) -> None:
            over[0] = True
            m.busy.discard(lane)
            self._turn(m, inputs)
            self._next_request(m, lane)

        def execute() -> None:
            try:
                mine, theirs = self.store.execute(session, m.name, action, sent, self.now, ours)
            except SessionGone:
                self.to_member(m, inc, lambda: self._session_lost(m, inc, session))
                return
            except Refuted as refused:
                self.to_member(m, inc, partial(answer, refused.observations, False))
                return
            self._watch_lapse(session)
            self._broadcast(theirs)
            self.to_member(m, inc, lambda: answer(mine))

        def answer(mine: list[Observation], ok: bool = True) -> None:
            if over[0] or m.session != session or self.local(m) >= deadline:
                return  # reported failed at the timeout (the member's clock)
            m.heard_at = self.local(m)
            finish([*mine, Done(action, ok, sent)])

        def timeout() -> None:
            if not over[0] and self.current(m, inc) and m.session == session:
                finish([Done(action, False, sent)])

        self.to_server(m, execute)
        self.at_local(m, deadline,
                      lambda: self.at(m.paused_until, timeout) if self.now < m.paused_until else timeout())

    def _ours(self, m: _Member, session: str) -> dict[Role, int]:
        """The roles whose keys `m`'s view has as its own (what a ZooKeeper renewal checks)."""
        core = m.core
        if core is None:
            return {}
        return {role: held.token for role in m.roles
                if (held := core.holder(role)) is not None and held.session == session}

    # ------------------------------------------------------------------ sessions
    def _watch_lapse(self, session: str) -> None:
        """Check when `session` lapses unless heard from again (one check per due time)."""
        due = self.store.lapse_due(session)
        if due is None or (session, due) in self._lapse_checks:
            return
        self._lapse_checks.add((session, due))

        def check() -> None:
            self._lapse_checks.discard((session, due))
            if self.now < self.frozen_until:
                return  # the store's wake-up expires what is due
            now_due = self.store.lapse_due(session)
            if now_due is not None and now_due <= self.now:
                self._broadcast(self.store.drop(session))

        self.at(due, check)

    def _store_wakes(self) -> None:
        """The store serves again (its leader woke, or another one was elected): every session's timeout restarts."""
        if self.now < self.frozen_until:
            return
        self.store.extend_all(self.now)
        for session in list(self.store.contact):
            self._watch_lapse(session)
        for m in self.members.values():
            if m.up and m.suspended and not m.cut:
                self.at(self.now + self.link.request(self.rng), partial(self._reconnect, m, m.incarnation))

    def _stale_leader_wakes(self, stale: dict[str, float]) -> None:
        """A frozen leader wakes and ends the sessions its tracker had not heard from for their timeout when it froze,
        and that is committed: ZooKeeper's leader expires them (re-elected with the highest zxid), etcd's lessor
        revokes the leases, its proposals forwarded to the new leader (etcd-io/etcd#15247, in the 3.4.23 Debian
        ships)."""
        for session, last in sorted(stale.items()):
            if session in self.store.contact and self.now - last >= self.store.session_ttl:
                self._broadcast(self.store.drop(session))

    def _ping(self, m: _Member, inc: int, session: str) -> None:
        """ZooKeeper: the client library keeps its session alive, and notices a silent server (SUSPENDED)."""
        if not self.current(m, inc) or m.session != session:
            return
        if self.now >= m.paused_until:
            if not m.cut and self.now >= self.frozen_until:
                self.store.touch(session, self.now)
                self._watch_lapse(session)
                m.heard_at = self.local(m)
            elif not m.suspended and self.local(m) - m.heard_at >= self.store.session_ttl * SUSPEND_FRACTION:
                self._suspend(m)
        self.at_local(m, self.local(m, max(self.now, m.paused_until)) + self.store.session_ttl * PING_FRACTION,
                      partial(self._ping, m, inc, session))

    def _suspend(self, m: _Member) -> None:
        """SUSPENDED: every leadership ends now, on the client's thread; the core stops until it renews."""
        m.suspended = True
        m.keeper.fence_all(self.local(m), "suspended")
        if m.core is not None:
            m.core.suspended(self.local(m))
            self._turn(m, [])

    def _reconnect(self, m: _Member, inc: int) -> None:
        """The link works again: a session the store ended is LOST (a new one opens); else the watches catch up."""
        if not self.current(m, inc) or m.cut or self.now < self.frozen_until:
            return
        if self.held(m, partial(self._reconnect, m, inc)):
            return
        if not m.session_down and m.session not in self.store.members:
            self._session_lost(m, inc, m.session)
            return
        m.suspended = False
        m.heard_at = self.local(m)
        self._catch_up(m)

    def _session_lost(self, m: _Member, inc: int, session: str) -> None:
        """The store no longer knows the session: every leadership ends, a new session opens."""
        if not self.current(m, inc) or m.session != session or m.session_down:
            return
        m.keeper.fence_all(self.local(m), "session lost")
        m.forget_session()
        m.session_down, m.suspended = True, False
        if m.core is not None:
            m.core.suspended(self.local(m))
            self._turn(m, [])
        self._open(m, inc)

    # ------------------------------------------------------------------ watches
    def _broadcast(self, seen: list[Observation]) -> None:
        if not seen:
            return
        for m in self.members.values():
            if not m.up or m.session_down:
                continue
            if m.cut:
                m.backlog.extend(seen)
                continue
            self._watch_event(m, seen)

    def _watch_event(self, m: _Member, seen: list[Observation]) -> None:
        at = max(self.now + self.link.watch(self.rng), m.watch_free)
        m.watch_free = at
        inc = m.incarnation

        def arrive() -> None:
            if not self.current(m, inc) or m.session_down:
                return
            if m.cut:
                m.backlog.extend(seen)
                return
            self._turn(m, list(seen))

        self.at(at, arrive)

    def _catch_up(self, m: _Member) -> None:
        """A watch that stalled catches up: etcd resumes from its revision; ZooKeeper's re-armed watches read the
        nodes again (a snapshot)."""
        held, m.backlog = m.backlog, []
        if m.session_down:
            return
        seen: list[Observation] = [self.store.snapshot()] if self.kind == "zookeeper" else held
        if seen:
            self._watch_event(m, seen)


def _raise(error: Exception) -> None:  # pragma: no cover - nothing is persisted; a bug raises at once
    raise AssertionError(error)


