"""Deterministic simulator: many nodes x many groups on virtual time, driving the real core.

One event heap holds message deliveries, node wake-ups and scheduled fault actions; every random
choice (delays, loss, each node's core RNG) derives from one seed, so a seed replays the same history
bit for bit. Faults: message loss, per-message delay from a distribution, cuts between node sets
(one-way or both ways), crash + restart (a restart keeps the persisted term/vote and loses the rest),
and pauses (a SIGSTOP: the node sees nothing until it resumes, then catches up late), and clocks that run at
another rate (`set_rate`: the node's driver, core and elector run on its own clock, as under the harness's
`drift`; what it records is carried back onto true time, as the harness's `to_real` carries a member's lines).

Each node runs on the real driver loop (`elect.driver.Driver`, its `turn` called on virtual time, no thread)
with an IO of simulated disks and links: it wakes on a timer granularity (default 1 ms), hands on its host's
``Ready`` after each step in the driver's order (persist, changes, send), and sends that step's messages per
destination as one batch (one delay sample), so ten thousand groups cost events per node pair, not per group,
wherever their timers coincide. With `ack_delay` a node sends through `raft_priority.outbox.Outbox` as a
`raft://` member does: heartbeat acknowledgements wait up to that long to ride along with its next batch to the same
peer (the member's default `RaftOptions.acks_after`), so a quiet pair of nodes exchanges one batch each way per
heartbeat interval instead of two.
A node may be told how many roles it contends for per group and its `max_roles` (`interest`, `max_roles`): its
host then runs the elector's policy as a `raft://` node does (`raft_priority.interest`: standing, caps, hand-offs).
:attr:`Simulation.history` records every leadership change with the node and virtual time of its step: the core's
own (a leadership lasts from its Acquire until the core fences or revokes it, at the lease end at the latest), or,
with `electors`, the events of each node's real `RaftElector` (`elect_bench.simulation.raft_elector`: its host,
renewals, handovers and leaderships as a member runs them, on the simulated disk, links and clock; the nodes then
start as `raft://` nodes do, from the configuration their URLs give: `membership` is needed).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import cast

from elect.core import Fence, Ready
from elect.driver import Driver, FunctionIO
from elect.roles import Role
from elect_bench.simulation.clock import NodeClock, carried
from elect_bench.simulation.raft_elector import SimRaftElector
from elect_bench.simulation.recorded import Recorded, Recorder
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftState
from raft_priority.host import NodeHost
from raft_priority.membership import CLUSTER, Layout, initial
from raft_priority.messages import Conf, HardState, Message, NodeBeat, NodeBeatAck
from raft_priority.options import RaftOptions
from raft_priority.outbox import Outbox

INF = math.inf
_DELIVER, _WAKE, _ACTION = 0, 1, 2


@dataclass(slots=True)
class NetworkModel:
    """Per-message (per-batch) delay, loss and ordering."""

    delay_min: float = 0.0002
    delay_max: float = 0.002
    loss: float = 0.0
    spike_probability: float = 0.0
    """Chance that a batch is delayed by an extra ``spike_delay`` (a retransmission, a GC pause)."""
    spike_delay: float = 0.05
    fifo: bool = True
    """Per (src, dst) link, batches arrive in the order sent (a TCP / gRPC stream)."""
    batch: bool = True
    """One delay sample for all messages of one step to one destination (one RPC)."""

    def describe(self) -> str:
        """In words, for reports."""
        what = f"{self.delay_min * 1000:g}-{self.delay_max * 1000:g} ms per {'batch' if self.batch else 'message'}"
        if self.fifo:
            what += ", in order per pair of nodes"
        if self.spike_probability:
            what += f", {self.spike_probability:.0%} delayed {self.spike_delay * 1000:g} ms more"
        return what + (f", {self.loss:.0%} lost" if self.loss else ", no loss")

    def sample(self, rng: random.Random) -> float:
        d = self.delay_min + rng.random() * (self.delay_max - self.delay_min)
        if self.spike_probability and rng.random() < self.spike_probability:
            d += self.spike_delay
        return d


def _beats_only(msgs: list[Message]) -> bool:
    """Whether a batch is node beats and acks only (a loop: this runs for nearly every delivery)."""
    for m in msgs:
        kind = type(m)
        if kind is not NodeBeat and kind is not NodeBeatAck:
            return False
    return True


def _never(now: float) -> float:
    return INF


def _raise(error: Exception) -> None:  # pragma: no cover - a simulated disk never refuses; a bug raises at once
    raise AssertionError(error)


@dataclass(slots=True)
class _Node:
    name: str
    groups: list[int]
    host: NodeHost | None = None
    driver: Driver[Message, Message, HardState] | None = None
    up: bool = False
    incarnation: int = 0
    wake_at: float = INF
    paused_until: float = -INF
    disk: dict[Role, HardState] = field(default_factory=dict)
    outbox: Outbox | None = None
    elector: SimRaftElector | None = None
    clock: NodeClock | None = None
    """None: the node's clock is true time."""
    free_from: dict[str, float] = field(default_factory=dict)
    """FIFO links: per sender, when the last batch it sent here arrives (none of this one's may arrive earlier)."""
    turning: bool = False
    """A turn of its driver is queued for what was posted to it (its elector's deadline timer, say)."""


class Simulation:
    """Nodes hosting the groups of ``assignment`` (partition index -> {node: priority})."""

    def __init__(
        self,
        assignment: Sequence[Mapping[str, int]],
        config: RaftConfig,
        seed: int,
        network: NetworkModel | None = None,
        *,
        nodes: Sequence[str] | None = None,
        start_at: Mapping[str, float] | None = None,
        start_jitter: float = 0.0,
        timer_granularity: float = 0.001,
        interest: Mapping[str, Mapping[int, int]] | None = None,
        max_roles: Mapping[str, int] | None = None,
        ack_delay: float = 0.0,
        electors: bool = False,
        resume: bool = True,
        membership: Layout | None = None,
        member_options: Callable[[str], RaftOptions] | None = None,
    ) -> None:
        if electors and (membership is None or member_options is None):
            raise ValueError("a simulation with electors starts its nodes as raft:// nodes do: give `membership` and "
                             "`member_options`")
        self.member_options = member_options
        self.config = config
        # membership: nodes start as a raft:// node does (`NodeHost.join_cluster`: the cluster group, partitions
        # following its configuration), so members can be added (`join`) and removed (`remove`) while it runs
        self.layout = membership
        self.first: Conf | None = None
        self.ack_delay = ack_delay
        self.electors = electors
        self.resume = resume  # with electors: `Renewals(resume=...)`
        self.interest = interest or {}  # per node, per group: roles it contends for there (none given: every one)
        self.max_roles = max_roles or {}
        self.network = network or NetworkModel()
        self.rng = random.Random(seed)
        self.granularity = timer_granularity
        self.now = 0.0
        self.specs = [GroupSpec(i, dict(prios)) for i, prios in enumerate(assignment)]
        names = list(nodes) if nodes is not None else list(dict.fromkeys(n for a in assignment for n in a))
        self.nodes: dict[str, _Node] = {n: _Node(n, []) for n in names}
        for spec in self.specs:
            for m in spec.members:
                self.nodes[m].groups.append(spec.group)
        self.history: list[Recorded] = []
        self.crashes: list[tuple[float, str]] = []
        self.messages_sent = 0
        self.events_processed = 0
        self.census: Counter[str] | None = None
        """Set to a Counter to count the messages posted, by type (bench/sim_phases.py)."""
        self._heap: list[tuple[float, int, int, object, object, object]] = []
        self._seq = 0
        self._blocked: set[tuple[str, str]] = set()
        self.addresses = {n: f"{n}:7000" if member_options is None else str(member_options(n).listen) for n in names}
        """The first members' addresses (their URLs' with electors)."""
        if membership is not None:
            first, _ = initial(self.addresses, membership.partitions, membership.replication, membership.strategy,
                               dict(membership.weights) or None)
            self.first = Conf(voters=dict.fromkeys(sorted(names), 1), payload=first)
        self.requests: list[tuple[float, str, str]] = []
        """Membership requests as asked: (true time, "add" or "remove", node)."""
        for n in names:
            t = (start_at or {}).get(n, self.rng.random() * start_jitter if start_jitter else 0.0)
            self.at(t, partial(self._start, n))

    # ------------------------------------------------------------------ scheduling and running

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual time ``t`` (faults, probes)."""
        self._push(t, _ACTION, fn, None, None)

    def run_until(self, t: float) -> None:
        heap, pop, dispatch = self._heap, heapq.heappop, self._dispatch
        while heap and heap[0][0] <= t:
            dispatch(pop(heap))
        self.now = max(self.now, t)

    def run_while(self, pred: Callable[[], bool], limit: float, step: float = 0.05) -> float:
        """Run in slices of ``step`` until ``pred()`` is false or ``limit``; return the time reached."""
        while pred() and self.now < limit:
            self.run_until(min(limit, self.now + step))
        return self.now

    # ------------------------------------------------------------------ faults

    def crash(self, node: str) -> None:
        n = self.nodes[node]
        if not n.up:
            return
        assert n.host is not None
        now = self._local(n, self.now)
        if n.elector is not None:
            n.elector._fence_all()  # the process died: every leadership ends now (at its deadline if earlier)
        else:
            for gid, g in n.host.groups.items():
                if g.state is RaftState.LEADER and g.serving:
                    # leadership ended at the crash, or at the lease end if that came first (a paused leader)
                    end = min(now, g.lease_until)
                    self.history.append(self._on_true_time(n, Recorded(node, now, Fence(gid, end, "crashed"))))
        n.host = n.driver = n.outbox = n.elector = None
        n.up = False
        n.incarnation += 1
        n.wake_at = INF
        self.crashes.append((self.now, node))

    def stop(self, node: str, within: float) -> None:
        """A graceful stop (needs `electors`): the node hands every partition it leads on (`RaftElector._begin_stop`)
        and exits once none is led by it any more, or `within` seconds later (the member's `handover` bound)."""
        n = self.nodes[node]
        if not n.up or n.elector is None or n.elector._stopping:
            return
        inc, limit = n.incarnation, self.now + within

        def check() -> None:
            if not n.up or n.incarnation != inc:
                return
            if self.now < n.paused_until:
                self.at(n.paused_until, check)
            elif n.elector is not None and (n.elector._handed_over(self._local(n, self.now)) or self.now >= limit):
                self.crash(node)
            else:
                self.at(self.now + 0.02, check)

        def begin() -> None:
            if not n.up or n.incarnation != inc:
                return
            if self.now < n.paused_until:
                self.at(n.paused_until, begin)
                return
            assert n.elector is not None and n.driver is not None
            n.elector._begin_stop(self._local(n, self.now))
            self._turn(n, self.now, (), tick=False)
            check()

        begin()

    def restart(self, node: str) -> None:
        if not self.nodes[node].up:
            self._start(node)

    # ------------------------------------------------------------------ membership (with `membership`)

    def join(self, node: str, retry: float = 0.5, until: float = INF) -> None:
        """Start a new node that joins the cluster, asking to be added every `retry` seconds until the committed
        configuration has it as a voter (as `RaftElector._ask_to_join`), or until `until`."""
        if node not in self.nodes:
            self.nodes[node] = _Node(node, [])
        self._start(node)
        self.requests.append((self.now, "add", node))
        self._keep_asking(node, True, retry, until)

    def remove(self, node: str, retry: float = 0.5, until: float = INF) -> None:
        """Ask the cluster to remove `node` (alive or not), again every `retry` seconds until committed."""
        self.requests.append((self.now, "remove", node))
        self._keep_asking(node, False, retry, until)

    def _address(self, node: str) -> str:
        """Where `node` listens: its URL's with electors."""
        return f"{node}:7000" if self.member_options is None else str(self.member_options(node).listen)

    def voters(self) -> list[str]:
        """The voters of the newest committed cluster configuration any live node holds."""
        best: tuple[tuple[int, int], list[str]] = ((-1, -1), [])
        for n in self.nodes.values():
            state = n.host.membership() if n.up and n.host is not None else None
            if state is not None and state[1] and state[0].position > best[0] and not state[0].joint:
                best = (state[0].position, sorted(state[0].voters))
        return best[1]

    def _keep_asking(self, node: str, add: bool, retry: float, until: float) -> None:
        def ask() -> None:
            done = (node in self.voters()) == add
            if done or self.now >= until:
                return
            for n in self.nodes.values():
                host = n.host
                if n.up and host is not None and self.now >= n.paused_until and host.cluster is not None \
                        and host.cluster.state is RaftState.LEADER:
                    now = self._local(n, self.now)
                    if add:
                        host.reconfigure(now, add={node: self._address(node)})
                    else:
                        host.reconfigure(now, remove={node})
                    self._handle_ready(n)
                    break
            self.at(self.now + retry, ask)

        ask()

    def set_rate(self, node: str, rate: float) -> None:
        """From now on `node`'s clock runs at `rate` of true time (until set again)."""
        n = self.nodes[node]
        if n.clock is None:
            n.clock = NodeClock()
        n.clock.set_rate(self.now, rate)
        if n.elector is not None:
            n.elector.clock_changed()
        if n.up and n.driver is not None and self.now >= n.paused_until:
            self._turn(n, self.now, (), tick=False)  # its timers were armed on the old rate: arm them again

    def pause(self, node: str, duration: float) -> None:
        """Freeze ``node`` (SIGSTOP) for ``duration``: nothing is processed until it resumes."""
        n = self.nodes[node]
        n.paused_until = max(n.paused_until, self.now + duration)

    def cut(self, a: Iterable[str], b: Iterable[str], both_ways: bool = True) -> None:
        bs = list(b)
        for x in a:
            for y in bs:
                if x != y:
                    self._blocked.add((x, y))
                    if both_ways:
                        self._blocked.add((y, x))

    def isolate(self, node: str) -> None:
        self.cut([node], [n for n in self.nodes if n != node])

    def heal(self, node: str | None = None) -> None:
        """Every cut (those of `node`, if given) heals."""
        if node is None:
            self._blocked.clear()
        else:
            self._blocked = {(a, b) for a, b in self._blocked if node not in (a, b)}

    # ------------------------------------------------------------------ observation

    def leaders(self) -> dict[int, list[str]]:
        """Per group, the live nodes that believe they lead right now (by their own lease)."""
        res: dict[int, list[str]] = {}
        for n in self.nodes.values():
            if n.up and n.host is not None:
                for gid in n.host.leading(self.now):
                    res.setdefault(gid, []).append(n.name)
        return res

    def leader_counts(self) -> dict[str, int]:
        counts = {name: 0 for name, n in self.nodes.items() if n.up}
        for nodes in self.leaders().values():
            for name in nodes:
                counts[name] += 1
        return counts

    def all_led(self) -> bool:
        """Every group has exactly one leader that is up. Group by group, stopping at the first that has not
        (`settle` asks every heartbeat interval, and until the last time the answer is mostly no)."""
        now, nodes = self.now, self.nodes
        if self.layout is not None:
            led: Counter[int] = Counter()
            for n in nodes.values():
                if n.up and n.host is not None:
                    led.update(gid for gid in n.host.leading(now) if gid != CLUSTER)
            return all(led[p] == 1 for p in range(self.layout.partitions))
        for spec in self.specs:
            gid, leaders = spec.group, 0
            for m in spec.members:
                host = nodes[m].host
                if host is not None and nodes[m].up:
                    g = host.groups.get(gid)
                    if g is not None and g.is_leader(now):
                        leaders += 1
            if leaders != 1:
                return False
        return True

    def live_nodes(self) -> list[str]:
        return [name for name, n in self.nodes.items() if n.up]

    # ------------------------------------------------------------------ internals

    def _on_true_time(self, n: _Node, r: Recorded) -> Recorded:
        """What `n` records now on its own clock, on true time (`carried`)."""
        return carried(n.clock, self.now, r)

    @staticmethod
    def _local(n: _Node, t: float) -> float:
        """True time `t` on `n`'s clock."""
        return t if n.clock is None else n.clock.local(t)

    def _push(self, t: float, kind: int, a: object, b: object, c: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, a, b, c))

    def _start(self, name: str) -> None:
        n = self.nodes[name]
        if self.electors:
            self._start_elector(n)
            return
        host = NodeHost(name, self.config, random.Random(self.rng.getrandbits(64)), self.max_roles.get(name))
        now = self._local(n, self.now)
        if self.layout is not None:
            assert self.first is not None
            first = self.first if name in self.first.voters else Conf(voters={}, learners=(name,))
            host.join_cluster(self.layout, first, now, cast("dict[int, HardState]", dict(n.disk)))
        for gid in n.groups:
            host.add_group(self.specs[gid], now, n.disk.get(gid))
        for gid, count in self.interest.get(name, {}).items():  # the elector's policy (`raft_priority.interest`)
            host.set_roles(gid, count, now)
        n.host = host
        history = self.history

        def record(ready: Ready[Message, HardState], now: float) -> None:
            history.extend(self._on_true_time(n, Recorded(name, now, c)) for c in ready.changes)

        if self.ack_delay > 0:
            outbox = n.outbox = Outbox(host, partial(self._send_batches, name), ack_delay=self.ack_delay)
            io: FunctionIO[Message, HardState] = FunctionIO(
                apply=record, send=outbox.send, halted=_raise, persist=n.disk.update, idle=outbox.send_due)
        else:
            io = FunctionIO(apply=record, send=lambda messages, now: self._send(name, messages), halted=_raise,
                            persist=n.disk.update, idle=_never)
        n.driver = Driver(host, io, name=f"sim-{name}", granularity=self.granularity)
        n.up = True
        n.incarnation += 1
        n.wake_at = INF
        self._arm(n)

    def _start_elector(self, n: _Node) -> None:
        """Start node `n` as a `raft://` member starts (`SimRaftElector`), its events recorded."""
        assert self.member_options is not None and self.first is not None
        n.up = True
        n.incarnation += 1
        n.wake_at = INF
        n.turning = False
        wants = self.interest.get(n.name, {})
        partitions = self.layout.partitions if self.layout is not None else 0
        roles = tuple(p for p in range(partitions) if wants.get(p, 1) > 0)
        e = n.elector = SimRaftElector(
            self, n, self.member_options(n.name), roles, random.Random(self.rng.getrandbits(64)),
            first=n.name in self.first.voters, addresses=self.addresses, disk=cast("dict[int, HardState]", n.disk),
            send=partial(self._send_batches, n.name), wake=partial(self._turn_soon, n), resume=self.resume)
        e.subscribe(Recorder(n.name, self.history, partial(self._on_true_time, n)).event)
        e.start()
        n.host, n.driver, n.outbox = e.host, e.driver, e._outbox
        self._arm(n)

    # ------------------------------------------------------------------ what a node's runtime needs (`World`)

    def local(self, n: _Node) -> float:
        return self._local(n, self.now)

    def at_local(self, n: _Node, local: float, fn: Callable[[], None]) -> None:
        self.at(local if n.clock is None else max(self.now, n.clock.true(local)), fn)

    def held(self, n: _Node, retry: Callable[[], None]) -> bool:
        if self.now < n.paused_until:
            self.at(n.paused_until, retry)
            return True
        return False

    @staticmethod
    def current(n: _Node, inc: int) -> bool:
        return n.up and n.incarnation == inc

    def _turn_soon(self, n: _Node) -> None:
        """Something was posted to `n`'s driver: it takes a turn now (once, however much was posted)."""
        if n.turning or not n.up:
            return
        n.turning = True
        inc = n.incarnation

        def turn() -> None:
            if not self.current(n, inc) or self.held(n, turn):
                return
            n.turning = False
            self._turn(n, self.now, (), tick=False)

        self.at(self.now, turn)

    def close(self) -> None:
        """Let go of every node's host, driver and elector: their references back to the nodes and the world are
        cycles, which left the whole of a big trial (its tens of thousands of groups) to the cyclic garbage
        collector; without them reference counting frees it as it goes."""
        for n in self.nodes.values():
            n.host = n.driver = n.outbox = n.elector = None
            n.up = False
        self._heap.clear()

    def _dispatch(self, ev: tuple[float, int, int, object, object, object]) -> None:
        t, _, kind, a, b, c = ev
        self.now = t
        self.events_processed += 1
        if kind == _ACTION:
            a()  # type: ignore[operator]
            return
        n = self.nodes[a]  # type: ignore[index]
        if not n.up or n.incarnation != b:
            return
        if t < n.paused_until:
            if kind == _WAKE:
                if t != n.wake_at:
                    return
                n.wake_at = n.paused_until
            self._push(n.paused_until, kind, a, b, c)
            return
        host = n.host
        assert host is not None
        if kind == _DELIVER:
            src, msgs = cast("tuple[str, list[Message]]", c)
            if self._blocked and (src, n.name) in self._blocked:
                return
            if (len(msgs) == 1 or (n.outbox is not None and len(msgs) <= 3)) and _beats_only(msgs):
                self._link_batch(n, host, t, msgs)  # between quiet nodes, nearly every batch is beats and acks
                return
            self._turn(n, t, (msgs,), tick=False)
        else:
            if t != n.wake_at:
                return
            n.wake_at = INF
            self._turn(n, t, (), tick=True)

    def _link_batch(self, n: _Node, host: NodeHost, t: float, msgs: list[Message]) -> None:
        """A batch of node beats and acks, stepped straight into the host (`NodeHost.beat`, `beat_ack`): between
        nodes whose quiet groups agree, a beat's only answer is its ack and an ack only counts, so no `Ready` is
        taken and no timer moves; the acks go out at once, or into the outbox to ride along with the next batch.
        Anything else the host accumulated is handed on as the driver would."""
        clock = n.clock
        if clock is not None:
            t = clock.local(t)
        acks: list[NodeBeatAck] = []
        slow = False
        for m in msgs:
            if type(m) is NodeBeatAck:
                if not host.beat_ack(m, t):
                    slow = True
            elif slow:
                host.step_all((m,), t)
            else:
                ack = host.beat(m, t)  # type: ignore[arg-type]
                if ack is None:
                    slow = True
                else:
                    acks.append(ack)
        outbox = n.outbox
        if acks:
            if outbox is None:
                for ack in acks:
                    self._send_ack(n.name, ack)
            else:
                for ack in acks:
                    outbox.defer(ack, t)
        if slow:
            self._handle_ready(n)
        elif outbox is not None:
            due = outbox.due if clock is None else clock.true(outbox.due)
            if due < n.wake_at:
                self._arm_at(n, due)

    def _turn(self, n: _Node, t: float, batches: tuple[list[Message], ...], tick: bool) -> None:
        """The node's driver takes its turn (`Driver.turn`), then its next wake-up is armed (the outbox's next
        acknowledgement due included)."""
        assert n.driver is not None
        clock = n.clock
        if clock is None:
            wake, extra = n.driver.turn(t, batches, tick)
            self._arm_at(n, min(wake, extra))
        else:
            wake, extra = n.driver.turn(clock.local(t), batches, tick)
            self._arm_at(n, clock.true(min(wake, extra)))

    def _handle_ready(self, n: _Node) -> None:
        """After a fast path's step (a node beat or its ack, stepped straight into the host): the driver hands its
        Ready on (`Driver.flush`: persist, changes, send), then the next wake-up is armed."""
        assert n.driver is not None
        n.driver.flush(self._local(n, self.now))
        self._arm(n)

    def _send(self, src: str, msgs: list[Message]) -> None:
        net, rng = self.network, self.rng
        self.messages_sent += len(msgs)
        if net.loss:
            msgs = [m for m in msgs if rng.random() >= net.loss]
        if len(msgs) == 1:
            items: Iterable[tuple[str, list[Message]]] = ((msgs[0].dst, msgs),)
        elif net.batch:
            batches: dict[str, list[Message]] = {}
            for m in msgs:
                batches.setdefault(m.dst, []).append(m)
            items = batches.items()
        else:
            items = ((m.dst, [m]) for m in msgs)
        for dst, batch in items:
            self._post(src, dst, batch)

    def _send_batches(self, src: str, batches: Mapping[str, list[Message]]) -> None:
        """What an outbox sends: batches per peer, as `_send` makes them (the same draws for loss, then delays)."""
        net, rng = self.network, self.rng
        for dst, batch in batches.items():
            self.messages_sent += len(batch)
            if net.loss:
                batch = [m for m in batch if rng.random() >= net.loss]
                if not batch:
                    continue
            self._post(src, dst, batch)

    def _send_ack(self, src: str, ack: NodeBeatAck) -> None:
        """``_send(src, [ack])`` for the lone ack of a routine node beat (most of a big trial's sends), without
        the batching and set-up a step's many messages need; the same draws in the same order."""
        if self.network.loss:
            self._send(src, [ack])
            return
        self.messages_sent += 1
        self._post(src, ack.dst, [ack])

    def _post(self, src: str, dst: str, batch: list[Message]) -> None:
        """One batch onto the wire: its delay drawn (`NetworkModel.sample`, inlined when there are no spikes: same
        draws, same arithmetic; a 100-node trial posts a few hundred thousand batches), after the link's last one
        if links are FIFO; dropped if the link is cut or the receiver is down."""
        if self._blocked and (src, dst) in self._blocked:
            return
        d = self.nodes.get(dst)
        if d is None or not d.up:
            return
        if self.census is not None:
            self.census.update(type(m).__name__ for m in batch)
        net = self.network
        if net.spike_probability:
            at = self.now + net.sample(self.rng)
        else:
            at = self.now + (net.delay_min + self.rng.random() * (net.delay_max - net.delay_min))
        if net.fifo:
            free = d.free_from.get(src, -INF)
            if at < free:
                at = free
            d.free_from[src] = at
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, _DELIVER, dst, d.incarnation, (src, batch)))

    def _arm(self, n: _Node) -> None:
        if not n.up or n.host is None or n.driver is None:
            return
        d = n.host.next_wakeup()
        if n.outbox is not None and n.outbox.due < d:
            d = n.outbox.due
        if n.elector is not None:
            d = min(d, n.elector.due())
        d = n.driver.rounded(d)
        if n.clock is not None:
            d = n.clock.true(d)
        if d < n.wake_at:  # else already woken by then (rounding up and `now` only move it later)
            self._arm_at(n, d)

    def _arm_at(self, n: _Node, d: float) -> None:
        """Wake `n` at `d` (its driver's next tick, rounded up to the granularity), unless it wakes earlier."""
        if d < self.now:
            d = self.now
        if d < n.wake_at:
            n.wake_at = d
            self._push(d, _WAKE, n.name, n.incarnation, None)
