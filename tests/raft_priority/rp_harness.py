"""A hand-cranked driver for unit tests of one group: zero-delay delivery, exact times, faults by hand."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from elect.core import Acquire, Fence, Ready, Revoke
from elect_bench.simulation.recorded import Recorded, lines_of
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup
from raft_priority.messages import HardState, Message


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
        self.changes: list[Recorded] = []
        for i, n in enumerate(self.spec.members):
            self.nodes[n] = RaftGroup(self.spec, n, cfg, random.Random(seed * 100 + i), now)

    def __getitem__(self, node: str) -> RaftGroup:
        return self.nodes[node]

    def collect(self, node: str) -> Ready[Message, HardState]:
        """Take ``node``'s Ready and route it; returns it."""
        ready = self.nodes[node].ready()
        if ready.persist:
            self.disk[node] = ready.persist[0]
        self.changes.extend(Recorded(node, self.now, c) for c in ready.changes)
        self.sent.extend(ready.messages)
        self.inflight.extend(ready.messages)
        return ready

    def out(self, node: str, fn: Callable[[RaftGroup], object]) -> object:
        """Call ``fn(group)`` on a node and route its output."""
        res = fn(self.nodes[node])
        self.collect(node)
        return res

    def flush(self) -> None:
        while self.inflight:
            m = self.inflight.pop(0)
            if m.dst in self.down or m.src in self.down or (m.src, m.dst) in self.blocked or self.drop(m):
                continue
            self.out(m.dst, lambda g, m=m: g.step(m, self.now))

    def tick_all(self) -> None:
        for n, g in self.nodes.items():
            if n not in self.down and g.next_tick <= self.now:
                self.out(n, lambda g: g.tick(self.now))
        self.flush()

    def run_to(self, t: float) -> None:
        """Advance to ``t``, ticking every node exactly at its deadlines (and flushing in between)."""
        while True:
            due = [g.next_tick for n, g in self.nodes.items() if n not in self.down]
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
        """(node, kind, term, time) per event line the changes make; a fenced one at its `until`."""
        return [(line["member"], line["event"], line["token"], line.get("until", line["mono"]))
                for line in lines_of(self.changes) if kind is None or line["event"] == kind]

    def reasons(self) -> list[tuple[float, str]]:
        """(time, reason) per change; an Acquire carries none: "transfer abandoned" when the node takes
        back a term it led already, else "elected"."""
        led: set[tuple[str, int]] = set()
        res: list[tuple[float, str]] = []
        for r in self.changes:
            c = r.change
            if isinstance(c, Acquire):
                res.append((r.at, "transfer abandoned" if (r.node, c.token) in led else "elected"))
                led.add((r.node, c.token))
            elif isinstance(c, Revoke | Fence):
                res.append((c.until if isinstance(c, Fence) else r.at, c.reason))
        return res
