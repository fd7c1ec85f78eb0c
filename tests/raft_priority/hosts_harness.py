"""Nodes of one cluster as `NodeHost`s on a hand-cranked clock: messages delivered after a fixed delay, in order,
nothing lost unless a node is down. Enough to test membership rules at the host level without the simulator."""

from __future__ import annotations

import random
from collections.abc import Iterable

from elect.core import Acquire, Fence, Revoke
from raft_priority.config import RaftConfig
from raft_priority.core import RaftState
from raft_priority.host import NodeHost
from raft_priority.membership import CLUSTER, Layout, initial
from raft_priority.messages import Conf, HardState, Message


def address(node: str) -> str:
    return f"{node}.test:7000"


class Hosts:
    """A cluster of hosts started in the static form (`initial`), and nodes that join it later."""

    def __init__(self, nodes: Iterable[str], partitions: int, cfg: RaftConfig | None = None, seed: int = 0,
                 delay: float = 0.001) -> None:
        self.cfg = cfg or RaftConfig.improved(election_timeout=1.0, heartbeat_interval=0.1)
        self.layout = Layout(partitions)
        self.seed = seed
        self.delay = delay
        self.now = 0.0
        self.hosts: dict[str, NodeHost] = {}
        self.disk: dict[str, dict[int, HardState]] = {}
        self.down: set[str] = set()
        self.inflight: list[tuple[float, Message]] = []
        self.leading: dict[tuple[str, int], int] = {}  # (node, group) -> term, while it leads
        self.violations: list[str] = []
        membership, _ = initial({n: address(n) for n in nodes}, partitions, None, "balanced")
        first = Conf(voters={n: 1 for n in sorted(nodes)}, payload=membership)
        for n in nodes:
            self._start(n, first)

    def _start(self, node: str, first: Conf) -> None:
        host = NodeHost(node, self.cfg, random.Random(hash((self.seed, node, self.now)) & 0xFFFF))
        host.join_cluster(self.layout, first, self.now, dict(self.disk.get(node, {})))
        self.hosts[node] = host
        self._collect(node)

    def join(self, node: str) -> None:
        """Start ``node`` as a learner of the cluster group, then ask the cluster's leader to add it."""
        self._start(node, Conf(voters={}, learners=(node,)))
        self.ask(add={node: address(node)})

    def ask(self, add: dict[str, str] | None = None, remove: set[str] | None = None) -> None:
        for n, h in self.hosts.items():
            if n not in self.down and h.cluster is not None and h.cluster.state is RaftState.LEADER:
                assert h.reconfigure(self.now, add=add, remove=remove) is None
                self._collect(n)
                return
        raise AssertionError("no cluster leader to ask")

    def crash(self, node: str) -> None:
        self.down.add(node)
        for key in [k for k in self.leading if k[0] == node]:
            del self.leading[key]

    def restart(self, node: str) -> None:
        self.down.discard(node)
        self._start(node, Conf(voters={}, learners=(node,)))

    def _collect(self, node: str) -> None:
        ready = self.hosts[node].ready()
        if ready.persist:
            self.disk.setdefault(node, {}).update(ready.persist)
        for c in ready.changes:
            key = (node, int(c.role))
            if isinstance(c, Acquire):
                for (other, g), term in self.leading.items():
                    if g == key[1] and other != node:
                        self.violations.append(f"{self.now:.3f}: group {g}: {node} acquired term {c.token} while "
                                               f"{other} leads term {term}")
                self.leading[key] = c.token
            elif isinstance(c, Revoke | Fence):
                self.leading.pop(key, None)
        for m in ready.messages:
            self.inflight.append((self.now + self.delay, m))

    def run_to(self, t: float) -> None:
        while True:
            due = [h.next_wakeup() for n, h in self.hosts.items() if n not in self.down]
            nxt = min([*due, *(at for at, _ in self.inflight)], default=t)
            if nxt > t:
                break
            self.now = max(self.now, nxt)
            arrived = [m for at, m in self.inflight if at <= self.now]
            self.inflight = [(at, m) for at, m in self.inflight if at > self.now]
            by_dst: dict[str, list[Message]] = {}
            for m in arrived:
                if m.dst not in self.down and m.src not in self.down and m.dst in self.hosts:
                    by_dst.setdefault(m.dst, []).append(m)
            for dst, msgs in by_dst.items():
                self.hosts[dst].step_all(msgs, self.now)
                self._collect(dst)
            for n, h in self.hosts.items():
                if n not in self.down and h.next_wakeup() <= self.now:
                    h.tick(self.now)
                    self._collect(n)
        self.now = t

    def voters(self, node: str) -> list[str]:
        m = self.hosts[node].membership()
        assert m is not None
        return sorted(m[0].voters)

    def leaders(self) -> dict[int, str]:
        """Partition -> the node leading it (live nodes only)."""
        out: dict[int, str] = {}
        for n, h in self.hosts.items():
            if n in self.down:
                continue
            for gid, g in h.groups.items():
                if gid != CLUSTER and g.is_leader(self.now):
                    out[gid] = n
        return out

    def counts(self) -> dict[str, int]:
        out = {n: 0 for n in self.hosts if n not in self.down}
        for n in self.leaders().values():
            out[n] += 1
        return out
