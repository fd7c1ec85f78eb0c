"""In-order delivery of events to subscribers on one thread per elector.

One thread keeps events in order and lets a `Revoked` callback block (the barrier that holds a
successor back) without stalling the elector's own I/O threads. The same machinery, on a thread of its own,
delivers `LeaderChanged` to observers, so a slow observer never holds back a handover.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

log = logging.getLogger("elect")

E = TypeVar("E")
"""What is delivered: an `elect.events.Event`, or an `elect.observe.LeaderChanged`."""


class _Item(Generic[E]):
    """Events and the subscribers they go to, fixed when queued: a subscriber that joins later gets a
    replay of current state instead, so it sees nothing twice."""

    __slots__ = ("done", "events", "targets")

    def __init__(self, events: tuple[E, ...], targets: tuple[Callable[[E], object], ...],
                 done: threading.Event | None):
        self.events = events
        self.targets = targets
        self.done = done


class EventDispatcher(Generic[E]):
    """Queues events and calls every subscriber with each one, in order, on a dedicated thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._queue: deque[_Item[E] | None] = deque()
        self._subscribers: list[Callable[[E], object]] = []
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"elect-events-{self._name}",
                                                daemon=True)
                self._thread.start()

    def subscribe(self, callback: Callable[[E], object], replay: Iterable[E] = ()) -> Callable[[], None]:
        """Add a subscriber; `replay` events go to it alone, ahead of anything published later."""
        with self._cond:
            self._subscribers.append(callback)
            events = tuple(replay)
            if events:
                self._queue.append(_Item(events, (callback,), None))
                self._cond.notify()

        def unsubscribe() -> None:
            with self._cond:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, event: E) -> threading.Event:
        """Queue `event` for every subscriber; the returned flag is set once they all returned."""
        done = threading.Event()
        with self._cond:
            self._queue.append(_Item((event,), tuple(self._subscribers), done))
            self._cond.notify()
        return done

    def on_dispatch_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued, then end the thread."""
        with self._cond:
            thread = self._thread
            self._queue.append(None)
            self._cond.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                item = self._queue.popleft()
                if item is None:
                    self._thread = None
                    return
            for event in item.events:
                for callback in item.targets:
                    if callback not in self._subscribers:
                        continue  # unsubscribed meanwhile
                    try:
                        callback(event)
                    except Exception:  # a subscriber's bug must not stop delivery to the others
                        log.exception("elect: subscriber %r raised on %r", callback, event)
            if item.done is not None:
                item.done.set()
