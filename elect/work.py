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

    def __init__(self, work: Work, roles: tuple[Role, ...], fn: WorkFn, grace: float | None) -> None:
        self.roles = frozenset(roles)
        self.fn = fn
        self.grace = grace
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
        call = _Call(lead, self.grace)
        self._work.calls.append(call)  # from now on a Revoked of this leadership waits for it
        slot = self._slots.setdefault(lead.role, _Slot())
        slot.queue.append(call)
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
                backoff = 0.0 if slot.failures == 0 else min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (slot.failures - 1))
            failed = False
            if not call.stop.wait(backoff):  # a leadership already over, or the job cancelled: no call
                with self._work.lock:
                    self.calls += 1
                try:
                    self.fn(call.lead, call.stop)
                except BaseException:  # SystemExit too: this thread serves the role's later leaderships
                    failed = True
                    log.exception("elect: %s: work for %r (token %d) raised", self._work.name, role, call.lead.token)
            # raising once told to stop is one way of stopping; raising while still leading is a failure
            failure = failed and not call.stop.is_set()
            with self._work.lock:
                slot.queue.pop(0)
                self._work.finished(call)
                if failed:
                    self.failures += 1
                if failure:
                    slot.failures += 1
                elif not failed:
                    slot.failures = 0
            if failure:
                self._work.give_up(call.lead)


class Work:
    """The jobs of one elector and their calls in progress (see the module docstring)."""

    def __init__(self, name: str, lock: threading.RLock, current: Callable[[Role], Leadership | None],
                 resign: Callable[[Role], None], subscribe: Callable[[Callback], Unsubscribe]) -> None:
        self.name = name
        self.lock = lock  # the elector's: transitions and work change together
        self.jobs: list[Job] = []
        self.calls: list[_Call] = []  # not yet returned (queued or running)
        self._current = current
        self._resign = resign
        self._subscribe = subscribe
        self._barrier: Unsubscribe | None = None

    def run(self, roles: tuple[Role, ...], fn: WorkFn, grace: float | None) -> Job:
        job = Job(self, roles, fn, grace)
        with self.lock:
            if self._barrier is None:
                self._barrier = self._subscribe(self._hold_back)
            self.jobs.append(job)
            for role in roles:
                lead = self._current(role)
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

    def give_up(self, lead: Leadership) -> None:
        """`fn` raised while its leadership went on: resign the role, as a leader that does not do the work
        helps nobody; another member (or this one, after the back-off) takes it."""
        current = self._current(lead.role)
        if current is None or current.token != lead.token:
            return
        try:
            self._resign(lead.role)
        except ElectError as exc:  # stopping, draining: the leadership ends anyway
            log.info("elect: %s: not resigning %r after its work failed: %s", self.name, lead.role, exc)

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

