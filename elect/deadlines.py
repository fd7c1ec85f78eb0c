"""One timer thread per elector that fences roles whose leadership deadline passed.

Drivers renew deadlines as their lease, heartbeat or quorum evidence arrives; if renewal stops (the
store is unreachable, the process was frozen), this timer makes the member fence itself on its own
monotonic clock, without waiting for the driver's I/O to fail.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Hashable

from elect.roles import Role


class SharedDeadline:
    """One deadline that many leaderships follow (`BaseElector._share`).

    Where one piece of evidence renews many leaderships at once (Raft's quiet partitions, whose leases are all
    the same node-link quorum), the driver moves this once instead of each leadership's own deadline: renewal
    then costs the same for ten roles as for ten thousand. It is the timer's key for all of them, so they lapse
    together when it passes. Compared by identity.
    """

    __slots__ = ("name", "roles", "until")

    def __init__(self, name: str, until: float) -> None:
        self.name = name
        self.until = until
        self.roles: set[Role] = set()

    def __repr__(self) -> str:
        return f"SharedDeadline({self.name!r}, until={self.until:.3f}, roles={len(self.roles)})"


class DeadlineTimer:
    """Calls `on_expiry(key, deadline)` once a key's latest deadline is reached (unless cancelled).

    A key has at most one live heap entry, pushed only when its deadline moves *earlier*: renewals, which
    move it later, cost a dict update and wake nobody (the entry fires, finds the later deadline and is
    pushed again at it). A driver renewing thousands of leaderships several times a second relies on that.
    """

    def __init__(self, on_expiry: Callable[[Hashable, float], None], name: str) -> None:
        self._on_expiry = on_expiry
        self._name = name
        self._cond = threading.Condition()
        self._current: dict[Hashable, float] = {}
        self._scheduled: dict[Hashable, float] = {}  # key -> the time of its live heap entry
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    def set(self, key: Hashable, deadline: float) -> None:
        with self._cond:
            if self._closed:
                return
            self._current[key] = deadline
            at = self._scheduled.get(key)
            if at is not None and at <= deadline:
                return  # its entry fires first and is pushed again at the later deadline
            self._scheduled[key] = deadline
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, key))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"elect-deadlines-{self._name}",
                                                daemon=True)
                self._thread.start()
            if self._heap[0][2] == key:
                self._cond.notify()  # due before whatever the timer thread waits for

    def cancel(self, key: Hashable) -> None:
        with self._cond:
            self._current.pop(key, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._current.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if not self._heap:
                        self._cond.wait()
                        continue
                    at, _, key = self._heap[0]
                    if self._scheduled.get(key) != at:
                        heapq.heappop(self._heap)  # superseded by an earlier entry
                        continue
                    current = self._current.get(key)
                    if current is None:  # cancelled
                        heapq.heappop(self._heap)
                        del self._scheduled[key]
                        continue
                    if current > at:  # renewed meanwhile: due later
                        self._seq += 1
                        heapq.heapreplace(self._heap, (current, self._seq, key))
                        self._scheduled[key] = current
                        continue
                    wait = at - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        del self._scheduled[key]
                        del self._current[key]
                        deadline = at
                        break
                    self._cond.wait(wait)
                else:
                    return
            self._on_expiry(key, deadline)
