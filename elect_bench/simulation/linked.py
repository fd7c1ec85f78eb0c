"""What the simulated worlds of members around one server (a lease store, a Kafka broker) share: virtual time as a
heap of callbacks, the member's process (its driver's turns, paused or not, its leaderships kept by
`elect.leaderships` and recorded), and its link to the server with its faults.

A request sent now reaches the server after a drawn latency, unless the member's link is cut when it is sent or
arrives; while the server is frozen it waits in the server's socket and is served when it wakes. An answer reaches
the member after a drawn latency, unless the link is cut, or the process died or was restarted meanwhile; while the
member is paused it waits in the member's socket until it resumes.

A member may run on a clock of its own (`set_rate`, the harness's `drift`): whatever it reads and records is on
that clock (`local`), and its timers are set on it (`after`, `at_local`: moved when the rate changes), while the
server, the links and the faults keep true time.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from elect.driver import Driver
from elect.leaderships import Leaderships
from elect.roles import Role
from elect_bench.simulation.clock import NodeClock, carried
from elect_bench.simulation.recorded import Recorded, Recorder

INF = math.inf


class _Simulating(logging.Filter):
    """Drops what the simulated members' electors log (a new session, a lost one) while a world runs: a real member's
    diagnostics, which thousands of seeds would print by the thousand."""

    depth = 0

    def filter(self, record: logging.LogRecord) -> bool:
        return self.depth == 0


_SIMULATING = _Simulating()
for _name in ("elect", "cas_lease", "neli"):
    logging.getLogger(_name).addFilter(_SIMULATING)


@dataclass
class SimMember:
    """A simulated member's process: whether it runs (and which incarnation: a restart makes older callbacks stale),
    its link, a pause, its driver and when it next wakes (on its clock), its leaderships (`keeper`, recorded by
    `recorder`), and its machine's clock (None: true time)."""

    name: str
    roles: tuple[Role, ...]
    recorder: Recorder
    keeper: Leaderships = field(init=False)
    up: bool = False
    incarnation: int = 0
    cut: bool = False
    paused_until: float = -INF
    driver: Driver[Any, Any, None] | None = None
    wake_at: float = INF
    clock: NodeClock | None = None

    def __post_init__(self) -> None:
        self.keeper = Leaderships(self.recorder)


@dataclass(slots=True)
class _Timer:
    """A member's timer, due when its clock reads `local` (moved when the clock's rate changes)."""

    member: SimMember
    local: float
    fn: Callable[[], None]

    def __call__(self) -> None:
        self.fn()


M = TypeVar("M", bound=SimMember)


@dataclass(slots=True)
class ServerLink:
    """Latency between a member and the server: per request each way, and per watch event (a lease store's)."""

    delay_min: float = 0.0003
    delay_max: float = 0.002
    spike_probability: float = 0.0
    """Chance that a request or watch event is delayed by an extra `spike_delay` (a retransmission, a GC pause)."""
    spike_delay: float = 0.05
    watch_min: float = 0.0005
    watch_max: float = 0.004

    def describe(self) -> str:
        what = (f"requests {self.delay_min * 1000:g}-{self.delay_max * 1000:g} ms each way, watch events "
                f"{self.watch_min * 1000:g}-{self.watch_max * 1000:g} ms")
        if self.spike_probability:
            what += f", {self.spike_probability:.0%} delayed {self.spike_delay * 1000:g} ms more"
        return what

    def request(self, rng: random.Random) -> float:
        return self._spiked(self.delay_min + rng.random() * (self.delay_max - self.delay_min), rng)

    def watch(self, rng: random.Random) -> float:
        return self._spiked(self.watch_min + rng.random() * (self.watch_max - self.watch_min), rng)

    def _spiked(self, d: float, rng: random.Random) -> float:
        if self.spike_probability and rng.random() < self.spike_probability:
            d += self.spike_delay
        return d


class LinkedWorld(Generic[M]):
    """Virtual time, members' processes and member-server links (see the module). `wake_spread`: requests held by a
    frozen server are served in a drawn order within that many seconds of its wake-up, as a real one takes them from
    its sockets in no particular order (0: in the order they were sent). A world sets `members` and starts them
    (`start_all`); `_start` is its own."""

    members: dict[str, M]

    def __init__(self, seed: int, link: ServerLink, wake_spread: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.link = link
        self.wake_spread = wake_spread
        self.now = 0.0
        self.events_processed = 0
        self.frozen_until = -INF
        self.history: list[Recorded] = []
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    def start_all(self, jitter: float) -> None:
        """Every member starts within `jitter` seconds; each records onto true time (see `set_rate`)."""
        for name, m in self.members.items():
            m.recorder.on_true_time = partial(self._carried, m)
            self.at(self.rng.random() * jitter, partial(self._start, name))

    def _start(self, name: str) -> None:
        raise NotImplementedError

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run `fn` at virtual time `t` (faults, probes)."""
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn))

    def local(self, m: SimMember, t: float | None = None) -> float:
        """True time `t` (now) on `m`'s clock."""
        t = self.now if t is None else t
        return t if m.clock is None else m.clock.local(t)

    def true_at(self, m: SimMember, local: float) -> float:
        """When `m`'s clock reads `local`, in true time."""
        return local if m.clock is None else m.clock.true(local)

    def at_local(self, m: SimMember, local: float, fn: Callable[[], None]) -> None:
        """Run `fn` when `m`'s clock reads `local` (a timer of its process)."""
        self.at(local if m.clock is None else max(self.now, m.clock.true(local)), _Timer(m, local, fn))

    def after(self, m: SimMember, seconds: float, fn: Callable[[], None]) -> None:
        """Run `fn` once `seconds` passed on `m`'s clock."""
        self.at_local(m, self.local(m) + seconds, fn)

    def set_rate(self, name: str, rate: float) -> None:
        """From now on member `name`'s clock runs at `rate` of true time (until set again); its timers move."""
        m = self.members[name]
        clock = m.clock
        if clock is None:
            clock = m.clock = NodeClock()
        clock.set_rate(self.now, rate)
        self._heap[:] = [(max(self.now, clock.true(fn.local)), seq, fn) if isinstance(fn, _Timer) and fn.member is m
                         else (t, seq, fn) for t, seq, fn in self._heap]  # in place: `run_until` holds it
        heapq.heapify(self._heap)

    def _carried(self, m: SimMember, r: Recorded) -> Recorded:
        return carried(m.clock, self.now, r)

    def run_until(self, t: float) -> None:
        heap = self._heap
        _SIMULATING.depth += 1
        try:
            while heap and heap[0][0] <= t:
                at, _, fn = heapq.heappop(heap)
                self.now = at
                self.events_processed += 1
                fn()
        finally:
            _SIMULATING.depth -= 1
        self.now = max(self.now, t)

    def pause(self, name: str, duration: float) -> None:
        """SIGSTOP for `duration`: nothing is processed (no timers, no answers read) until it resumes."""
        m = self.members[name]
        m.paused_until = max(m.paused_until, self.now + duration)

    def cut(self, name: str) -> None:
        """The member's link to the server fails: requests and answers are lost, what the server pushes stalls."""
        self.members[name].cut = True

    def heal(self, name: str | None = None) -> None:
        """The link (every link, for None) works again: each world's client then does what its library does."""
        for m in self.members.values():
            if (name is None or m.name == name) and m.cut:
                m.cut = False
                self._healed(m)

    def _healed(self, m: M) -> None:
        raise NotImplementedError

    def restart(self, name: str) -> None:
        if not self.members[name].up:
            self._start(name)

    def leaders(self) -> dict[Role, list[str]]:
        """Per role, the members that believe they lead it now (by their own deadlines)."""
        out: dict[Role, list[str]] = {}
        for m in self.members.values():
            if m.up:
                for role in m.keeper.leading(self.local(m)):
                    out.setdefault(role, []).append(m.name)
        return out

    def _turn(self, m: M, inputs: list[Any]) -> None:
        """The member's driver takes a turn now (or when it resumes, if paused), then its next wake-up is armed."""
        if m.driver is None:
            return
        if self.now < m.paused_until:
            inc = m.incarnation
            self.at(m.paused_until, lambda: self._turn(m, inputs) if self.current(m, inc) else None)
            return
        now = self.local(m)
        wake, extra = m.driver.turn(now, [inputs] if inputs else ())
        at = max(min(wake, extra), now)
        if at < m.wake_at or m.wake_at < now:
            m.wake_at = at
            if at < INF:
                self.at_local(m, at, partial(self._wake, m, m.incarnation, at))

    def _wake(self, m: M, inc: int, at: float) -> None:
        if self.current(m, inc) and m.wake_at == at:
            m.wake_at = INF
            self._turn(m, [])

    def held(self, m: SimMember, retry: Callable[[], None]) -> bool:
        """Whether `m` is paused now; if so `retry` runs when it resumes (what a paused process was about to do)."""
        if self.now < m.paused_until:
            self.at(m.paused_until, retry)
            return True
        return False

    def current(self, m: SimMember, inc: int) -> bool:
        """`m` is up and still the incarnation `inc` (a restart makes older callbacks stale)."""
        return m.up and m.incarnation == inc

    def to_server(self, m: SimMember, fn: Callable[[], None]) -> None:
        """`fn` runs at the server when a request sent now arrives (see the module)."""
        def arrive() -> None:
            if m.cut:
                return
            if self.now < self.frozen_until:
                spread = self.rng.random() * self.wake_spread if self.wake_spread else 0.0
                self.at(self.frozen_until + spread, arrive)
                return
            fn()

        if not m.cut:
            self.at(self.now + self.link.request(self.rng), arrive)

    def to_member(self, m: SimMember, inc: int, fn: Callable[[], None]) -> None:
        """`fn` runs at the member when an answer sent now arrives (see the module)."""
        def arrive() -> None:
            if not self.current(m, inc) or m.cut:
                return
            if self.now < m.paused_until:
                self.at(m.paused_until, arrive)
                return
            fn()

        self.at(self.now + self.link.request(self.rng), arrive)
