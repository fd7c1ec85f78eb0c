"""The one loop that runs an election core (`elect.core`): one thread owns the core, everything else talks to it.

Other threads hand it what arrived (`receive`: a batch of inputs, as one RPC or one poll brought them) and work to
do on its thread (`submit` / `call`: a function of `now`, its result in a Future: commands, questions about the
core's state). The thread steps the batches in, ticks the core when `next_wakeup` is due (rounded up to a timer
granularity, so that many timers share one wake-up), and hands every `Ready` on in the order `elect.core` requires
through the method's `DriverIO`: persist, then the leadership changes (and whom the core sees lead), then send.
After each turn the IO's `idle` does its housekeeping and says when it wants the next turn.

A persist that fails (a full or read-only disk) halts the driver: what the core asked to persist may be a vote
that must never leave unsaved, so nothing more is sent or driven and the IO is told (`DriverIO.halted`), as etcd
stops when its log cannot be written. So does any other error in a turn: a core that raised half-way through a
step is in a state nobody can vouch for, and going on from it could break the promises the core makes; the IO
fences what it led and reports it, and a supervisor starts a new member.

`turn` is also what a simulator calls on virtual time, with an IO of simulated disks and links and no thread
(`elect_bench.simulation`): the same order of persist, changes and send in both.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from elect.core import Ready
from elect.roles import Role

log = logging.getLogger("elect")

INF = math.inf
T = TypeVar("T")
I = TypeVar("I")
"""What a core steps in (a Raft message; a store's observation)."""
M = TypeVar("M")
"""What a core sends."""
P = TypeVar("P")
"""What a core persists."""
I_in = TypeVar("I_in", contravariant=True)


class Halted(Exception):
    """The driver stopped on its own: what the core asked to persist could not be written. A node that went on would
    keep in memory what the disk does not have (a Raft vote it could give again after a restart), so it stops."""


class BatchCore(Protocol[I_in, M, P]):
    """The core as the driver sees it: `elect.core.Core`, with inputs taken a batch at a time (the order within a
    batch is the core's to define: a Raft host steps its groups' messages before its node links')."""

    def step_all(self, inputs: Iterable[I_in], now: float) -> None: ...

    def tick(self, now: float) -> None: ...

    def next_wakeup(self) -> float: ...

    def has_ready(self) -> bool: ...

    def ready(self) -> Ready[M, P]: ...


class DriverIO(Protocol[M, P]):
    """What a method does with its core's output, called on the driver's thread (or the simulator's)."""

    def persist(self, states: dict[Role, P]) -> None:
        """Write durably (fsync) before anything of this `Ready` is sent; raise OSError if it cannot be."""

    def apply(self, ready: Ready[M, P], now: float) -> None:
        """Apply `ready.changes` and `ready.seen` (persisted already; its messages not sent yet)."""

    def send(self, messages: list[M], now: float) -> None:
        """Send what the core produced (the IO batches, defers or holds them as its transport likes)."""

    def idle(self, now: float) -> float:
        """Housekeeping after each turn (what it makes the core produce is handed on after it); return the latest
        time the driver must turn again (INF: only on input)."""

    def halted(self, error: Exception) -> None:
        """The driver stopped on its own (`Halted`, or the error a turn raised): end every leadership now; nothing
        more will be driven."""

    def ended(self) -> None:
        """The loop ended (stopped, finished, or halted after `halted`): the last call on the driver's thread."""


def _nothing_to_persist(states: dict[Role, P]) -> None:
    if states:
        raise Halted(f"this core asked to persist {len(states)} entries but nowhere was given to keep them")


def _no_housekeeping(now: float) -> float:
    return INF


def _nothing(*args: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class FunctionIO(Generic[M, P]):
    """A `DriverIO` made of the functions an elector hands its driver (most of them the elector's own methods), so
    no elector needs an adapter class of its own. What is left out: nothing to persist, no housekeeping, nothing to
    do when the loop ends."""

    apply: Callable[[Ready[M, P], float], None]
    send: Callable[[list[M], float], None]
    halted: Callable[[Exception], None]
    persist: Callable[[dict[Role, P]], None] = _nothing_to_persist
    idle: Callable[[float], float] = _no_housekeeping
    ended: Callable[[], None] = _nothing


class Driver(Generic[I, M, P]):
    """The thread that owns `core` and hands its output to `io`.

    - `max_inbox`: at most this many batches wait; later ones are dropped (counted in `dropped`), as a network
      would drop them (None: never dropped, for inputs that are the only report of a change).
    - `tick_every_turn`: tick the core on every turn, not only when its wake-up is due: a core that decides only
      when ticked (a lease core: inputs update its view, the tick acts on it) acts on what just arrived.
    - `spacing`: while inputs stream in, turn at most every `spacing` seconds, or twice as long as the last turn
      took, so a turn that looks at thousands of roles leaves the I/O threads the rest of the time instead of
      running back to back (inputs keep queueing meanwhile; a due wake-up is never held back).
    - `wait`, `wake`: where the loop waits between turns, if not on its own inbox: a Kafka consumer must be polled
      on the thread that owns it (its callbacks run inside the poll, and step the core there), so a NELI member's
      loop waits in `wait(seconds)` (which may return early, and may wait less than asked), and `wake()` is
      called when an input or a post arrives, to cut a wait short where it can.

    Inputs never hold a due wake-up back either: a turn steps batches until the core's wake-up is due, ticks, and
    leaves the rest for the next turn (a cold start of thousands of roles queues thousands of reports, and taking
    them all first sent a lease's renewals 1.3 s late)."""

    def __init__(self, core: BatchCore[I, M, P], io: DriverIO[M, P], *, name: str, granularity: float = 0.0,
                 max_inbox: int | None = 256, tick_every_turn: bool = False, spacing: float = 0.0,
                 wait: Callable[[float], None] | None = None, wake: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.core = core
        self.io = io
        self.name = name
        self.granularity = granularity
        self.max_inbox = max_inbox
        self.tick_every_turn = tick_every_turn
        self.spacing = spacing
        self.clock = clock
        self._wait = wait
        self._wake = wake
        self.dropped = 0
        self.iterations = 0
        self.halted: Exception | None = None  # why the driver stopped on its own, if it did
        self._cond = threading.Condition()
        self._inbox: list[list[I]] = []
        self._calls: list[tuple[Callable[[float], object], Future[object] | None]] = []
        self._stopping = False
        self._gathering = False  # waiting out `spacing` with inputs in hand: more inputs need not wake the loop
        # made by `start`: a thread made here would hold the driver (its target) while the driver holds it, a cycle
        # that leaves a driver never started (a simulator's) and its core to the cyclic garbage collector
        self._thread: threading.Thread | None = None

    # -- from other threads --
    def start(self) -> None:
        thread = self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        thread.start()

    def receive(self, batch: list[I]) -> None:
        """Queue a batch of inputs for the core."""
        with self._cond:
            if self.max_inbox is not None and len(self._inbox) >= self.max_inbox:
                self.dropped += 1
                return
            self._inbox.append(batch)
            if not self._gathering:
                self._cond.notify()
        if self._wake is not None:
            self._wake()

    def submit(self, fn: Callable[[float], T]) -> Future[T]:
        """Run `fn(now)` on the driver's thread; what it makes the core produce is handed on right after it."""
        fut: Future[T] = Future()
        with self._cond:
            if self._stopping:
                fut.set_exception(RuntimeError(f"{self.name} has stopped"))
                return fut
            self._calls.append((fn, fut))  # type: ignore[arg-type]
            if not self._gathering:
                self._cond.notify()
        if self._wake is not None:
            self._wake()
        return fut

    def post(self, fn: Callable[[float], object]) -> bool:
        """Run `fn(now)` on the driver's thread, as a command nobody waits for: if it raises, the driver halts, as
        for an error of the core itself. False (and dropped) once the driver has stopped."""
        with self._cond:
            if self._stopping:
                return False
            self._calls.append((fn, None))
            if not self._gathering:
                self._cond.notify()
        if self._wake is not None:
            self._wake()
        return True

    def call(self, fn: Callable[[float], T], timeout: float | None = None) -> T:
        """`submit` and wait for the result (an error from the driver's own thread: it would wait for itself)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}: call from the driver's own thread would deadlock")
        return self.submit(fn).result(timeout)

    def finish(self) -> None:
        """From the driver's thread (a call, or the IO's `idle`): end the loop after this turn."""
        with self._cond:
            self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` for the loop to end by itself (`finish`); True if it has."""
        thread = self._thread
        if thread is not None and thread.is_alive() and threading.current_thread() is not thread:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def stop(self, timeout: float | None = 5.0) -> None:
        """End the loop after the turn under way and wait up to `timeout` for it to end (None: however long)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._wake is not None:
            self._wake()
        thread = self._thread
        if thread is not None and thread.is_alive() and threading.current_thread() is not thread:
            thread.join(timeout)

    @property
    def on_driver_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # -- on the driver's thread (or the simulator's) --
    def flush(self, now: float) -> None:
        """Hand the core's `Ready` on: persist, then changes and whom it sees lead, then send."""
        if not self.core.has_ready():
            return
        ready = self.core.ready()
        if ready.persist:
            try:
                self.io.persist(ready.persist)
            except OSError as exc:
                raise Halted(str(exc)) from exc
        if ready.changes or ready.seen:
            self.io.apply(ready, now)
        if ready.messages:
            self.io.send(ready.messages, now)

    def turn(self, now: float, batches: Iterable[list[I]] = (), tick: bool = True) -> tuple[float, float]:
        """One turn at `now`, as the thread makes it, for a simulator: step `batches` in, run what was posted, tick
        (if `tick`: the core's wake-up is due), hand the output on, let the IO do its housekeeping and hand on what
        that produced. Returns when the core wants its next tick (its wake-up rounded up to the granularity) and
        when the IO wants the next turn. An error is raised, not a halt."""
        for batch in batches:
            self.core.step_all(batch, now)
        if self._calls:
            with self._cond:
                calls, self._calls = self._calls, []
            self._run_calls(calls, now)
        return self._finish_turn(now, tick)

    def pump(self, now: float, tick: bool = True) -> tuple[float, float]:
        """`turn` on everything queued by `receive`, `post` and `submit`, for a simulator whose `wake` hook schedules
        it (rather than the thread)."""
        with self._cond:
            inbox, self._inbox = self._inbox, []
        self.iterations += 1
        return self.turn(now, inbox, tick)

    def rounded(self, at: float) -> float:
        """`at` rounded up to the timer granularity (when the core's wake-up `at` is served)."""
        g = self.granularity
        if at >= INF or g <= 0:
            return at
        q = math.ceil(at / g) * g
        return q if q >= at else q + g

    def _halt(self, error: Exception) -> None:
        if isinstance(error, Halted):
            log.error("%s: %s; it stops", self.name, error)
        else:
            log.error("%s: a turn failed; it stops", self.name, exc_info=error)
        self.halted = error
        try:
            self.io.halted(error)
        except Exception:
            log.exception("%s: ending the leaderships after the halt failed", self.name)
        with self._cond:
            self._stopping = True
            self._cancel_calls()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # the loop's own bug: as for a turn's
            self._halt(exc)
        finally:
            try:
                self.io.ended()
            except Exception:
                log.exception("%s: closing failed", self.name)

    def _loop(self) -> None:
        wake, extra, ticked, spacing = -INF, INF, -INF, self.spacing
        inbox: list[list[I]] = []  # what the last turn left for this one
        while True:
            with self._cond:
                if self._stopping:
                    self._cancel_calls()
                    return
                now = self.clock()
                pending = bool(inbox or self._inbox or self._calls)
                due = min(wake, extra)
                gathering = pending and now < ticked + spacing  # gather more, up to `spacing` after the last turn
                until = min(due, ticked + spacing) if gathering else now if pending else due
                if until > now and self._wait is None:
                    self._gathering = pending
                    self._cond.wait(None if until >= INF else until - now)
                    self._gathering = False
                    continue
                if until <= now:
                    inbox += self._inbox
                    self._inbox = []
                    calls, self._calls = self._calls, []
            if until > now:
                assert self._wait is not None
                self._wait(until - now)  # outside the lock: what it steps may post
                wake = self.rounded(self.core.next_wakeup())  # what it stepped may want a tick sooner
                continue
            now = self.clock()
            self.iterations += 1
            try:
                inbox = self._step_until_due(inbox, now)
                self._run_calls(calls, now)
                began = self.clock()
                wake, extra = self._finish_turn(now, self.tick_every_turn or now >= wake)
            except Exception as exc:
                self._halt(exc)
                return
            ticked = self.clock()
            if self.spacing > 0:  # ticks take a third of the loop's time at most, while inputs stream
                spacing = max(self.spacing, 2 * (ticked - began))

    @staticmethod
    def _run_calls(calls: list[tuple[Callable[[float], object], Future[object] | None]], now: float) -> None:
        for fn, fut in calls:
            if fut is None:
                fn(now)  # posted: an error is the driver's
            elif fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn(now))
                except BaseException as exc:  # the caller sees it
                    fut.set_exception(exc)

    def _cancel_calls(self) -> None:
        for _, fut in self._calls:
            if fut is not None:
                fut.cancel()
        self._calls.clear()

    def _step_until_due(self, inbox: list[list[I]], now: float) -> list[list[I]]:
        """Step batches in until the core's wake-up is due; return the ones left for the next turn."""
        core, clock = self.core, self.clock
        for i, batch in enumerate(inbox):
            core.step_all(batch, now)
            if i + 1 < len(inbox) and clock() >= core.next_wakeup():
                return inbox[i + 1:]
        return []

    def _finish_turn(self, now: float, tick: bool) -> tuple[float, float]:
        if tick:
            self.core.tick(now)
        self.flush(now)
        extra = self.io.idle(now)
        self.flush(now)
        return self.rounded(self.core.next_wakeup()), extra
