"""All election groups of one node behind one timer heap: routing by group id, lazy re-arming.

Still pure (time comes in as ``now``). A driver with 1000 groups keeps a single wake-up at
:meth:`NodeHost.next_wakeup`; each group has at most one live heap entry, re-armed only when its
deadline moves *earlier* (a follower's steady heartbeats push its deadline later and cost no heap
operation: the old entry fires, the tick finds nothing due and re-arms at the new deadline).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable

from elect.budget import HandoverBudget
from elect.core import Ready
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup
from raft_priority.messages import HardState, Message

INF = math.inf


class NodeHost:
    """The groups one node is a member of: the node's `elect.core.Core`.

    Every group writes into the host's one accumulator, so :meth:`ready` hands over what all of them
    produced (``persist`` keyed by group) without merging per-group output.
    """

    __slots__ = ("_acc", "_budget", "_heap", "_scheduled", "config", "groups", "node", "rng")

    def __init__(self, node: str, config: RaftConfig, rng: random.Random) -> None:
        self.node = node
        self.config = config
        self.rng = rng
        self.groups: dict[int, RaftGroup] = {}
        self._acc: Ready[Message, HardState] = Ready()
        self._heap: list[tuple[float, int]] = []
        self._scheduled: dict[int, float] = {}
        self._budget = HandoverBudget(config.rebalance_limit, config.rebalance_window)  # shared by every group

    def add_group(self, spec: GroupSpec, now: float, hard_state: HardState | None = None) -> RaftGroup:
        if spec.group in self.groups:
            raise ValueError(f"group {spec.group} already hosted")
        g = RaftGroup(spec, self.node, self.config, self.rng, now, hard_state, self._acc, self._budget)
        self.groups[spec.group] = g
        self._arm(g)
        return g

    def remove_group(self, group: int, now: float) -> None:
        """Leave a group (a leader resigns first so its successor need not wait a timeout)."""
        g = self.groups.pop(group, None)
        if g is not None:
            g.resign(now)
            self._scheduled.pop(group, None)

    def step(self, msg: Message, now: float) -> None:
        g = self.groups.get(msg.group)
        if g is not None and msg.dst == self.node:
            g.step(msg, now)
            self._arm(g)

    def step_all(self, msgs: Iterable[Message], now: float) -> None:
        groups, node = self.groups, self.node
        for msg in msgs:
            g = groups.get(msg.group)
            if g is not None and msg.dst == node:
                g.step(msg, now)
                self._arm(g)

    def tick(self, now: float) -> None:
        """Tick every group whose deadline is at or before ``now``."""
        heap, scheduled, groups = self._heap, self._scheduled, self.groups
        while heap and heap[0][0] <= now:
            at, gid = heapq.heappop(heap)
            if scheduled.get(gid) != at:
                continue  # stale entry
            del scheduled[gid]
            g = groups[gid]
            g.tick(now)
            self._arm(g)

    def next_wakeup(self) -> float:
        heap, scheduled = self._heap, self._scheduled
        while heap:
            at, gid = heap[0]
            if scheduled.get(gid) == at:
                return at
            heapq.heappop(heap)
        return INF

    def ready(self) -> Ready[Message, HardState]:
        return self._acc.take()

    def resign(self, group: int, now: float) -> None:
        g = self.groups[group]
        g.resign(now)
        self._arm(g)

    def transfer(self, group: int, to: str | None, now: float, pin: bool = False) -> bool:
        g = self.groups[group]
        ok = g.transfer_leadership(to, now, pin)
        self._arm(g)
        return ok

    def set_log_position(self, group: int, last_index: int, last_term: int) -> None:
        self.groups[group].set_log_position(last_index, last_term)

    def leading(self, now: float) -> list[int]:
        return [gid for gid, g in self.groups.items() if g.is_leader(now)]

    def _arm(self, g: RaftGroup) -> None:
        d = g.deadline
        if d < self._scheduled.get(g.group, INF):
            self._scheduled[g.group] = d
            heapq.heappush(self._heap, (d, g.group))
