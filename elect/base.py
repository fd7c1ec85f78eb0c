"""The part of every elector that is not about a particular algorithm.

`BaseElector` keeps the roles a member contends for, the leaderships it holds, deadlines, and event
delivery. A driver implements the `_on_*` hooks and reports what its algorithm decided: the drivers of
pure cores (Raft, NELI, lease; see `elect.core`) hand each change of a core's `Ready.changes` to
`_apply_change`, which maps it onto `_acquire`, `_extend`, `_revoke` and `_fence`; memory, which has
no core, calls those directly. The base turns them into state that `is_leader()` reads and into
events, in order, with `Fenced` always ahead of whatever follows an expired leadership. It also runs the
application's work while leading (`run`, with `elect.work`) and drains a member (`drain`), once for all.

Observation and metrics are here for the same reason: a driver reports whom it sees lead a role (`_saw`) and,
where its method renews, how long a renewal took (`_renewed`); the base turns that into `LeaderChanged` for
`observe` callbacks and, with every transition, into the elector's Prometheus metrics (`elect.metrics`).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import abstractmethod
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, ClassVar

from elect.contract import (
    Callback,
    Drained,
    Elector,
    Leadership,
    ObserveCallback,
    Running,
    Transferred,
    Unsubscribe,
)
from elect.core import Acquire, LeadershipChange, Revoke
from elect.errors import ConfigError, ElectorFailed, NotLeader, NotStarted, NotSupported
from elect.events import Acquired, Event, Fenced, Revoked
from elect.leaderships import INF, Change, Held, Leaderships
from elect.observe import LeaderChanged
from elect.roles import Role, normalize_roles
from elect.runtime import THREADS, Dispatcher, Runtime
from elect.work import ON_ERROR, Work

if TYPE_CHECKING:
    from elect.metrics import Metrics

log = logging.getLogger("elect")

TIMINGS_KEPT = 1000
"""How many of each step's latest timings an elector keeps for `timings`."""


class BaseElector(Elector):
    """State, events and lifecycle shared by every implementation."""

    scheme = "unknown"  # each implementation names its URL scheme

    #: How long `_revoke(wait=True)` waits for blocking Revoked callbacks before handing over anyway.
    revoke_timeout: float | None = None

    #: How long `drain()` waits for successors by default (None: twice `characteristics.max_failover`, at
    #: least 1 s, or 10 s where failover has no bound). A graceful handover is faster than a failover, so
    #: this is long enough to see a successor that is coming, and short when every member drains at once.
    drain_timeout: float | None = None

    #: Why `observe` is not supported, for methods whose characteristics say `observes_leaders=False`.
    unobservable = "this implementation does not say whom it sees lead a role"

    #: Why `transfer` is not supported, for methods whose characteristics say `transfers=False`.
    untransferable = "this implementation cannot direct a role to a named member"

    #: What `elect_renewal_seconds` times for this method (its help text); None: the method does not renew.
    renewal: str | None = None

    #: The steps of a handover this method times (`timings`, `elect_step_seconds`): (step, what it spans) pairs.
    steps: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, member: str, roles: Iterable[Role] = (), *, runtime: Runtime = THREADS) -> None:
        self.member = member
        self._runtime = runtime  # the clock, the deadline timer and the event threads (virtual in the simulator)
        self._clock = runtime.monotonic
        self._lock = threading.RLock()
        self._roles: dict[Role, None] = dict.fromkeys(normalize_roles(list(roles)))
        self._held = Leaderships(self._changed)  # the leaderships and their deadlines (under the lock)
        self._revoke_done: threading.Event | None = None  # set once the Revoked `_changed` just published was handled
        self._dispatcher: Dispatcher[Event] = runtime.dispatcher(member)
        self._observers: Dispatcher[LeaderChanged] = runtime.dispatcher(f"{member}-observe")
        self._observed = False   # an observer subscribed: LeaderChanged is published from then on
        self._seen: dict[Role, LeaderChanged] = {}  # whom this member last saw lead each role it contends for
        self._leaderless: dict[Role, float] = {}   # since when a role it had seen led has had no leader
        self._metrics: Metrics | None = None
        self._timings: dict[str, deque[float]] = {}  # step -> seconds (`_timed`)
        self._deadlines = runtime.timer(self._deadline_passed, member)
        self._work = Work(member, self._lock, self.leadership, self._hold_off,
                          lambda callback: self._dispatcher.subscribe(callback))
        self._held_off: dict[Role, threading.Timer] = {}  # released after failed work, contended for again later
        self._state = "new"  # new -> running [-> draining] -> stopping -> stopped
        self._failure: ElectorFailed | None = None  # why the driver stopped on its own (`_failed`)

    # ----------------------------------------------------------------- driver hooks
    @abstractmethod
    def _on_start(self) -> None:
        """Join the group and begin contending for `self.roles`."""

    @abstractmethod
    def _on_stop(self, timeout: float | None) -> None:
        """Hand every led role over (via `_revoke`) and leave the group."""

    @abstractmethod
    def _on_resign(self, role: Role) -> None:
        """Give up `role` (via `_revoke`) so another member can take it."""

    @abstractmethod
    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        """Contend for `added`; hand over removed roles that this member leads."""

    def _on_drain(self) -> bool:
        """Hook for `drain`: hand every led role over (via `_revoke`) and contend for nothing, but stay in the
        group so that `_successors` can see who takes each role over. Return False (the default) where the
        method cannot see that: `drain` then leaves the handover to `stop`."""
        return False

    def _on_transfer(self, role: Role, to: str) -> None:
        """Hook for `transfer` (methods whose characteristics say `transfers`): refuse with `TransferRefused` if
        `to` cannot take `role`, else hand the role over as `_on_resign` does, so that `to` is the one to take it."""
        raise NotSupported(f"{self.scheme}:// cannot transfer a role: {self.untransferable}")

    def _successors(self, roles: frozenset[Role]) -> dict[Role, str | None]:
        """Hook for `drain`, after `_on_drain` returned True: for each of `roles`, the other member this member
        sees leading it now, or None when no other live member contends for it (no successor will come); a
        role missing: not yet. Knowing the None case is what spares the last member of a group the wait."""
        return {}

    # ----------------------------------------------------------------- public API
    def start(self) -> None:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"elector {self.member} was already started")
            self._state = "running"
        self._dispatcher.start()
        try:
            self._on_start()
        except BaseException:
            with self._lock:
                self._state = "stopped"
            self._close_plumbing()
            raise

    def stop(self, timeout: float | None = None) -> None:
        with self._lock:
            if self._state in ("stopping", "stopped"):
                return
            was_running = self._state in ("running", "draining")
            self._state = "stopping"
        try:
            if was_running:
                self._on_stop(timeout)
        finally:
            with self._lock:
                leftover = list(self._held.held)
            for role in leftover:  # a driver that could not hand over cleanly
                self._fence(role)
            with self._lock:
                self._state = "stopped"
            self._close_plumbing(timeout)

    def _close_plumbing(self, timeout: float | None = None) -> None:
        with self._lock:
            held, self._held_off = list(self._held_off.values()), {}
        for timer in held:
            timer.cancel()
        self._deadlines.close()
        self._dispatcher.close(timeout)
        with self._lock:
            observed = self._observed
        if observed:
            self._observers.close(timeout)

    @property
    def running(self) -> bool:
        """Started and contending: not yet draining or stopping."""
        return self._state == "running"

    def run(self, roles: Iterable[Role] | Role, fn: Callable[[Leadership, threading.Event], object], *,
            grace: float | None = None, on_error: str = "release") -> Running:
        """Work while leading: call `fn(lead, stop)` for each leadership of each of `roles` (one role or several:
        one worker thread per role), until the returned `Running` is cancelled (`cancel()`, or leave its `with`).

        `lead` is the `Leadership` (its `token` guards your writes; its `deadline` is the one at acquisition,
        `leadership(role)` has the renewed one). `stop` is a `threading.Event` set on `Revoked`, on `Fenced` and
        at the leadership's deadline at the latest, straight from the elector's transition (not through the
        event thread, which may be busy holding another role's handover). On `Revoked` the handover waits until
        `fn` returned, up to `grace` (default and upper bound: the method's `revoke_timeout`), on methods with
        `characteristics.graceful_handover`; without it the successor may start while `fn` finishes. Past the
        grace the handover goes ahead and `fn` runs fenced (its token is stale where you guard writes). A `grace`
        on a method without graceful handover raises `NotSupported`: nothing there would honour it.

        `fn` is called again for each new leadership, never while its previous call still runs. `fn` returning
        ends the work, not the leadership. `fn` raising while still leading is logged, and then `on_error` says
        what happens, each step after a back-off (0.1 s, doubling to 10 s with each failure in a row, back to 0.1 s
        after a call that did not raise), so a `fn` that always fails neither spins nor churns leaders:

        - `"release"` (default): the role is handed over and left to the other members for the back-off: this
          member stops contending for it (it is missing from `roles` meanwhile), then contends again, and takes
          it back if nobody else did. A leader that does not do the work blocks every member that could.
        - `"restart"`: this member keeps the leadership, and `fn` is called again under it after the back-off:
          for failures a retry cures (a connection that dropped), where a handover would only add a gap.

        A record is logged per failed call, with the traceback for the first of a run. Raising after `stop` was
        set is just a way of stopping.
        """
        wanted = normalize_roles(roles)
        if not wanted:
            raise ConfigError("give at least one role", parameter="roles")
        if grace is not None and not grace > 0:
            raise ConfigError(f"must be > 0, got {grace!r}", parameter="grace")
        if on_error not in ON_ERROR:
            raise ConfigError(f"must be one of {', '.join(ON_ERROR)}, got {on_error!r}", parameter="on_error")
        if grace is not None and not self.characteristics.graceful_handover:
            raise NotSupported(f"{self.scheme}:// as configured has no graceful handover: a successor does not wait "
                               "for fn, so no grace can hold it back (run without grace, or choose a method "
                               "that has it: require={'graceful_handover': True})")
        with self._lock:
            missing = [r for r in wanted if r not in self._roles]
        if missing:
            raise ConfigError(f"member {self.member} does not contend for {missing!r}; add_roles() first",
                              parameter="roles")
        limit = self.revoke_timeout
        bound = grace if limit is None else limit if grace is None else min(grace, limit)
        return self._work.run(wanted, fn, bound, on_error)

    def _hold_off(self, role: Role, seconds: float) -> None:
        """Work for `role` failed (`run(on_error="release")`): hand the role over and contend for it again only
        after `seconds`, so a lone member's failing work does not turn into an acquire/release loop."""
        with self._lock:
            if self._state != "running" or role not in self._roles or role in self._held_off:
                return
            timer = threading.Timer(seconds, self._end_hold_off, (role,))
            timer.daemon = True
            self._held_off[role] = timer
        self._drop_roles([role], held=True)
        timer.start()

    def _end_hold_offs(self, roles: Iterable[Role]) -> None:
        """The application added or removed `roles` itself: no hold-off brings them back later (under the lock)."""
        for role in roles:
            timer = self._held_off.pop(role, None)
            if timer is not None:
                timer.cancel()

    def _end_hold_off(self, role: Role) -> None:
        with self._lock:
            if self._held_off.pop(role, None) is None or self._state != "running":
                return
        self.add_roles([role])

    def drain(self, timeout: float | None = None) -> Drained:
        """Leave the group without a gap: hand every led role over (Revoked callbacks and `run` workers finish
        first, as in `stop`), wait up to `timeout` (default `drain_timeout`) until this member sees a successor
        lead each of them (or sees that no other member contends for it), then stop. Returns how long it took,
        what was handed over and who took it.

        What each method can see: memory the group's owner of the role, raft the node that leads the role's
        partition group after the transfer (heard in its heartbeats; its `Acquired` follows within a heartbeat
        round), etcd, ZooKeeper and Kubernetes the new holder of the role's key (Lease). NELI (kafka://) and
        PySyncObj cannot: a member that hands its partitions over has left the consumer group, or shut that
        partition's SyncObj down, so `drain` returns after the handover (`successors` None). While draining,
        `resign` raises `NotStarted` and role changes only update `roles`.
        """
        began = self._clock()
        with self._lock:
            self._require_running()
            self._state = "draining"
            led = frozenset(lead.role for lead in self._in_force(began))
        seen: dict[Role, str | None] | None = None
        try:
            if self._on_drain():
                limit = self._clock() + (timeout if timeout is not None else self._default_drain_timeout())
                while True:
                    seen = self._successors(led)
                    if led <= set(seen) or self._clock() >= limit:
                        break
                    time.sleep(0.02)  # what the member sees changes on its driver's threads; the limit bounds this
        except Exception as exc:  # draining must end in a stop whatever happened
            log.warning("elect: %s: drain incomplete: %s", self.member, exc)
        finally:
            self.stop()
        successors = None if seen is None else {r: m for r, m in seen.items() if m is not None}
        uncontended = frozenset(() if seen is None else (r for r, m in seen.items() if m is None))
        return Drained(seconds=self._clock() - began, roles=led, successors=successors, uncontended=uncontended)

    def transfer(self, role: Role, to: str, timeout: float | None = None) -> Transferred:
        """Hand `role` to member `to`: the Revoked callbacks and `run` workers finish first, as on `resign`, then
        the method lets `to` take the role ahead of the others; wait up to `timeout` (default as `drain`) until
        this member sees `to` lead it (`Transferred.confirmed`). If `to` dies meanwhile, another member takes the
        role over as after a failover.

        A transfer overrides the method's balancing while `to` leads the role: raft's return to the preferred
        member (`rebalance`) and the leases' fair share do not move it back (they may move other roles); after
        the next failover of that role, they apply again. How: raft sends TimeoutNow to `to` (which must be a
        replica of the role's partition, heard within an election timeout, and contend for a role on it); etcd
        and ZooKeeper publish the hint in this member's record and delete the key, and the other members leave
        the free role to `to` for `resign_backoff`. NELI and PySyncObj raise `NotSupported`: who owns a
        partition is decided by the Kafka group's assignor (or PySyncObj's elections), not by the member."""
        if not self.characteristics.transfers:
            raise NotSupported(f"{self.scheme}:// cannot transfer a role: {self.untransferable} (choose a method "
                               "that can: require={'transfers': True})")
        began = self._clock()
        self._require_running()
        if to == self.member:
            raise ConfigError(f"member {self.member} cannot transfer {role!r} to itself", parameter="to")
        if self.leadership(role) is None:
            raise NotLeader(f"member {self.member} does not lead {role!r}: only its leader can transfer it")
        self._on_transfer(role, to)
        limit = began + (timeout if timeout is not None else self._default_drain_timeout())
        while True:
            leader = self._successors(frozenset((role,))).get(role)
            if leader == to or self._clock() >= limit:
                break
            time.sleep(0.02)  # what the member sees changes on its driver's threads; the limit bounds this
        return Transferred(role=role, to=to, seconds=self._clock() - began, leader=leader)

    def _default_drain_timeout(self) -> float:
        if self.drain_timeout is not None:
            return self.drain_timeout
        failover = self.characteristics.max_failover
        return 10.0 if failover is None else max(1.0, 2 * failover)

    def subscribe(self, callback: Callback) -> Unsubscribe:
        """Subscribe; the roles already led are replayed to the new subscriber as `Acquired` first."""
        with self._lock:
            replay = [Acquired(role=l.role, member=self.member, token=l.token, mono=l.since, ts=l.since_ts)
                      for l in self._in_force(self._clock())]
            return self._dispatcher.subscribe(callback, replay)

    def observe(self, callback: ObserveCallback) -> Unsubscribe:
        """Call `callback(LeaderChanged)` each time the member this one sees leading a role it contends for changes
        (`leader` None: it sees no leader; `leader` may be this member), in order, on a thread of its own (not the
        event thread, so a slow observer holds no handover back); the leaders seen so far are replayed first.

        What each method sees: memory the group's owner of the role; etcd, ZooKeeper and Kubernetes the holder of the
        role's key (Lease), as its watch reports it (None once the key is gone); raft the leader of the role's
        partition group, heard in its heartbeats (None from when this node's election timer ran out, or while it
        campaigns).
        Raises `NotSupported` where the method cannot see it (`characteristics.observes_leaders` False; the message
        says why)."""
        if not self.characteristics.observes_leaders:
            raise NotSupported(f"{self.scheme}:// cannot observe who leads: {self.unobservable} (choose a method "
                               "that can: require={'observes_leaders': True})")
        with self._lock:
            if self._state in ("stopping", "stopped"):
                raise NotStarted(f"elector {self.member} is {self._state}; observe before or while it runs")
            self._observed = True
            self._observers.start()
            return self._observers.subscribe(callback, list(self._seen.values()))

    def metrics(self) -> Metrics:
        """This elector's Prometheus metrics (`elect.metrics.Metrics`: `.registry` to expose in your own server,
        `.serve(port)` to serve it on its own), made on the first call and recorded from then on (the roles led then
        count as led). A registry per elector, so several electors in one process do not clash. Needs the
        `metrics` extra (prometheus_client)."""
        from elect.metrics import Metrics

        with self._lock:
            if self._metrics is None:
                made = Metrics(self.member, failover=self.characteristics.observes_leaders, renewal=self.renewal)
                made.contend(self._roles)
                for lead in self._in_force(self._clock()):
                    made.acquired(lead.role, None)
                self._metrics = made
            return self._metrics

    def is_leader(self, role: Role) -> bool:
        return self.leadership(role) is not None

    def leadership(self, role: Role) -> Leadership | None:
        now = self._clock()
        with self._lock:
            held = self._held.in_force(role, now)
            return None if held is None else self._leadership(role, held)

    def leading(self) -> frozenset[Role]:
        with self._lock:
            return frozenset(lead.role for lead in self._in_force(self._clock()))

    def _in_force(self, now: float) -> list[Leadership]:
        """Every leadership still in force at `now`, with its live deadline (under the lock)."""
        return [self._leadership(role, held) for role, held in self._held.held.items() if now < held.until()]

    def _leadership(self, role: Role, held: Held) -> Leadership:
        """The application's view of one leadership, with the deadline in force now (shared or its own)."""
        until = held.until()
        return Leadership(role, self.member, held.token, held.since, held.since_ts, None if until == INF else until)

    @property
    def failure(self) -> ElectorFailed | None:
        return self._failure

    def _failed(self, why: str) -> None:
        """The driver stopped on its own and drives nothing from now on: fence every leadership and say why
        (`failure`); the first reason is kept. Called on the driver's thread as it ends."""
        with self._lock:
            if self._failure is None:
                self._failure = ElectorFailed(f"{self.scheme}://{self.member} stopped: {why}")
            leftover = list(self._held.held)
        log.error("elect: %s", self._failure)
        for role in leftover:
            self._fence(role)

    def resign(self, role: Role) -> None:
        self._require_running()
        if role in self._held.held:
            self._on_resign(role)

    @property
    def roles(self) -> frozenset[Role]:
        with self._lock:
            return frozenset(self._roles)

    def add_roles(self, roles: Iterable[Role]) -> None:
        with self._lock:
            wanted = normalize_roles(list(roles))
            self._end_hold_offs(wanted)  # asked for again: no longer held off
            added = tuple(r for r in wanted if r not in self._roles)
            self._roles.update(dict.fromkeys(added))
            running = self._state == "running"
            if self._metrics is not None:
                self._metrics.contend(added)
        if added and running:
            self._on_roles_changed(added, ())

    def remove_roles(self, roles: Iterable[Role]) -> None:
        self._drop_roles(roles, held=False)

    def _drop_roles(self, roles: Iterable[Role], *, held: bool) -> None:
        """Stop contending for `roles`; `held`: for a hold-off (`_hold_off`), to be contended for again after it."""
        with self._lock:
            wanted = normalize_roles(list(roles))
            if not held:  # removed by the application: not to come back after a hold-off either
                self._end_hold_offs(wanted)
            removed = tuple(r for r in wanted if r in self._roles)
            for role in removed:
                del self._roles[role]
                self._seen.pop(role, None)  # seen again, from the driver, if it is contended for again
                self._leaderless.pop(role, None)
            running = self._state == "running"
            if self._metrics is not None:
                self._metrics.drop(role for role in removed if role not in self._held.held)
        if removed and running:
            self._on_roles_changed((), removed)

    def _require_running(self) -> None:
        if self._state != "running":
            hint = "call start() first" if self._state == "new" else "it no longer contends"
            raise NotStarted(f"elector {self.member} is {self._state}; {hint}")

    # ----------------------------------------------------------------- driver-facing transitions
    def _acquire(self, role: Role, token: int, deadline: float | None = None) -> Leadership:
        """Record that this member leads `role` under `token` (until `deadline`, if given); a leadership in force under
        the same token is extended instead (`elect.leaderships`)."""
        now = self._clock()
        with self._lock:
            self._held.acquire(role, token, deadline, now, self._runtime.wall())
            self._arm()
            return self._leadership(role, self._held.held[role])

    def _extend(self, role: Role, deadline: float) -> bool:
        """Move the deadline of a leadership still in force, on a deadline of its own from here; fences (and returns
        False) if it lapsed."""
        with self._lock:
            extended = self._held.extend(role, deadline, self._clock())
            self._arm()
            return extended

    def _revoke(self, role: Role, *, wait: bool = True, timeout: float | None = None) -> bool:
        """Orderly end of leadership: emit `Revoked` and, if `wait`, block until callbacks return.

        A leadership whose deadline already passed is fenced instead (the successor may be running).
        Returns True if a leadership was ended.
        """
        with self._lock:
            leading = role in self._held.held
            done = self._begin_revoke(role)
        if done is None:
            return leading  # not leading, or lapsed and fenced instead
        self._await_revoked(role, done, timeout)
        return True

    def _await_revoked(self, role: Role, done: threading.Event, timeout: float | None = None) -> None:
        """Block until the Revoked callbacks of `role` returned, up to `timeout` (default `revoke_timeout`); not on
        the event thread itself, where they run."""
        if self._dispatcher.on_dispatch_thread():
            return
        limit = timeout if timeout is not None else self.revoke_timeout
        if not done.wait(limit):
            log.warning("elect: %s: Revoked callbacks for %r still running after %ss; handing over",
                        self.member, role, limit)

    def _begin_revoke(self, role: Role) -> threading.Event | None:
        """`_revoke` without the wait, for drivers whose thread must not block: publish `Revoked` and return
        the flag set once its callbacks returned (None: not leading, or lapsed and fenced instead)."""
        with self._lock:
            self._revoke_done = None
            self._held.revoke(role, self._clock())
            done, self._revoke_done = self._revoke_done, None
            self._arm()
            return done

    def _fence(self, role: Role, until: float | None = None) -> bool:
        """Abrupt end of leadership: emit `Fenced`; `until` defaults to the lapsed deadline or now."""
        now = self._clock()
        with self._lock:
            fenced = self._held.fence(role, now if until is None else until, now)
            self._arm()
            return fenced

    def _fence_all(self) -> None:
        """Every leadership ends now (a dropped connection, a crash in simulation)."""
        with self._lock:
            held = list(self._held.held)
        for role in held:
            self._fence(role)

    def _apply_change(self, change: LeadershipChange, *, wait: bool = True) -> bool:
        """Apply one change of a core's `Ready.changes`, in order (`Leaderships.apply`); False only where the core
        should hear that the leadership had lapsed already (it was fenced). `wait` is for a Revoke (see `_revoke`; a
        driver whose thread must not block hands Revokes to `_begin_revoke` instead)."""
        with self._lock:
            self._revoke_done = None
            applied = self._held.apply((change,), self._clock(), self._runtime.wall())
            done, self._revoke_done = self._revoke_done, None
            self._arm()
        if done is not None and wait:
            self._await_revoked(change.role, done)
        return not applied.lapsed

    def _changed(self, now: float, change: Change, held: Held) -> None:
        """A leadership began or ended (`Leaderships` hands each change here, under the lock): the event, the
        metrics, and the application's work."""
        role, metrics = change.role, self._metrics
        if isinstance(change, Acquire):
            leaderless = self._leaderless.pop(role, None)
            if metrics is not None:
                metrics.acquired(role, None if leaderless is None else now - leaderless)
            self._dispatcher.publish(Acquired(role=role, member=self.member, token=held.token, mono=now,
                                              ts=held.since_ts))
            self._work.acquired(self._leadership(role, held))
            return
        self._work.ended(role, held.token)  # workers start finishing at once, in parallel
        if isinstance(change, Revoke):
            if metrics is not None:
                metrics.revoked(role)
                self._drop_if_removed(role)
            self._revoke_done = self._dispatcher.publish(Revoked(role=role, member=self.member, token=held.token,
                                                                 mono=now, ts=self._runtime.wall()))
            return
        if metrics is not None:
            metrics.fenced(role, now - change.until)
            self._drop_if_removed(role)
        self._dispatcher.publish(Fenced(role=role, member=self.member, token=held.token, mono=now,
                                        ts=self._runtime.wall(), until=change.until))

    def _arm(self) -> None:
        """The deadline timer at the next deadline of any leadership (under the lock, after every change)."""
        nxt = self._held.next_deadline()
        if nxt < INF:
            self._deadlines.set(self._held, nxt)
        else:
            self._deadlines.cancel(self._held)

    def _drop_if_removed(self, role: Role) -> None:
        """A removed role's gauge goes once its leadership has ended (it stayed at 1 while it lasted)."""
        if role not in self._roles and self._metrics is not None:
            self._metrics.drop((role,))

    def _saw(self, role: Role, leader: str | None, token: int | None = None) -> None:
        """Driver: this member sees `leader` lead `role` now (None: nobody), under `token` where known. Call it on
        every change the method sees, and for roles added at run time with what is known of them already; roles
        not contended for are ignored, repeats are dropped."""
        now = self._clock()
        with self._lock:
            if role not in self._roles:
                return
            token = token if leader is not None else None
            before = self._seen.get(role)
            if before is not None and before.leader == leader and before.token == token:
                return
            if leader is None:
                if before is not None and before.leader is not None:
                    self._leaderless[role] = now  # failover is timed from here to our own acquisition
            elif leader != self.member:
                self._leaderless.pop(role, None)  # another took it: no failover of ours to time
            seen = LeaderChanged(role, leader, token, self.member, mono=now)
            self._seen[role] = seen
            if self._observed:
                self._observers.publish(seen)

    def _renewed(self, seconds: float) -> None:
        """Driver: one renewal of a leadership took `seconds` (what that means per method: `renewal`)."""
        metrics = self._metrics
        if metrics is not None:
            metrics.renewed(seconds)

    def _timed(self, step: str, seconds: float) -> None:
        """Driver: one step of a handover took `seconds` (the steps a method times: its `steps`). Kept for `timings`
        (the latest `TIMINGS_KEPT` of each step) and, once made, in the metrics (`elect_step_seconds`)."""
        with self._lock:
            kept = self._timings.setdefault(step, deque(maxlen=TIMINGS_KEPT))
            kept.append(seconds)
            metrics = self._metrics
        if metrics is not None:
            metrics.step(step, seconds)

    def timings(self) -> dict[str, list[float]]:
        """Seconds each step of this member's handovers took, per step (the latest `TIMINGS_KEPT` of each), for the
        methods that time them (`steps` names each and what it spans): where a failover or a graceful handover spends
        its time as the member sees it. The same go to `elect_step_seconds` in the metrics."""
        with self._lock:
            return {step: list(times) for step, times in self._timings.items()}

    def _deadline_passed(self, key: Hashable, deadline: float) -> None:
        """The timer: fence every leadership past its deadline, at its deadline, and tell the driver."""
        with self._lock:
            lapsed = self._held.expire(self._clock())
            self._arm()
        for role in lapsed:
            self._on_lapsed(role)

    def _on_lapsed(self, role: Role) -> None:
        """Hook: a leadership lapsed on the member's own clock (drivers may react, e.g. re-contend)."""
