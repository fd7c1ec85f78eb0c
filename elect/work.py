"""Work while leading: `Elector.run(roles, fn)` calls `fn(lead, stop)` for each leadership of each role.

Why here and not in the application: the stop signal must fire on the elector's own transitions (an
orderly `Revoked`, an abrupt `Fenced`, and a deadline that passed on the member's clock), not when an event
reaches the application, since the one event thread may be busy holding another role's handover. And the
orderly handover must wait for `fn` to return, which only a `Revoked` callback can do: that is the barrier
that holds the successor back on methods with `graceful_handover`.

`BaseElector` owns one `Work` and reports every new leadership (`acquired`) and every end of one (`ended`)
to it under its lock; `Work` keeps no clock of its own and starts one thread per role a `Running` job
covers, which lives while calls of `fn` are due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from elect.contract import Callback, Leadership, Running, Unsubscribe
from elect.errors import ElectError
from elect.events import Event, Revoked
from elect.roles import Role

log = logging.getLogger("elect")

WorkFn = Callable[[Leadership, threading.Event], object]
"""`fn(lead, stop)`: work under `lead` (its `token` guards your writes) until `stop` is set."""

#: After a call of `fn` raised, the next call for that role waits this long, doubling up to `BACKOFF_MAX`
#: with each further failure in a row, so a `fn` that always fails does not spin on a role it gets back.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 10.0

#: What `run(..., on_error=)` does when `fn` raises while its leadership goes on (`Elector.run`).
ON_ERROR = ("release", "restart")


def backoff(failures: int) -> float:
    """The wait before the next call after `failures` failed calls in a row."""
    return 0.0 if failures <= 0 else min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 1))


class _Call:
    """One call of `fn` under one leadership: its stop signal, and the flag set once it returned."""

    __slots__ = ("done", "grace", "lead", "stop", "stopped_at")

    def __init__(self, lead: Leadership, grace: float | None) -> None:
        self.lead = lead
        self.grace = grace
        self.stop = threading.Event()
        self.done = threading.Event()
        self.stopped_at: float | None = None

    def signal(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = time.monotonic()
        self.stop.set()

    def holds_back(self) -> float | None:
        """Until when (monotonic) a handover waits for this call; None: no bound."""
        if self.grace is None:
            return None
        return (self.stopped_at if self.stopped_at is not None else time.monotonic()) + self.grace


class _Slot:
    """The calls due for one role of one job, made one after another on one thread: a new leadership's
    call never overlaps the previous one's (which may still be finishing after a `Fenced`)."""

    __slots__ = ("failures", "queue", "thread")

    def __init__(self) -> None:
        self.queue: list[_Call] = []
        self.thread: threading.Thread | None = None
        self.failures = 0


class Job(Running):
    """The `Running` that `Work` makes: its calls, one thread per role (`_Slot`)."""

    def __init__(self, work: Work, roles: tuple[Role, ...], fn: WorkFn, grace: float | None,
                 on_error: str = "release") -> None:
        self.roles = frozenset(roles)
        self.fn = fn
        self.grace = grace
        self.on_error = on_error
        self.calls = 0
        self.failures = 0
        self._work = work
        self._slots: dict[Role, _Slot] = {}
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, timeout: float | None = None) -> bool:
        with self._work.lock:
            self._cancelled = True
            if self in self._work.jobs:
                self._work.jobs.remove(self)
            calls = [c for slot in self._slots.values() for c in slot.queue]
            threads = [slot.thread for slot in self._slots.values()]
            for call in calls:
                call.signal()
        if threading.current_thread() in threads:  # cancelled from inside fn: it cannot wait for itself
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        for call in calls:
            if not call.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
                return False
        return True

    # ------------------------------------------------------------------ from Work, under its lock
    def _acquired(self, lead: Leadership) -> None:
        if self._cancelled or lead.role not in self.roles:
            return
        slot = self._slots.setdefault(lead.role, _Slot())
        self._queue(lead.role, slot, lead)
        if slot.thread is None:
            slot.thread = threading.Thread(target=self._serve, args=(lead.role, slot), daemon=True,
                                           name=f"elect-work-{self._work.name}-{lead.role}")
            slot.thread.start()

    # ------------------------------------------------------------------ the slot's thread
    def _serve(self, role: Role, slot: _Slot) -> None:
        while True:
            with self._work.lock:
                if not slot.queue:
                    slot.thread = None
                    return
                call = slot.queue[0]
                wait = backoff(slot.failures)
            failed: BaseException | None = None
            if not call.stop.wait(wait):  # a leadership already over, or the job cancelled: no call
                with self._work.lock:
                    self.calls += 1
                try:
                    self.fn(call.lead, call.stop)
                except BaseException as exc:  # SystemExit too: this thread serves the role's later leaderships
                    failed = exc
            # raising once told to stop is one way of stopping; raising while still leading is a failure
            failure = failed is not None and not call.stop.is_set()
            with self._work.lock:
                slot.queue.pop(0)
                self._work.finished(call)
                if failed is not None:
                    self.failures += 1
                if failure:
                    slot.failures += 1
                elif failed is None:
                    slot.failures = 0
                again = backoff(slot.failures)
                if failure and self.on_error == "restart":
                    current = self._work.current(role)
                    if current is not None and current.token == call.lead.token and not self._cancelled:
                        self._queue(role, slot, current)  # the same leadership: called again after the back-off
            if failure:
                assert failed is not None
                self._log_failure(role, call.lead, failed, slot.failures, again)
                if self.on_error == "release":
                    self._work.release(call.lead, again)
            elif failed is not None:
                log.debug("elect: %s: work for %r (token %d) raised once told to stop: %r", self._work.name, role,
                          call.lead.token, failed)

    def _queue(self, role: Role, slot: _Slot, lead: Leadership) -> None:
        """A call of `fn` under `lead` on the role's thread (under the lock)."""
        call = _Call(lead, self.grace)
        self._work.calls.append(call)  # from now on a Revoked of this leadership waits for it
        slot.queue.append(call)

    def _log_failure(self, role: Role, lead: Leadership, exc: BaseException, in_a_row: int, wait: float) -> None:
        """One record per failed call, the traceback with the first of a run of them: a `fn` that always fails logs
        once per back-off step (0.1 s doubling to 10 s), not once per attempt of a tight loop."""
        then = (f"released for {wait:g} s, then contended for again" if self.on_error == "release"
                else f"called again in {wait:g} s under the same leadership")
        if in_a_row == 1:
            log.error("elect: %s: work for %r (token %d) raised; %s", self._work.name, role, lead.token, then,
                      exc_info=exc)
        else:
            log.error("elect: %s: work for %r (token %d) raised again (%d in a row): %s: %s; %s", self._work.name,
                      role, lead.token, in_a_row, type(exc).__name__, exc, then)


class Work:
    """The jobs of one elector and their calls in progress (see the module docstring)."""

    def __init__(self, name: str, lock: threading.RLock, current: Callable[[Role], Leadership | None],
                 release: Callable[[Role, float], None], subscribe: Callable[[Callback], Unsubscribe]) -> None:
        self.name = name
        self.lock = lock  # the elector's: transitions and work change together
        self.jobs: list[Job] = []
        self.calls: list[_Call] = []  # not yet returned (queued or running)
        self.current = current
        self._release = release
        self._subscribe = subscribe
        self._barrier: Unsubscribe | None = None

    def run(self, roles: tuple[Role, ...], fn: WorkFn, grace: float | None, on_error: str = "release") -> Job:
        job = Job(self, roles, fn, grace, on_error)
        with self.lock:
            if self._barrier is None:
                self._barrier = self._subscribe(self._hold_back)
            self.jobs.append(job)
            for role in roles:
                lead = self.current(role)
                if lead is not None:
                    job._acquired(lead)
        return job

    # ------------------------------------------------------------------ from the elector, under its lock
    def acquired(self, lead: Leadership) -> None:
        """A new leadership began: start the calls due."""
        for job in self.jobs:
            job._acquired(lead)

    def ended(self, role: Role, token: int) -> None:
        """The leadership of `role` under `token` ended (Revoked, Fenced): tell its calls to stop."""
        for call in self.calls:
            if call.lead.role == role and call.lead.token == token:
                call.signal()

    # ------------------------------------------------------------------ calls
    def finished(self, call: _Call) -> None:
        if call in self.calls:
            self.calls.remove(call)
        call.done.set()

    def release(self, lead: Leadership, hold: float) -> None:
        """`fn` raised while its leadership went on (`on_error="release"`): hand the role over and leave it to the
        others for `hold` seconds, as a leader that does not do the work helps nobody; after that this member
        contends for it again (and is the one to take it if it is alone)."""
        current = self.current(lead.role)
        if current is None or current.token != lead.token:
            return
        try:
            self._release(lead.role, hold)
        except ElectError as exc:  # stopping, draining: the leadership ends anyway
            log.info("elect: %s: not releasing %r after its work failed: %s", self.name, lead.role, exc)

    def _hold_back(self, event: Event) -> None:
        """The barrier, a `Revoked` callback on the event thread: return once the leadership's calls returned,
        or their grace ran out (then the handover goes ahead, and a call still running is fenced: its token
        is out of date for the resource it guards)."""
        if not isinstance(event, Revoked):
            return
        with self.lock:
            calls = [c for c in self.calls if c.lead.role == event.role and c.lead.token == event.token]
        for call in calls:
            until = call.holds_back()
            if not call.done.wait(None if until is None else max(0.0, until - time.monotonic())):
                log.warning("elect: %s: work for %r (token %d) still running %gs after it was told to stop; "
                            "handing over: it runs fenced now", self.name, event.role, event.token, call.grace)

