"""Reusable simulated experiments: cold-start distribution and failover after a crash.

Each trial is one seeded :class:`~elect_bench.simulation.raft_world.Simulation`; the benchmark harness and the tests
run many seeds and compare configurations (stock Raft, plain ZEP006, ZEP006 with improvements).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial

from elect_bench.faults.member import Kill
from elect_bench.judging.history import FaultRecord, History
from elect_bench.judging.measures import failovers
from elect_bench.simulation.raft_world import NetworkModel, Simulation
from elect_bench.simulation.recorded import lines_of
from raft_priority.config import RaftConfig
from raft_priority.priorities import assign_priorities


@dataclass(frozen=True, slots=True)
class ColdStart:
    seed: int
    max_leaders: int
    bound: int  # ceil(P / N)
    all_led_at: float  # first time every group had exactly one leader (inf if never)

    @property
    def balanced(self) -> bool:
        return self.max_leaders <= self.bound


@dataclass(frozen=True, slots=True)
class CrashFailover:
    seed: int
    crashed: str
    failover: tuple[float, ...]  # per group the crashed node led: crash -> acquired by a survivor
    max_leaders: int  # per survivor, once failover settled
    bound: int  # ceil(P / (N - 1))

    @property
    def balanced(self) -> bool:
        return self.max_leaders <= self.bound

    @property
    def worst(self) -> float:
        return max(self.failover, default=0.0)


def build(
    nodes: int,
    partitions: int,
    replication: int,
    config: RaftConfig,
    seed: int,
    *,
    strategy: str = "balanced",
    network: NetworkModel | None = None,
    start_jitter: float = 0.1,
    ack_delay: float = 0.0,
    electors: bool = False,
    resume: bool = True,
) -> Simulation:
    """A simulation of `nodes` nodes hosting `partitions` groups of `replication` (`ack_delay`, `electors`, `resume`:
    see `Simulation`)."""
    names = [f"n{i}" for i in range(nodes)]
    assignment = _assignment(nodes, partitions, replication, strategy)
    return Simulation(assignment, config, seed, network, nodes=names, start_jitter=start_jitter, ack_delay=ack_delay,
                      electors=electors, resume=resume)


@cache
def _assignment(nodes: int, partitions: int, replication: int, strategy: str) -> tuple[dict[str, int], ...]:
    """`assign_priorities` of nodes n0..n{nodes-1}, computed once per process: it is the same for every seed
    (the Simulation copies each entry) and costs a 10,000-partition trial about a tenth of its time."""
    return tuple(assign_priorities([f"n{i}" for i in range(nodes)], partitions, replication, strategy))


def run_until_led(sim: Simulation, limit: float) -> float:
    """Run until every group has one leader; return that time (inf if not by ``limit``)."""
    step = sim.config.heartbeat_interval
    while not sim.all_led():
        if sim.now >= limit:
            return math.inf
        sim.run_until(sim.now + step)
    return sim.now


def cold_start(
    nodes: int,
    partitions: int,
    replication: int,
    config: RaftConfig,
    seed: int,
    *,
    strategy: str = "balanced",
    network: NetworkModel | None = None,
    start_jitter: float = 0.1,
    observe_at: float | None = None,
    ack_delay: float = 0.0,
) -> ColdStart:
    """Start all nodes together (within ``start_jitter``); count leaders per node at ``observe_at``
    (default: 3 election timeouts, before any rebalancing hysteresis could act)."""
    sim = build(nodes, partitions, replication, config, seed, strategy=strategy, network=network,
                start_jitter=start_jitter, ack_delay=ack_delay)
    return _observe_cold_start(sim, seed, partitions, observe_at)


def _observe_cold_start(sim: Simulation, seed: int, partitions: int, observe_at: float | None = None,
                        settled: Callable[[], None] | None = None) -> ColdStart:
    """Settle a freshly built simulation (then call `settled`) and count leaders per node at `observe_at` (default
    3 ET)."""
    et = sim.config.election_timeout
    led_at = run_until_led(sim, 10 * et)
    if settled is not None:
        settled()
    sim.run_until(max(sim.now, observe_at if observe_at is not None else 3 * et))
    counts = sim.leader_counts()
    return ColdStart(seed, max(counts.values(), default=0), -(-partitions // len(sim.nodes)), led_at)


def crash_one(
    nodes: int,
    partitions: int,
    replication: int,
    config: RaftConfig,
    seed: int,
    *,
    strategy: str = "balanced",
    network: NetworkModel | None = None,
    start_jitter: float = 0.1,
    victim: str | None = None,
    ack_delay: float = 0.0,
) -> CrashFailover:
    """Cold start, settle, crash one node (seeded choice) at a random phase of the heartbeat cycle, and
    measure each of its groups' failover and the survivors' leader counts afterwards."""
    return trial(nodes, partitions, replication, config, seed, strategy=strategy, network=network,
                 start_jitter=start_jitter, victim=victim, ack_delay=ack_delay)[1]


def trial(
    nodes: int,
    partitions: int,
    replication: int,
    config: RaftConfig,
    seed: int,
    *,
    strategy: str = "balanced",
    network: NetworkModel | None = None,
    start_jitter: float = 0.1,
    victim: str | None = None,
    ack_delay: float = 0.0,
    mark: Callable[[str, Simulation], None] | None = None,
) -> tuple[ColdStart, CrashFailover]:
    """`cold_start` and `crash_one` of one seed from one simulation: the crash runs on from the cold start's
    observation at 3 election timeouts, so both come out exactly as from two runs, at half the cost. `mark`, if
    given, is called at the end of each phase ("built", "all led", "observed", "re-led") with the simulation: where
    a trial's time goes (bench/sim_phases.py)."""
    def phase(name: str) -> None:
        if mark is not None:
            mark(name, sim)

    sim = build(nodes, partitions, replication, config, seed, strategy=strategy, network=network,
                start_jitter=start_jitter, ack_delay=ack_delay)
    phase("built")
    et = config.election_timeout
    cold = _observe_cold_start(sim, seed, partitions, settled=partial(phase, "all led"))
    phase("observed")
    rng = random.Random(seed)
    sim.run_until(sim.now + rng.random() * config.heartbeat_interval)
    victim = victim if victim is not None else f"n{rng.randrange(nodes)}"
    led = [g for g, ns in sim.leaders().items() if victim in ns]
    at = sim.now
    sim.crash(victim)
    run_until_led(sim, at + 10 * et)
    sim.run_until(max(sim.now, at + 0.5 * et))
    phase("re-led")
    fault = FaultRecord(at, Kill.name, victim)
    times = {f.role: f.latency for f in failovers(History(lines_of(sim.history), [fault]), fault)}
    counts = sim.leader_counts()
    sim.close()
    return cold, CrashFailover(
        seed, victim, tuple(_or_never(times.get(str(g))) for g in led), max(counts.values(), default=0),
        -(-partitions // (nodes - 1))
    )


def chaos(
    nodes: int,
    partitions: int,
    replication: int,
    config: RaftConfig,
    seed: int,
    *,
    duration: float = 8.0,
    faults: int = 6,
    strategy: str = "balanced",
    network: NetworkModel | None = None,
) -> Simulation:
    """Random crashes, restarts, pauses, cuts (one- and two-way) during ``duration``; then everything
    heals (all nodes up, no cuts) at ``duration + 3 ET``. Returns the simulation stopped at the heal;
    the caller runs on (e.g. :func:`settle`) to see how fast leadership recovers."""
    net = network or NetworkModel(loss=0.05, spike_probability=0.02, spike_delay=0.3)
    sim = build(nodes, partitions, replication, config, seed, strategy=strategy, network=net, start_jitter=0.3)
    rng = random.Random(seed ^ 0x5EED)
    names = list(sim.nodes)
    et = config.election_timeout
    for _ in range(faults):
        t = rng.uniform(0.5, duration)
        victim = rng.choice(names)
        kind = rng.randrange(4)
        if kind == 0:
            sim.at(t, partial(sim.crash, victim))
            sim.at(t + rng.uniform(0.01, 3 * et), partial(sim.restart, victim))
        elif kind == 1:
            sim.at(t, partial(sim.pause, victim, rng.uniform(0.1, 3 * et)))
        else:
            side = rng.sample(names, rng.randint(1, max(1, len(names) // 2)))
            rest = [n for n in names if n not in side]
            sim.at(t, partial(sim.cut, side, rest, kind == 2))
            sim.at(t + rng.uniform(0.1, 3 * et), sim.heal)

    def heal_all() -> None:
        sim.heal()
        for n in names:
            sim.restart(n)

    sim.at(duration + 3 * et, heal_all)
    sim.run_until(duration + 3 * et)
    return sim


def _or_never(latency: float | None) -> float:
    return math.inf if latency is None else latency
