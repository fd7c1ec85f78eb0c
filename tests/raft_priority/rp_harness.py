"""A hand-cranked driver for unit tests of one group: zero-delay delivery, exact times, faults by hand."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup
from raft_priority.messages import HardState, LeadershipChange, Message, Output


class Bench:
    """Members of one group; messages are delivered instantly (FIFO) when :meth:`flush` runs."""

    def __init__(self, priorities: Mapping[str, int], cfg: RaftConfig, now: float = 0.0, seed: int = 0) -> None:
        self.spec = GroupSpec(0, dict(priorities))
        self.cfg = cfg
        self.now = now
        self.seed = seed
        self.disk: dict[str, HardState] = {}
        self.nodes: dict[str, RaftGroup] = {}
        self.down: set[str] = set()
        self.blocked: set[tuple[str, str]] = set()
        self.drop: Callable[[Message], bool] = lambda m: False
        self.inflight: list[Message] = []
        self.sent: list[Message] = []
        self.changes: list[LeadershipChange] = []
        for i, n in enumerate(self.spec.members):
            self.nodes[n] = RaftGroup(self.spec, n, cfg, random.Random(seed * 100 + i), now)

    def __getitem__(self, node: str) -> RaftGroup:
        return self.nodes[node]

    def collect(self, node: str, out: Output) -> None:
        if out.persist:
            self.disk[node] = out.persist[0]
        self.changes.extend(out.changes)
        self.sent.extend(out.messages)
        self.inflight.extend(out.messages)

    def out(self, node: str, fn: Callable[[RaftGroup, Output], object]) -> object:
        """Call ``fn(group, out)`` on a node and route its output."""
        out = Output()
        res = fn(self.nodes[node], out)
        self.collect(node, out)
        return res

    def flush(self) -> None:
        while self.inflight:
            m = self.inflight.pop(0)
            if m.dst in self.down or m.src in self.down or (m.src, m.dst) in self.blocked or self.drop(m):
                continue
            self.out(m.dst, lambda g, o, m=m: g.step(m, self.now, o))

    def tick_all(self) -> None:
        for n, g in self.nodes.items():
            if n not in self.down and g.deadline <= self.now:
                self.out(n, lambda g, o: g.tick(self.now, o))
        self.flush()

    def run_to(self, t: float) -> None:
        """Advance to ``t``, ticking every node exactly at its deadlines (and flushing in between)."""
        while True:
            due = [g.deadline for n, g in self.nodes.items() if n not in self.down]
            nxt = min(due, default=t)
            if nxt > t:
                break
            self.now = max(self.now, nxt)
            self.tick_all()
        self.now = t
        self.flush()

    def crash(self, node: str) -> None:
        self.down.add(node)

    def restart(self, node: str) -> None:
        self.down.discard(node)
        i = self.spec.members.index(node)
        self.nodes[node] = RaftGroup(
            self.spec, node, self.cfg, random.Random(self.seed * 100 + i + 50), self.now, self.disk.get(node)
        )

    def cut(self, a: str, b: str) -> None:
        self.blocked |= {(a, b), (b, a)}

    def leaders(self) -> list[str]:
        return [n for n, g in self.nodes.items() if n not in self.down and g.is_leader(self.now)]

    def events(self, kind: str | None = None) -> list[tuple[str, str, int, float]]:
        return [(c.node, c.kind, c.term, c.at) for c in self.changes if kind is None or c.kind == kind]
