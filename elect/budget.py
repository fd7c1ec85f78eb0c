"""A sliding-window budget of handovers: at most `limit` in any `window` seconds.

Rebalancing (raft's return to the preferred member, the leases' fair-share shedding) moves leadership that
is working fine, and every move costs a Revoked/Acquired round trip in the application. An operator bounds
that churn with a budget per member; both cores consult one of these. Pure: time comes in as `now`.
"""

from __future__ import annotations

import math
from collections import deque


class HandoverBudget:
    """At most `limit` handovers in any `window` seconds (`limit` None: no limit)."""

    __slots__ = ("_spent", "limit", "window")

    def __init__(self, limit: int | None, window: float) -> None:
        if limit is not None and limit < 1:
            raise ValueError("limit must be >= 1 (or None for no limit)")
        if not window > 0:
            raise ValueError("window must be > 0")
        self.limit = limit
        self.window = window
        self._spent: deque[float] = deque()

    def left(self, now: float) -> float:
        """How many handovers may start at `now` (math.inf without a limit)."""
        if self.limit is None:
            return math.inf
        while self._spent and self._spent[0] <= now - self.window:
            self._spent.popleft()
        return self.limit - len(self._spent)

    def spend(self, now: float) -> None:
        if self.limit is not None:
            self._spent.append(now)

    def next_free(self, now: float) -> float:
        """When the next handover may start (`now` if one may start now)."""
        if self.left(now) > 0:
            return now
        return self._spent[0] + self.window
