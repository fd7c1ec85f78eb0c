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


class DeadlineTimer:
    """Calls `on_expiry(key, deadline)` once a key's latest deadline is reached (unless cancelled)."""

    def __init__(self, on_expiry: Callable[[Hashable, float], None], name: str) -> None:
        self._on_expiry = on_expiry
        self._name = name
        self._cond = threading.Condition()
        self._current: dict[Hashable, float] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._closed = False
        self._thread: threading.Thread | None = None

    def set(self, key: Hashable, deadline: float) -> None:
        with self._cond:
            if self._closed:
                return
            self._current[key] = deadline
            self._seq += 1
            heapq.heappush(self._heap, (deadline, self._seq, key))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"elect-deadlines-{self._name}",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

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
                    while self._heap and self._current.get(self._heap[0][2]) != self._heap[0][0]:
                        heapq.heappop(self._heap)  # superseded or cancelled
                    if not self._heap:
                        self._cond.wait()
                        continue
                    deadline, _, key = self._heap[0]
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        del self._current[key]
                        break
                    self._cond.wait(wait)
                else:
                    return
            self._on_expiry(key, deadline)
