"""Where an elector's time, timers and event delivery come from.

A member runs on the monotonic clock, with a timer thread that fences leaderships at their deadlines and a thread
per dispatcher that delivers events in order (`THREADS`). The simulator runs the same electors on virtual time,
with timers on its own queue of events and events delivered as they are published
(`elect_bench.simulation.runtime`): the elector's code is the same in both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol, TypeVar

from elect.deadlines import DeadlineTimer
from elect.dispatch import EventDispatcher

E = TypeVar("E")


class Timer(Protocol):
    """Calls back once a key's latest deadline is reached, unless cancelled (`elect.deadlines.DeadlineTimer`)."""

    def set(self, key: Hashable, deadline: float) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def close(self) -> None: ...


class Dispatcher(Protocol[E]):
    """Delivers each published event to every subscriber, in order (`elect.dispatch.EventDispatcher`)."""

    def start(self) -> None: ...

    def subscribe(self, callback: Callable[[E], object], replay: Iterable[E] = ()) -> Callable[[], None]: ...

    def publish(self, event: E) -> threading.Event:
        """Queue `event`; the flag is set once every subscriber returned."""
        ...

    def on_dispatch_thread(self) -> bool: ...

    def close(self, timeout: float | None = None) -> None: ...


class Runtime(Protocol):
    """An elector's clock, timers and dispatchers."""

    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def timer(self, on_expiry: Callable[[Hashable, float], None], name: str) -> Timer: ...

    def dispatcher(self, name: str) -> Dispatcher[Any]: ...


class Threads:
    """A member's runtime: the monotonic and wall clocks, a timer thread, a thread per dispatcher."""

    monotonic = staticmethod(time.monotonic)
    wall = staticmethod(time.time)

    @staticmethod
    def timer(on_expiry: Callable[[Hashable, float], None], name: str) -> Timer:
        return DeadlineTimer(on_expiry, name)

    @staticmethod
    def dispatcher(name: str) -> Dispatcher[Any]:
        return EventDispatcher(name)


THREADS: Runtime = Threads()
"""The runtime every elector has unless given another."""
