"""Runs a `LeaseCore` against a store on the library's driver loop (`elect.driver`); two lanes do the store's I/O.

Watch reports are the core's inputs (`Driver.receive`); everything else that happens elsewhere (connection states,
user commands, the end of a handover, a deadline that passed, the outcome of a store request) is posted to the
loop as a function of `now` (`Driver.post`). The driver ticks the core on every turn (a lease core decides when
ticked) and hands on what `ready()` gives: leadership changes through `BaseElector`, store actions to a lane. A
lane is a thread that runs requests in order, each with a timeout, and posts each outcome back (`Done`).
Renewals have a lane of their own (with the store's lease keep-alive and the member's record, which the renewed
entry holds), so a renewal is never sent late behind other work: a batch of thousands of creates at a cold start,
a dead member's roles expired at once, a slow request. Role actions (create, expire, delete) go to the store as
batches (`Store.execute_batch`: one request per `Store.batch_size` actions), so taking over hundreds of roles
costs a few round trips rather than one per role; a small batch is spread over the store lane's workers. Revoked
callbacks run on a handover thread, so a slow callback holds back only its own role's successor, never the renewals
that keep the other roles. Whom the core sees hold each role's key (`Ready.seen`) goes to `observe`; each renewal's
round trip to the store to the metrics.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Protocol, cast

from cas_lease.core import LeaseCore, Timing
from cas_lease.model import (
    ROLE_ACTIONS,
    Done,
    KeepAlive,
    LeaseInput,
    MemberRecord,
    Observation,
    Publish,
    Renew,
    RoleAction,
    StoreAction,
)
from cas_lease.options import _LeaseOptions
from elect.base import BaseElector
from elect.contract import Characteristics
from elect.core import ExtendShared, Ready, Revoke
from elect.driver import Driver, FunctionIO
from elect.errors import AccessRefused, ElectError, InfrastructureUnavailable, NotLeader, TransferRefused
from elect.roles import Role
from elect.runtime import THREADS, Runtime

log = logging.getLogger("cas_lease")

INF = math.inf


class StoreError(Exception):
    """A request failed; whether it took effect is unknown."""


class SessionLost(StoreError):
    """The store no longer knows this member's session (lease expired, session expired)."""


class StoreRefused(StoreError):
    """The store refused this client (credentials, certificate, TLS, permissions): `open` gives up at once, a
    running member goes on trying (its roles lapse by their deadlines)."""


def register_within(register: Callable[[float], Opened], timeout: float, pause: threading.Event,
                    unavailable: Callable[[StoreError], str]) -> Opened:
    """`register(budget)` tried again until it succeeds within `timeout` seconds (pausing briefly between tries, on
    `pause`, which a close sets): a refusal at once as AccessRefused, any other failure once the time is up as
    InfrastructureUnavailable saying `unavailable(last error)`. How every store's `open` reaches its store."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return register(max(0.05, deadline - time.monotonic()))
        except StoreRefused as exc:
            raise AccessRefused(str(exc)) from None
        except StoreError as exc:
            if time.monotonic() >= deadline:
                raise InfrastructureUnavailable(unavailable(exc)) from None
            pause.wait(min(0.1, max(0.0, deadline - time.monotonic())))


class Refuted(StoreError):
    """The store refused the action (it did not take effect) because of what `observations` show."""

    def __init__(self, message: str, observations: list[Observation]) -> None:
        super().__init__(message)
        self.observations = observations


@dataclass(frozen=True)
class Opened:
    """A session began: its id, how long the store's lease surely lasts, and what was seen at once."""

    session: str
    lease_until: float
    observations: list[Observation] = field(default_factory=list)


def _at_once(fn: Callable[[], None]) -> None:
    fn()


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Listener:
    """Where a store's threads report, one callable per kind of news: what it saw (the core's input), that the
    connection dropped but the session may survive (ZooKeeper SUSPENDED), that the session is gone (LOST), and
    housekeeping of the store's own to run on the elector's loop (re-arming watches)."""

    observed: Callable[[Observation], None]
    suspended: Callable[[], None] = _nothing
    gone: Callable[[], None] = _nothing
    on_loop: Callable[[Callable[[], None]], None] = _at_once


Outcome = tuple[bool, list[Observation]]
"""One action's outcome in a batch: whether the store answered it (False: its outcome is unknown), and what it
showed; an action the store answered but refused (another member was first) shows what the store holds now."""


@dataclass(frozen=True)
class Carried:
    """What one request to the store came to: an outcome per action, or (`lost`: why) the session was gone."""

    outcomes: tuple[Outcome, ...] = ()
    lost: str | None = None


class Store(Protocol):
    """The I/O a lease elector needs from a store. `open`, `reopen`, `track`, `members` and `close` come from the
    loop thread; `execute` and `execute_batch` from the two lanes, at the same time (a store whose client is not
    thread-safe keeps a connection per thread)."""

    @property
    def requests(self) -> int:
        """Requests sent so far."""

    def open(self, record: MemberRecord, listener: Listener, timeout: float) -> Opened:
        """Start a session, register `record`, watch (reporting to `listener`); raise InfrastructureUnavailable
        after `timeout`."""

    def reopen(self, record: MemberRecord, timeout: float) -> Opened:
        """A new session after the old one was lost (raise StoreError if not now)."""

    def track(self, roles: Iterable[Role]) -> None:
        """Make sure changes of these roles' keys are observed."""

    @property
    def batch_size(self) -> int:
        """The most role actions `execute_batch` takes at once (a store's limit on one request)."""

    @property
    def parallel(self) -> int:
        """How many batches may be under way at once (each on a thread of its own)."""

    def execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        """Do one action; return what it showed. Raise StoreError / SessionLost on failure."""

    def execute_batch(self, actions: Sequence[RoleAction], timeout: float) -> list[Outcome]:
        """Do up to `batch_size` role actions at once, each succeeding or failing on its own; one outcome per
        action, in order. Raise SessionLost if the session is gone, StoreError if the outcome of all is unknown."""

    def members(self, timeout: float) -> dict[str, MemberRecord]:
        """The membership directory read now from the store (session -> record), not from the watch: what
        `drain` asks before it says no other member contends for a role (the watch may not yet have shown a
        member that joined a moment ago). Raise StoreError on failure."""

    def close(self, timeout: float) -> None:
        """End the session (the store drops what is left of it) and stop watching."""


@dataclass(frozen=True)
class _Waiter:
    """Someone waiting until the handover of `role` is over (a resign, a transfer, a drain)."""

    role: Role
    done: threading.Event = field(default_factory=threading.Event)


def chunk_size(actions: int, batch_size: int, lanes: int) -> int:
    """How many role actions go in one batch: at most `batch_size`, and few enough that a small batch keeps every
    lane busy (a survivor's ten takeovers on kubernetes://, one request each on four lanes, cost three round trips,
    not ten)."""
    return max(1, min(batch_size, -(-actions // max(1, lanes))))


class _Lane:
    """Threads (`workers` of them) that run store requests and report each outcome to the loop; with one worker, in
    the order they come."""

    def __init__(self, name: str, perform: Callable[[int, list[StoreAction]], None], workers: int = 1) -> None:
        self._work: queue.SimpleQueue[tuple[int, list[StoreAction]] | None] = queue.SimpleQueue()
        self._perform = perform
        self.threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        for thread in self.threads:
            thread.start()

    def submit(self, epoch: int, actions: list[StoreAction]) -> None:
        self._work.put((epoch, actions))

    def close(self, timeout: float) -> None:
        for _ in self.threads:
            self._work.put(None)
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            self._perform(*item)


class LeaseElector(BaseElector):
    """A member of a lease group on some store; `etcd.create` and `zookeeper.create` build one."""

    renewal = "seconds a successful renewal took, from sending it to the store's answer (its round trip)"

    def __init__(self, scheme: str, options: _LeaseOptions, member: str, roles: tuple[Role, ...], store: Store,
                 timing: Timing, characteristics: Characteristics, *, runtime: Runtime = THREADS) -> None:
        super().__init__(member, roles, runtime=runtime)
        self.scheme = scheme
        self.options = options
        self.revoke_timeout = options.revoke_timeout
        self._store = store
        self._fresh: tuple[float, list[MemberRecord]] | None = None  # _members_read_now's last read: (when, records)
        self._timing = timing
        self._characteristics = characteristics
        self._intake = threading.Lock()  # what the store reports before the driver exists waits in `_early`
        self._early: list[Callable[[Driver[LeaseInput, StoreAction, None]], object]] = []
        self._driver: Driver[LeaseInput, StoreAction, None] | None = None
        self._handovers: queue.SimpleQueue[Revoke | None] = queue.SimpleQueue()
        self._core: LeaseCore | None = None
        self._lanes: dict[str, _Lane] = {}
        self._epoch = 0  # the session's number: outcomes of requests made for an earlier one are dropped
        self._session_down = False
        self._reopen_at = 0.0
        self._finished = threading.Event()
        self._waiters: list[_Waiter] = []
        self._threads: list[threading.Thread] = []

    @property
    def characteristics(self) -> Characteristics:
        return self._characteristics

    @property
    def requests(self) -> int:
        """Requests sent to the store so far (the load this member puts on it)."""
        return self._store.requests

    # ------------------------------------------------------------------------------------------ hooks
    def _on_start(self) -> None:
        self._begin(self._store.open(self.record(), self.listener(), self.options.connect_timeout))
        self._require_driver().start()

    def record(self) -> MemberRecord:
        """What this member publishes before its core exists: its id, the roles it contends for, its say."""
        o = self.options
        return MemberRecord(self.member, frozenset(self.roles), weight=o.weight, max_roles=o.max_roles)

    def listener(self) -> Listener:
        """Where the store reports what it saw and what became of the session."""
        return Listener(observed=self._store_saw, suspended=self._store_suspended, gone=self._store_gone,
                        on_loop=self._store_task)

    def _begin(self, opened: Opened) -> None:
        """The first session is open: the core, its driver (not yet started) and the I/O around it."""
        o = self.options
        now = self._clock()
        core = LeaseCore(self.member, opened.session, self._timing, self.roles, now, opened.lease_until,
                         weight=o.weight, max_roles=o.max_roles)
        core.step_all(opened.observations, now)
        self._core = core
        # the least time between turns while inputs stream (`elect.driver`): a tick looks at every role with
        # something to decide, hundreds during a cold start or a failover, so one per input would cost that many
        # times over
        io: FunctionIO[StoreAction, None] = FunctionIO(
            apply=self._apply_ready, send=self._send,
            halted=lambda error: self._failed(f"its loop failed: {error!r}"), idle=self._idle, ended=self._ended)
        driver: Driver[LeaseInput, StoreAction, None] = Driver(
            core, io, name=f"elect-lease-loop-{self.member}", max_inbox=None, tick_every_turn=True,
            spacing=min(0.005, self._timing.renew_interval / 20), clock=self._clock, wake=self._wake_loop())
        self._start_io()
        with self._intake:  # what the store reported meanwhile first, in order
            self._driver = driver
            early, self._early = self._early, []
            for deliver in early:
                deliver(driver)

    # ------------------------------------------------------------------------------------------ I/O (threads)
    # What the simulator does on virtual time instead (`elect_bench.simulation.lease_world`): lanes, the handover
    # thread, a new session, the loop's wake-up. Everything else is the same code in both.
    def _wake_loop(self) -> Callable[[], None] | None:
        """What the driver calls when something is queued for it (None: its own thread waits on its inbox)."""
        return None

    def _start_io(self) -> None:
        """The lanes and the handover thread."""
        self._lanes = {"renew": _Lane(f"elect-lease-renew-{self.member}", self._perform),
                       "store": _Lane(f"elect-lease-store-{self.member}", self._perform,
                                      max(1, self._store.parallel))}
        thread = threading.Thread(target=self._run_handovers, name=f"elect-lease-handover-{self.member}",
                                  daemon=True)
        self._threads.append(thread)
        thread.start()

    def _submit(self, lane: str, epoch: int, actions: list[StoreAction]) -> None:
        """Hand `actions` to a lane (`_perform` carries them out there)."""
        self._lanes[lane].submit(epoch, actions)

    def _hand_over(self, revoke: Revoke) -> None:
        """Queue a Revoke for the handover thread (`_run_handovers`)."""
        self._handovers.put(revoke)

    def _close_io(self) -> None:
        for lane in self._lanes.values():
            lane.close(self.options.timeout + 1)

    def _on_stop(self, timeout: float | None) -> None:
        driver = self._require_driver()
        self._stop_core()
        limit = timeout if timeout is not None else self.options.revoke_timeout + 5 * self.options.timeout + 5
        if not self._finished.wait(limit):
            log.warning("elect: %s: handover not finished after %.1f s; closing the session", self.member, limit)
        driver.stop(self.options.timeout * 4 + 1)  # the loop closes the lanes and the session as it ends
        self._finished.wait(self.options.timeout * 4 + 1)
        self._handovers.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(self.options.timeout * 4 + 1)

    def _stop_core(self) -> None:
        """The core hands every role over, closes the session and finishes (the loop ends with it)."""
        self._require_driver().post(lambda now: self._require_core().stop(now))

    def _on_resign(self, role: Role) -> None:
        waiter = _Waiter(role)
        self._require_driver().post(lambda now: self._resign(waiter, now))
        if not self._dispatcher.on_dispatch_thread() and not self._on_loop_thread():
            waiter.done.wait(self.options.revoke_timeout + 4 * self.options.timeout)

    def _on_transfer(self, role: Role, to: str) -> None:
        waiter, refused = _Waiter(role), list[ElectError]()
        self._require_driver().post(lambda now: self._transfer(waiter, to, refused, now))
        if self._on_loop_thread():
            return
        waiter.done.wait(self.options.revoke_timeout + 4 * self.options.timeout)
        if refused:
            raise refused[0]

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        roles = tuple(self.roles)

        def contend(now: float) -> None:
            self._store.track(roles)
            self._require_core().set_roles(roles, now)

        self._require_driver().post(contend)

    def _on_lapsed(self, role: Role) -> None:
        at = self._clock()
        self._require_driver().post(lambda now: self._require_core().lapsed(role, now, at))

    def _on_drain(self) -> bool:
        waiters = tuple(_Waiter(role) for role in self.leading())

        def drain(now: float) -> None:  # not store.track(()): the watches stay, to see who takes the roles
            self._require_core().set_roles((), now)
            self._waiters.extend(waiters)

        self._require_driver().post(drain)
        if not self._dispatcher.on_dispatch_thread() and not self._on_loop_thread():
            limit = time.monotonic() + self.options.revoke_timeout + 4 * self.options.timeout
            for waiter in waiters:
                waiter.done.wait(max(0.0, limit - time.monotonic()))
        return True

    def _successors(self, roles: frozenset[Role]) -> dict[Role, str | None]:
        """The holders of the roles' keys as this member's watch sees them, None for a role no other live member
        contends for (asked on the loop thread, which owns the core)."""

        def look(now: float) -> dict[Role, str | None]:
            core = self._require_core()
            seen: dict[Role, str | None] = {}
            alone = []
            for role in roles:
                holder = core.holder(role)
                if holder is not None and holder.session != core.session:
                    seen[role] = holder.member
                elif not core.contended(role, now):
                    alone.append(role)
            if alone:  # confirmed by a fresh read: a member that joined a moment ago may not be watched yet
                others = self._members_read_now(core.session, now)
                for role in alone:
                    if others is not None and not any(r.wants(role) for r in others):
                        seen[role] = None
            return seen

        if self._finished.is_set():
            return {}
        try:
            return self._require_driver().call(look, self.options.timeout + 1)
        except (FutureTimeout, CancelledError, RuntimeError):
            return {}

    def _contends_now(self, role: Role, member: str, now: float) -> bool:
        """Whether the store's membership directory, read now, has `member` contending for `role`: a member that
        started a moment ago may not have reached this one's watch yet (seen refusing a transfer to it)."""
        others = self._members_read_now(self._require_core().session, now, max_age=0.0)
        return others is not None and any(r.member == member and r.wants(role) for r in others)

    # ------------------------------------------------------------------------------------------ the store's news
    def _store_saw(self, seen: Observation) -> None:
        self._deliver(lambda driver: driver.receive([seen]))

    def _store_suspended(self) -> None:
        """A dropped connection ends every leadership at once, here on the reporting thread: the loop may be
        waiting on a request the drop has not failed yet, and a frozen ZooKeeper leader that wakes may expire
        this session on its stale clock (see the module of `cas_lease.zookeeper`), so belief must not outlast
        the connection by that wait."""
        self._fence_all()
        self._deliver(lambda driver: driver.post(lambda now: self._require_core().suspended(now)))

    def _store_gone(self) -> None:
        """The session is gone: as `_store_suspended`, then a new one."""
        self._fence_all()
        self._deliver(lambda driver: driver.post(self._lose_session))

    def _store_task(self, fn: Callable[[], None]) -> None:
        self._deliver(lambda driver: driver.post(lambda now: fn()))

    def _deliver(self, deliver: Callable[[Driver[LeaseInput, StoreAction, None]], object]) -> None:
        """Hand news to the driver, or keep it (in order) until the driver exists."""
        with self._intake:
            if self._driver is None:
                self._early.append(deliver)
            else:
                deliver(self._driver)

    def _members_read_now(self, session: str, now: float, max_age: float = 0.5) -> list[MemberRecord] | None:
        """The other members' records as the store has them now (one read per half second at most by default, so
        a drain that waits for a successor does not poll the store; None if it cannot be read now: asked again)."""
        if self._fresh is None or now - self._fresh[0] >= max_age:
            try:
                records = self._store.members(self.options.timeout)
            except StoreError:
                return None
            self._fresh = (now, [record for s, record in records.items() if s != session])
        return self._fresh[1]

    def _on_loop_thread(self) -> bool:
        return self._driver is not None and self._driver.on_driver_thread

    def _require_core(self) -> LeaseCore:
        assert self._core is not None
        return self._core

    def _require_driver(self) -> Driver[LeaseInput, StoreAction, None]:
        assert self._driver is not None
        return self._driver

    # ------------------------------------------------------------------------------------------ on the loop
    def _resign(self, waiter: _Waiter, now: float) -> None:
        self._require_core().resign(waiter.role, now)
        self._waiters.append(waiter)

    def _transfer(self, waiter: _Waiter, to: str, refused: list[ElectError], now: float) -> None:
        core, role = self._require_core(), waiter.role
        where = f"{self.scheme}://{self.member}: cannot transfer {role!r} to {to!r}"
        if role not in core.leading():
            refused.append(NotLeader(f"{where}: this member does not lead it now"))
        elif not core.can_take(role, to, now) and not self._contends_now(role, to, now):
            refused.append(TransferRefused(f"{where}: no live member of that id contends for it"))
        else:
            core.transfer(role, to, now)
            self._waiters.append(waiter)
            return
        waiter.done.set()

    def _apply_ready(self, ready: Ready[StoreAction, None], now: float) -> None:
        """Apply what the core decided (leadership changes, handovers, whom it sees lead)."""
        core = self._require_core()
        for change in ready.changes:
            if isinstance(change, Revoke):
                self._hand_over(change)  # its callbacks run on the handover thread; the loop goes on
            elif not self._apply_change(change) and not isinstance(change, ExtendShared):
                core.lapsed(change.role, self._clock())
        for seen in ready.seen:
            self._saw(seen.role, seen.leader, seen.token)

    def _send(self, actions: list[StoreAction], now: float) -> None:
        """Hand store actions to the lanes: renewals to their own, the rest in order to the other (role actions as
        batches). Nothing is sent while the session is down: the core forgets it when it binds a new one."""
        if self._session_down:
            return
        renewals: list[StoreAction] = [a for a in actions if isinstance(a, Renew | KeepAlive | Publish)]
        others: list[StoreAction] = [a for a in actions if not isinstance(a, Renew | KeepAlive | Publish)]
        if renewals:  # what keeps the session alive, and the record (the same entry): never behind a batch
            self._submit("renew", self._epoch, renewals)
        singles: list[StoreAction] = [a for a in others if not isinstance(a, ROLE_ACTIONS)]
        if singles:
            self._submit("store", self._epoch, singles)
        batch: list[StoreAction] = [a for a in others if isinstance(a, ROLE_ACTIONS)]
        size = chunk_size(len(batch), self._store.batch_size, self._store.parallel)
        for start in range(0, len(batch), size):  # chunks go to the store lane's workers side by side
            self._submit("store", self._epoch, batch[start:start + size])

    def _idle(self, now: float) -> float:
        """After each turn: a new session once the old one is gone, waiters whose handover is over, and the end."""
        core = self._require_core()
        extra = INF
        if self._session_down:
            if core.stopping:
                self._require_driver().finish()  # the session is gone, and with it everything it held
                return INF
            if now >= self._reopen_at:
                self._try_reopen()
            if self._session_down:
                extra = self._reopen_at
        pending = []
        for waiter in self._waiters:
            (pending.append(waiter) if core.busy(waiter.role) else waiter.done.set())
        self._waiters = pending
        if core.finished:
            self._require_driver().finish()
        return extra

    def _ended(self) -> None:
        """The loop ended: whatever is still led is fenced, the lanes and the session closed."""
        for role in list(self._held.held):
            self._fence(role)
        self._close_io()
        try:
            self._store.close(self.options.timeout)
        except Exception as exc:
            log.warning("elect: %s: closing the store session failed: %s", self.member, exc)
        self._finished.set()
        for waiter in self._waiters:
            waiter.done.set()

    def _perform(self, epoch: int, actions: list[StoreAction]) -> None:
        """On a lane: carry `actions` out, one request at a time (`requests`), reporting each outcome to the loop;
        once the session is found gone, the rest with it."""
        driver = self._require_driver()
        todo = self._lane_requests(actions)
        for i, request in enumerate(todo):
            if epoch != self._epoch or driver.stopping:
                return
            sent = self._clock()
            carried = self._carry(request)
            if not self._reported(epoch, request, sent, carried, todo[i + 1:]):
                return

    def _lane_requests(self, actions: list[StoreAction]) -> list[list[StoreAction]]:
        """The requests a lane makes of `actions`: each single action on its own, then the role actions in batches
        of the store's `batch_size` (`_send` made them no bigger)."""
        size = max(1, self._store.batch_size)
        batch: list[StoreAction] = [a for a in actions if isinstance(a, ROLE_ACTIONS)]
        singles: list[list[StoreAction]] = [[a] for a in actions if not isinstance(a, ROLE_ACTIONS)]
        return singles + [batch[start:start + size] for start in range(0, len(batch), size)]

    def _carry(self, request: list[StoreAction]) -> Carried:
        """One request to the store (blocking on its client): an outcome per action, or the session lost."""
        timeout = self.options.timeout
        action = request[0]
        try:
            if not isinstance(action, ROLE_ACTIONS):
                return Carried(((True, self._store.execute(action, timeout)),))
            return Carried(tuple(self._store.execute_batch(cast("list[RoleAction]", request), timeout)))
        except SessionLost as exc:
            return Carried(lost=str(exc))
        except StoreError as exc:
            if isinstance(action, ROLE_ACTIONS):
                log.info("elect: %s: a batch of %d role actions failed: %s", self.member, len(request), exc)
                return Carried(((False, []),) * len(request))
            log.info("elect: %s: %s failed: %s", self.member, type(action).__name__, exc)
            return Carried(((False, exc.observations if isinstance(exc, Refuted) else []),))

    def _reported(self, epoch: int, request: list[StoreAction], sent: float, carried: Carried,
                 later: list[list[StoreAction]]) -> bool:
        """Report what `request` (sent at `sent`) came to; False once the session was found gone (reported with
        the role actions of the `later` requests, which are not sent)."""
        if carried.lost is not None:
            rest = [a for r in later for a in r if isinstance(a, ROLE_ACTIONS)]
            self._report_lost(epoch, (*request, *rest), sent, carried.lost)
            return False
        self._report(epoch, tuple((action, ok, sent, seen)
                                  for action, (ok, seen) in zip(request, carried.outcomes, strict=True)))
        return True

    def _report(self, epoch: int, results: tuple[tuple[StoreAction, bool, float, list[Observation]], ...]) -> None:
        """What a lane's requests came to (action, took effect, when sent, what it showed), stepped into the core
        on the loop, what they showed first: dropped if made for an earlier session."""

        def step(now: float) -> None:
            if epoch != self._epoch:
                return
            core = self._require_core()
            for action, ok, sent, seen in results:
                if ok and isinstance(action, Renew):
                    self._renewed(now - sent)
                core.step_all(seen, now)
                core.step(Done(action, ok, sent), now)

        self._require_driver().post(step)

    def _report_lost(self, epoch: int, actions: tuple[StoreAction, ...], sent: float, error: str) -> None:
        """A lane found the session `epoch` gone while doing `actions`."""

        def lost(now: float) -> None:
            if epoch == self._epoch and not self._session_down:
                log.warning("elect: %s: session lost (%s)", self.member, error)
                core = self._require_core()
                for action in actions:
                    core.step(Done(action, False, sent), now)
                self._lose_session(now)

        self._require_driver().post(lost)

    def _lose_session(self, now: float) -> None:
        """Every leadership ends now (the turn's tick fences them); store actions wait for the new session."""
        self._require_core().suspended(now)
        self._session_down = True
        self._epoch += 1  # what the lanes still do for the old session is dropped
        self._reopen_at = now

    def _try_reopen(self) -> None:
        """A new session, asked for on the loop: the core binds it (`_rebound`), or is asked again later."""
        record = self._require_core().record(self._clock())
        try:
            opened = self._store.reopen(record, self.options.timeout)
        except StoreError as exc:
            log.info("elect: %s: no new session yet: %s", self.member, exc)
            self._reopen_at = self._clock() + self._timing.renew_interval
            return
        self._rebound(opened, self._clock())

    def _rebound(self, opened: Opened, now: float) -> None:
        core = self._require_core()
        core.rebind(opened.session, now, opened.lease_until)
        core.step_all(opened.observations, now)
        self._session_down = False
        log.warning("elect: %s: new session %s", self.member, opened.session)

    def _run_handovers(self) -> None:
        """Revoke what the loop hands over, in batches: every queued role's `Revoked` is published at once, then
        each is released as its callbacks return. The dispatcher runs callbacks in order on one thread, so waiting
        in that order loses nothing, and a member shedding hundreds of roles pays one thread handoff per batch
        rather than one per role (200 roles a second, one at a time, on a busy machine)."""
        while True:
            item = self._handovers.get()
            if item is None:
                return
            batch = [item]
            while True:
                try:
                    more = self._handovers.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._handovers.put(None)  # handled once this batch is released
                    break
                batch.append(more)
            released: set[Role] = set()
            try:
                begun = [(revoke.role, self._begin_revoke(revoke.role)) for revoke in batch]
                for role, done in begun:
                    if done is not None and not done.wait(self.revoke_timeout):
                        log.warning("elect: %s: Revoked callbacks for %r still running after %ss; handing over",
                                    self.member, role, self.revoke_timeout)
                    self._release(role)
                    released.add(role)
            finally:
                for revoke in batch:
                    if revoke.role not in released:
                        self._release(revoke.role)

    def _release(self, role: Role) -> None:
        """The Revoked callbacks of `role` returned: its key can go."""
        self._require_driver().post(lambda now: self._require_core().released(role, now))
