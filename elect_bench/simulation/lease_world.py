"""Deterministic simulation of a lease group (etcd:// or zookeeper://) on virtual time: the real elector.

Every member is a `cas_lease.driver.LeaseElector`, core, driver and elector as `etcd://` and `zookeeper://` members
run them, on virtual time (`elect_bench.simulation.runtime`: its clock, its deadline timer, its events delivered as
published; its driver turned by the world, `Driver.pump`), against `SimStore` (`elect_bench.simulation.cas_store`).
Only its I/O is simulated (`SimLeaseElector`):

- **Requests** go down the elector's two lanes (renewals on their own; role actions batched and spread over the
  store's `parallel` workers as the elector sends them), one request at a time per worker, with a latency drawn
  per request each way. A request not answered within the request timeout is reported failed with an unknown
  outcome (`Done(ok=False)`); the store may still carry it out, later, as a real one may.
- **Watches**: every change reaches every member after a drawn delay, in order per member. While a member is cut
  from the store its watch stalls, and catches up when the link heals (etcd resumes from a revision; ZooKeeper
  re-reads what its watches cover: here a snapshot).
- **Leaderships** are the elector's own: fenced by its deadline timer (on the world's queue) when they lapse; a
  `Revoke` publishes the end on the handover "thread" at once and releases the key once the callbacks returned
  (`revoke_delay`).
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
`history` records every event of every elector as `Recorded`, read by `lines_of` into the lines members print.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from cas_lease.core import Timing
from cas_lease.driver import Carried, LeaseElector, Listener, Opened
from cas_lease.model import MemberRecord, Observation, Renew, RoleAction, StoreAction
from cas_lease.options import _LeaseOptions
from elect.contract import Characteristics
from elect.core import Revoke
from elect.leaderships import Leaderships
from elect.roles import Role
from elect_bench.simulation.cas_store import Refuted, SessionGone, SimStore
from elect_bench.simulation.linked import LinkedWorld, ServerLink, SimMember
from elect_bench.simulation.recorded import Recorder
from elect_bench.simulation.runtime import SimRuntime

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
class _Lane:
    """One of the elector's lanes: `workers` requests in flight at most, the rest queued."""

    workers: int
    queue: list[tuple[int, list[StoreAction]]] = field(default_factory=list)
    busy: int = 0


@dataclass
class _Member(SimMember):
    sessions: int = 0
    session: str = ""
    opening: str = ""  # the session being opened (a late answer for an earlier attempt is ignored)
    session_down: bool = True  # no session yet, or lost: actions are dropped until a new one opens
    suspended: bool = False  # ZooKeeper: the client declared its connection lost
    heard_at: float = 0.0  # when the store last answered it (ZooKeeper's read timeout counts from here)
    elector: SimLeaseElector | None = None
    lanes: dict[str, _Lane] = field(default_factory=dict)
    lanes_of: int = 0  # the lanes' generation: requests in flight for an older one are forgotten
    watch_free: float = -INF  # watch events arrive in order: none before the last one's arrival
    backlog: list[Observation] = field(default_factory=list)  # watch events held while cut
    stopping: bool = False
    pumping: bool = False  # a turn of its driver is queued

    def forget_session(self) -> None:
        """What belonged to the session that ended: requests queued or in flight, watch events held."""
        for lane in self.lanes.values():
            lane.queue.clear()
            lane.busy = 0
        self.lanes_of += 1
        self.backlog = []


class _SimClient:
    """The store client as the elector sees it outside its lanes (which the world simulates): its limits, and the
    session's close."""

    def __init__(self, world: LeaseWorld, m: _Member) -> None:
        self._world = world
        self._m = m
        self.batch_size, self.parallel = (126, 2) if world.kind == "etcd" else (100, 2)  # EtcdStore's, ZooKeeperStore's
        self.requests = 0

    def open(self, record: MemberRecord, listener: Listener, timeout: float) -> Opened:
        raise AssertionError("sessions are opened by the world")

    def reopen(self, record: MemberRecord, timeout: float) -> Opened:
        raise AssertionError("sessions are opened by the world")

    def track(self, roles: Iterable[Role]) -> None:
        pass

    def members(self, timeout: float) -> dict[str, MemberRecord]:
        return {s: record for s, (record, _) in self._world.store.members.items()}

    def execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        raise AssertionError("requests go down the world's lanes")

    def execute_batch(self, actions: Sequence[RoleAction], timeout: float) -> list[tuple[bool, list[Observation]]]:
        raise AssertionError("requests go down the world's lanes")

    def close(self, timeout: float) -> None:
        """The session ends: the store drops its keys once the request arrives."""
        self._world.close_session(self._m)


class SimLeaseElector(LeaseElector):
    """The real `LeaseElector` of member `m`, its I/O carried out by `world` on virtual time (see the module)."""

    def __init__(self, world: LeaseWorld, m: _Member) -> None:
        super().__init__(world.kind, world.options, m.name, m.roles, _SimClient(world, m), world.timing,
                         world.characteristics, runtime=SimRuntime(world, m))
        self.world = world
        self.sim = m

    def _on_start(self) -> None:
        self.world.open_session(self.sim, self.sim.incarnation)  # `_begin` once it is open

    def _wake_loop(self) -> Callable[[], None]:
        return partial(self.world.pump_soon, self.sim)

    def _start_io(self) -> None:
        pass

    def _submit(self, lane: str, epoch: int, actions: list[StoreAction]) -> None:
        self.world.submit(self.sim, lane, epoch, actions)

    def _hand_over(self, revoke: Revoke) -> None:
        """The handover thread: Revoked published, the key released once the callbacks returned."""
        self._begin_revoke(revoke.role)
        self.world.later(self.sim, self.world.revoke_delay, partial(self._release, revoke.role))

    def _close_io(self) -> None:
        pass

    def _try_reopen(self) -> None:
        self._reopen_at = INF  # the world retries an open that was not answered
        if not self.sim.opening:
            self.world.open_session(self.sim, self.sim.incarnation)


class LeaseWorld(LinkedWorld[_Member]):
    """Members of one lease group on one simulated store (see the module docstring)."""

    def __init__(self, store: SimStore, options: _LeaseOptions, timing: Timing, characteristics: Characteristics,
                 members: Mapping[str, Sequence[Role]], seed: int, link: ServerLink | None = None, *,
                 revoke_delay: float = 0.002, start_jitter: float = 0.1) -> None:
        super().__init__(seed, link or ServerLink())
        self.kind = store.kind
        self.options = options
        self.timing = timing
        self.characteristics = characteristics
        self.store = store
        self.request_timeout = options.timeout
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
        if m.elector is not None:
            m.elector._fence_all()
        m.forget_session()
        m.up, m.elector, m.driver, m.stopping, m.pumping = False, None, None, False, False
        m.keeper = Leaderships(m.recorder)
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
        e = m.elector
        if e is None or e._driver is None:
            self.kill(name)  # no session yet: nothing to hand over
            return
        m.stopping = True
        e._stop_core()
        self.after(m, limit, partial(self._exit, m, m.incarnation))

    def _exit(self, m: _Member, inc: int) -> None:
        """The stopped member's loop ends (closing its session: the store drops its keys at once) and its process
        exits."""
        if not self.current(m, inc):
            return
        e = m.elector
        if e is not None and not e._finished.is_set():
            e._ended()
        self.kill(m.name)

    def close_session(self, m: _Member) -> None:
        session = m.session
        if session and not m.session_down:
            self.to_server(m, lambda: self._broadcast(self.store.drop(session)))

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

    # ------------------------------------------------------------------ the member's process
    def _start(self, name: str) -> None:
        m = self.members[name]
        m.up = True
        m.incarnation += 1
        m.paused_until = -INF
        m.watch_free = -INF
        m.lanes_of += 1
        e = m.elector = SimLeaseElector(self, m)
        m.lanes = {"renew": _Lane(1), "store": _Lane(max(1, e._store.parallel))}
        m.keeper = e._held
        e.subscribe(m.recorder.event)
        e.start()

    def pump_soon(self, m: _Member) -> None:
        """Something was queued for `m`'s driver: it takes a turn now (once, however much was queued)."""
        if not m.pumping and m.up:
            m.pumping = True
            self.at(self.now, partial(self._pump, m, m.incarnation))

    def _pump(self, m: _Member, inc: int) -> None:
        """The member's driver takes a turn (when it resumes, if paused), then its next wake-up is armed; a loop that
        finished ends as the thread's does."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._pump, m, inc)):
            return
        m.pumping = False
        e = m.elector
        assert e is not None
        driver = e._require_driver()
        now = self.local(m)
        wake, extra = driver.pump(now)
        if driver.stopping:
            e._ended()
            self.kill(m.name)
            return
        at = max(min(wake, extra), now)
        if at < m.wake_at or m.wake_at < now:
            m.wake_at = at
            if at < INF:
                self.at_local(m, at, partial(self._wake_pump, m, inc, at))

    def _wake_pump(self, m: _Member, inc: int, at: float) -> None:
        if self.current(m, inc) and m.wake_at == at:
            m.wake_at = INF
            self._pump(m, inc)

    def later(self, m: _Member, seconds: float, fn: Callable[[], None]) -> None:
        """`fn` on one of `m`'s threads `seconds` from now on its clock (when it resumes, if paused then)."""
        inc = m.incarnation

        def run() -> None:
            if self.current(m, inc) and not self.held(m, run):
                fn()

        self.after(m, seconds, run)

    # ------------------------------------------------------------------ sessions
    def open_session(self, m: _Member, inc: int) -> None:
        """Open a session (the first, or one after a loss): a round trip; tried again after the request timeout."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self.open_session, m, inc)):
            return
        e = m.elector
        assert e is not None
        m.sessions += 1
        session = m.opening = f"{m.name}.{m.incarnation}.{m.sessions}"
        sent = self.local(m)
        record = e._core.record(sent) if e._core is not None else e.record()

        def register() -> None:
            mine, theirs = self.store.open(session, record, self.now)
            self._watch_lapse(session)
            self._broadcast(theirs)
            self.to_member(m, inc, lambda: self._opened(m, inc, session, sent, mine))

        def retry() -> None:
            if self.current(m, inc) and m.opening == session:
                self.open_session(m, inc)

        self.to_server(m, register)
        self.at_local(m, sent + self.request_timeout, retry)

    def _opened(self, m: _Member, inc: int, session: str, sent: float, mine: list[Observation]) -> None:
        now = self.local(m)
        if m.opening != session or now >= sent + self.request_timeout:
            return  # given up on (`retry`): the store ends that session when it lapses
        m.session, m.opening, m.session_down, m.suspended, m.heard_at = session, "", False, False, now
        lease_until = sent + self.store.session_ttl if self.kind == "etcd" else INF
        e = m.elector
        assert e is not None
        opened = Opened(session, lease_until, mine)
        if e._driver is None:
            e._begin(opened)
            m.driver = e._driver
        else:
            e._rebound(opened, now)
        self.pump_soon(m)
        if self.kind == "zookeeper":
            self._ping(m, inc, session)

    # ------------------------------------------------------------------ requests
    def submit(self, m: _Member, lane: str, epoch: int, actions: list[StoreAction]) -> None:
        """The elector hands `actions` to a lane (`LeaseElector._submit`)."""
        m.lanes[lane].queue.append((epoch, actions))
        self._next_job(m, lane)

    def _next_job(self, m: _Member, lane: str) -> None:
        q, e = m.lanes[lane], m.elector
        assert e is not None
        while q.busy < q.workers and q.queue:
            epoch, actions = q.queue.pop(0)
            q.busy += 1
            self._job(m, lane, m.lanes_of, epoch, e._lane_requests(actions), 0)

    def _job(self, m: _Member, lane: str, gen: int, epoch: int, requests: list[list[StoreAction]], i: int) -> None:
        """Request `i` of a lane's job, or the next job once this one is over (`LeaseElector._perform`)."""
        e = m.elector
        if e is None or gen != m.lanes_of:
            return
        if i >= len(requests) or epoch != e._epoch or e._require_driver().stopping:
            m.lanes[lane].busy -= 1
            self._next_job(m, lane)
            return
        self._request(m, lane, gen, epoch, requests, i)

    def _request(self, m: _Member, lane: str, gen: int, epoch: int, requests: list[list[StoreAction]],
                 i: int) -> None:
        """One request: to the store and back, or failed (outcome unknown) at the request timeout."""
        inc, session, e = m.incarnation, m.session, m.elector
        assert e is not None
        if self.held(m, partial(self._request, m, lane, gen, epoch, requests, i)):
            return
        request = requests[i]
        sent = self.local(m)
        deadline = sent + self.request_timeout  # on the member's clock
        over = [False]
        ours = self._ours(m, session) if isinstance(request[0], Renew) else None

        def finish(carried: Carried) -> None:
            over[0] = True
            if e._reported(epoch, request, sent, carried, requests[i + 1:]):
                self._job(m, lane, gen, epoch, requests, i + 1)
            else:
                self._job(m, lane, gen, epoch, [], 0)

        def execute() -> None:
            outcomes: list[tuple[bool, list[Observation]]] = []
            try:
                for action in request:
                    try:
                        mine, theirs = self.store.execute(session, m.name, action, sent, self.now, ours)
                    except Refuted as refused:
                        outcomes.append((False, refused.observations))
                        continue
                    self._broadcast(theirs)
                    outcomes.append((True, mine))
            except SessionGone:
                self.to_member(m, inc, partial(answer, Carried(lost=f"session {session} is gone")))
                return
            self._watch_lapse(session)
            self.to_member(m, inc, partial(answer, Carried(tuple(outcomes))))

        def answer(carried: Carried) -> None:
            if over[0] or gen != m.lanes_of or m.session != session or self.local(m) >= deadline:
                return  # reported failed at the timeout (the member's clock)
            m.heard_at = self.local(m)
            finish(carried)

        def timeout() -> None:
            if not over[0] and self.current(m, inc) and gen == m.lanes_of:
                finish(Carried(((False, []),) * len(request)))

        self.to_server(m, execute)
        self.at_local(m, deadline,
                      lambda: self.at(m.paused_until, timeout) if self.now < m.paused_until else timeout())

    def _ours(self, m: _Member, session: str) -> dict[Role, int]:
        """The roles whose keys `m`'s view has as its own (what a ZooKeeper renewal checks)."""
        core = m.elector._core if m.elector is not None else None
        if core is None:
            return {}
        return {role: held.token for role in m.roles
                if (held := core.holder(role)) is not None and held.session == session}

    # ------------------------------------------------------------------ the store
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
        """SUSPENDED: the client tells the elector (`Listener.suspended`)."""
        m.suspended = True
        if m.elector is not None:
            m.elector._store_suspended()

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
        m.forget_session()
        m.session_down, m.suspended = True, False
        if m.elector is not None:
            m.elector._store_gone()  # `Listener.gone`: the elector asks for a new session (`_try_reopen`)

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
            e = m.elector
            if e is not None:
                for obs in seen:
                    e._store_saw(obs)  # `Listener.observed`

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
