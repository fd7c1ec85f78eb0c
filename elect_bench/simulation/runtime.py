"""An elector's runtime on virtual time (`elect.runtime`): its member's clock, its deadline timer on the world's queue
of events, and its events delivered as they are published. With it the simulator runs the very electors members
run, their driver turned by the world (`Driver.pump`) rather than by a thread.

A timer does not fire while its member is paused (the process is stopped), nor once it was killed or restarted.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from elect.leaderships import Deadlines
from elect.runtime import Dispatcher, Timer

INF = math.inf
E = TypeVar("E")

_DONE = threading.Event()
_DONE.set()


class World(Protocol):
    """What a simulated world offers its members' runtimes: each member's clock, timers on it, pauses and restarts
    (`LinkedWorld` for the lease and NELI worlds, `Simulation` for Raft's). A member has an `incarnation`."""

    def local(self, m: Any) -> float:
        """True time now on `m`'s clock."""
        ...

    def at_local(self, m: Any, local: float, fn: Callable[[], None]) -> None:
        """Run `fn` when `m`'s clock reads `local`."""
        ...

    def held(self, m: Any, retry: Callable[[], None]) -> bool:
        """Whether `m` is paused now; if so `retry` runs when it resumes."""
        ...

    def current(self, m: Any, inc: int) -> bool:
        """`m` is up and still incarnation `inc`."""
        ...


class InlineDispatcher(Generic[E]):
    """Every subscriber called as the event is published: callbacks take no virtual time, so a Revoked's are over
    when `publish` returns."""

    __slots__ = ("_subscribers",)

    def __init__(self) -> None:
        self._subscribers: list[Callable[[E], object]] = []

    def start(self) -> None:
        pass

    def subscribe(self, callback: Callable[[E], object], replay: Iterable[E] = ()) -> Callable[[], None]:
        self._subscribers.append(callback)
        for event in replay:
            callback(event)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def publish(self, event: E) -> threading.Event:
        for callback in list(self._subscribers):
            callback(event)
        return _DONE

    def on_dispatch_thread(self) -> bool:
        return True  # nothing ever waits for callbacks here: they returned already

    def close(self, timeout: float | None = None) -> None:
        self._subscribers.clear()


class SimTimer:
    """`elect.deadlines.DeadlineTimer` on virtual time: `Deadlines` whose earliest is armed on `member`'s clock."""

    __slots__ = ("_armed", "_closed", "_deadlines", "_inc", "_member", "_on_expiry", "_world")

    def __init__(self, world: World, member: Any, on_expiry: Callable[[Hashable, float], None]) -> None:
        self._world = world
        self._member = member
        self._inc = member.incarnation
        self._on_expiry = on_expiry
        self._deadlines = Deadlines()
        self._armed = INF
        self._closed = False

    def set(self, key: Hashable, deadline: float) -> None:
        if not self._closed and self._deadlines.set(key, deadline) and deadline < self._armed:
            self._arm(deadline)

    def cancel(self, key: Hashable) -> None:
        self._deadlines.cancel(key)

    def close(self) -> None:
        self._closed = True
        self._deadlines.clear()

    def rearm(self) -> None:
        """The member's clock changed its rate: the earliest deadline is armed again on it."""
        nxt = self._deadlines.next()
        if nxt < INF and not self._closed:
            self._arm(nxt)

    def _arm(self, at: float) -> None:
        self._armed = at
        self._world.at_local(self._member, at, lambda: self._fire(at))

    def _fire(self, at: float) -> None:
        world, m = self._world, self._member
        if self._closed or at != self._armed or not world.current(m, self._inc):
            return
        if world.held(m, lambda: self._fire(at)):
            return
        self._armed = INF
        for key, deadline in self._deadlines.due(world.local(m)):
            self._on_expiry(key, deadline)
        nxt = self._deadlines.next()
        if nxt < INF and not self._closed:
            self._arm(nxt)


class SimRuntime:
    """The runtime of `member`'s elector in `world` (see the module). `wall`: its wall clock (default: its own clock,
    as its monotonic one)."""

    __slots__ = ("_member", "_wall", "_world")

    def __init__(self, world: World, member: Any, wall: Callable[[], float] | None = None) -> None:
        self._world = world
        self._member = member
        self._wall = wall

    def monotonic(self) -> float:
        return self._world.local(self._member)

    def wall(self) -> float:
        return self._world.local(self._member) if self._wall is None else self._wall()

    def timer(self, on_expiry: Callable[[Hashable, float], None], name: str) -> Timer:
        return SimTimer(self._world, self._member, on_expiry)

    def dispatcher(self, name: str) -> Dispatcher[Any]:
        return InlineDispatcher()
