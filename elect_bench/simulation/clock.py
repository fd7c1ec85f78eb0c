"""A simulated member's own clock: the rate it runs at, piece by piece, against the world's true time.

Every simulated world (Raft's nodes, the lease and NELI members) runs a member whose clock was struck by a `drift`
on this clock: its driver, core, elector and client library read it, its timers are set on it, and what it records
is carried back onto true time (`carried`), as the harness's `to_real` carries a real member's lines.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from elect.core import Fence
from elect_bench.simulation.recorded import Recorded

INF = math.inf


class NodeClock:
    """A node's monotonic clock (its wall clock too): from each rate change on, local = local_at + rate x (true -
    true_at). A node keeps its clock across restarts (the machine's). Times before the first change are true
    times."""

    __slots__ = ("local_at", "rate", "true_at")

    def __init__(self) -> None:
        self.true_at: list[float] = [0.0]
        self.local_at: list[float] = [0.0]
        self.rate: list[float] = [1.0]

    def set_rate(self, now: float, rate: float) -> None:
        self.local_at.append(self.local(now))
        self.true_at.append(now)
        self.rate.append(rate)

    def local(self, t: float) -> float:
        i = bisect_right(self.true_at, t) - 1 if t < self.true_at[-1] else len(self.true_at) - 1
        return self.local_at[i] + self.rate[i] * (t - self.true_at[i])

    def true(self, local: float) -> float:
        """The first true time at which the clock reads `local` (no earlier: a wake-up armed there finds its timer
        due, whatever the rounding)."""
        if local >= INF:
            return INF
        i = max(bisect_right(self.local_at, local) - 1 if local < self.local_at[-1] else len(self.local_at) - 1, 0)
        t = self.true_at[i] + (local - self.local_at[i]) / self.rate[i]
        while self.local(t) < local:
            t = math.nextafter(t, INF)
        return t


def carried(clock: NodeClock | None, now: float, r: Recorded) -> Recorded:
    """What a member on `clock` recorded during the step at true time `now`, on true time: the step's instant is
    `now`, and a fence's `until` is carried back through the clock's rates."""
    if clock is None:
        return r
    c = r.change
    if isinstance(c, Fence):
        c = Fence(c.role, clock.true(c.until), c.reason)
    return Recorded(r.node, now, c)
