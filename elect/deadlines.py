"""One timer thread per elector that fences roles whose leadership deadline passed: `Deadlines`
(`elect.leaderships`) on the monotonic clock.

Drivers renew deadlines as their lease, heartbeat or quorum evidence arrives; if renewal stops (the
store is unreachable, the process was frozen), this timer makes the member fence itself on its own
monotonic clock, without waiting for the driver's I/O to fail.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable

from elect.leaderships import Deadlines


class DeadlineTimer:
    """Calls `on_expiry(key, deadline)` on a thread of its own once a key's latest deadline is reached (unless
    cancelled): `Deadlines` on the monotonic clock."""

    def __init__(self, on_expiry: Callable[[Hashable, float], None], name: str) -> None:
        self._on_expiry = on_expiry
        self._name = name
        self._cond = threading.Condition()
        self._deadlines = Deadlines()
        self._closed = False
        self._thread: threading.Thread | None = None

    def set(self, key: Hashable, deadline: float) -> None:
        with self._cond:
            if self._closed:
                return
            earliest = self._deadlines.set(key, deadline)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"elect-deadlines-{self._name}",
                                                daemon=True)
                self._thread.start()
            if earliest:
                self._cond.notify()  # due before whatever the timer thread waits for

    def cancel(self, key: Hashable) -> None:
        with self._cond:
            self._deadlines.cancel(key)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._deadlines.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    at = self._deadlines.next()
                    if at == math.inf:
                        self._cond.wait()
                        continue
                    now = time.monotonic()
                    if at > now:
                        self._cond.wait(at - now)
                        continue
                    due = self._deadlines.due(now)
                    break
                else:
                    return
            for key, deadline in due:
                self._on_expiry(key, deadline)
