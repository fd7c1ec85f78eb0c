"""Simulation runs: what real processes on two cores cannot reach.

The Raft election core the `raft://` members run, in deterministic simulation with virtual time
(elect_bench.simulation.raft_world): thousands of seeded trials, and groups up to 100 nodes x 10,000 partitions. Each
trial is a cold start (is the leader distribution balanced? when was every group led?) and a crash of
one node (failover of each group it led; is the distribution balanced among the survivors?). Times are
*simulated* seconds (`world.NetworkModel`'s default network, no CPU contention); the wall-clock time each cell
took is reported beside them. The methods are configured from the same URLs as the real runs
(bench.methods), so a simulated `raft-zeebe` is exactly the real one's configuration.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from elect import config
from elect.errors import ConfigError
from elect_bench.judging.measures import Summary
from elect_bench.methods import Group, method_spec, split_spec
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance

if TYPE_CHECKING:
    from elect_bench.simulation.experiments import ColdStart, CrashFailover
    from raft_priority.config import RaftConfig

SIM_METHODS = ("raft", "raft-zeebe", "raft-stock")


@dataclass(frozen=True)
class RaftShape:
    """A group to simulate; `replication` nodes per partition (None: every node, as the real runs)."""

    nodes: int
    partitions: int
    trials: int
    replication: int | None = None

    @property
    def rf(self) -> int:
        return self.nodes if self.replication is None else self.replication


@dataclass(frozen=True)
class SimScenario:
    name: str = "sim"
    budget: float = 1.0
    methods: tuple[str, ...] = SIM_METHODS
    shapes: tuple[RaftShape, ...] = (RaftShape(3, 6, 200),)
    workers: int = 0  # processes running trials side by side (0: one per core); results do not depend on it

    def __post_init__(self) -> None:
        for m in self.methods:  # each a method of SIM_METHODS, with URL parameters of its own if any
            split_spec(m.split(), SIM_METHODS)
        for s in self.shapes:
            if s.nodes < 2 or s.partitions < 1 or s.trials < 1 or not 2 <= s.rf <= s.nodes:
                raise ConfigError(f"a shape needs nodes >= 2, partitions >= 1, trials >= 1, 2 <= replication <= "
                                  f"nodes; got {s}", parameter="shapes")
        if self.budget <= 0:
            raise ConfigError("budget must be > 0", parameter="budget")
        if self.workers < 0:
            raise ConfigError("workers must be >= 0 (0: one per core)", parameter="workers")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SimScenario:
        known = {"name", "budget", "methods", "shapes", "workers"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown simulation scenario key(s) {unknown}; known: {sorted(known)}")
        shapes = []
        for raw in data.get("shapes", []):
            try:
                numbers = [int(x) for x in raw]
                if len(numbers) not in (3, 4):
                    raise ValueError
            except (TypeError, ValueError):
                raise ConfigError(f"a shape is [nodes, partitions, trials] or [nodes, partitions, trials, "
                                  f"replication]; got {raw!r}", parameter="shapes") from None
            shapes.append(RaftShape(*numbers))
        methods = data.get("methods", SIM_METHODS)
        if isinstance(methods, str):  # a comma-separated list; a method may carry KEY=VALUE parameters
            methods = [m.strip() for m in methods.split(",") if m.strip()]
        return cls(str(data.get("name", "sim")), float(data.get("budget", 1.0)), tuple(methods),
                   tuple(shapes) or cls.shapes, int(data.get("workers", 0)))


@dataclass
class SimCell:
    method: str
    shape: RaftShape
    balanced: list[bool] = field(default_factory=list)        # cold start, per trial
    all_led_at: list[float] = field(default_factory=list)     # cold start: every group led (simulated s)
    failover: list[float] = field(default_factory=list)       # per group the crashed node led
    unrecovered: int = 0                                      # groups no survivor took within 10 ET
    after_balanced: list[bool] = field(default_factory=list)  # among survivors, per trial
    wall: float = 0.0

    def summary(self, budget: float) -> dict[str, Any]:
        fo = Summary.of(self.failover)
        led = [t for t in self.all_led_at if math.isfinite(t)]
        return {"method": self.method, "nodes": self.shape.nodes, "partitions": self.shape.partitions,
                "replication": self.shape.rf, "trials": self.shape.trials, "cold_balanced": _share(self.balanced),
                "all_led_p50": Summary.of(led).p50, "never_led": len(self.all_led_at) - len(led),
                "failover_n": fo.n, "failover_p50": fo.p50, "failover_p99": fo.p99, "failover_max": fo.max,
                "failover_p99_ratio": fo.p99 / budget if fo.n else math.nan, "unrecovered": self.unrecovered,
                "after_balanced": _share(self.after_balanced), "wall": self.wall}


@dataclass
class SimResult:
    scenario: SimScenario
    cells: list[SimCell]
    made: Provenance

    def to_json(self) -> dict[str, Any]:
        s = self.scenario
        return {**self.made.to_json(), "scenario": {"name": s.name, "budget": s.budget, "methods": list(s.methods),
                             "shapes": [[x.nodes, x.partitions, x.trials, x.rf] for x in s.shapes]},
                "summary": [c.summary(s.budget) for c in self.cells],
                "trials": [{"method": c.method, "nodes": c.shape.nodes, "partitions": c.shape.partitions,
                            "balanced": c.balanced, "all_led_at": c.all_led_at, "failover": c.failover,
                            "after_balanced": c.after_balanced} for c in self.cells]}


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


def core_config(method: str, shape: RaftShape, budget: float) -> tuple[Any, str]:
    """The election core's configuration and priority strategy of `method`, from the URL a real member
    of that method would be given."""
    from raft_priority.elector import raft_config

    options = member_options(method, shape, budget)
    return raft_config(options), options.strategy


def acks_after(method: str, shape: RaftShape, budget: float) -> float:
    """How long a member of `method` lets heartbeat acknowledgements wait to ride along with its next batch to the
    same peer (`RaftOptions.acks_after`): the simulated nodes send through the same outbox."""
    return float(member_options(method, shape, budget).acks_after)


def member_options(method: str, shape: RaftShape, budget: float, member: str = "n0") -> Any:
    """The options real member `member` (of n0..n{nodes-1}) of `method` is given for this shape at detection budget
    `budget` (its URL's; its peers' ports numbered, not taken: a simulation listens nowhere)."""
    ids = [f"n{i}" for i in range(shape.nodes)]
    group = Group(ids, shape.partitions, "sim", ports=lambda n: list(range(1, n + 1)))
    url = method_spec(method, SIM_METHODS).member_urls(group, budget)[member]
    return config.spec_from_url(url).options


def _trial(job: tuple[RaftShape, RaftConfig, str, int, float]) -> tuple[ColdStart, CrashFailover]:
    """One seed's cold start and crash (elect_bench.simulation.experiments.trial), in a worker process.

    The cyclic garbage collector is off meanwhile: a 10,000-partition trial allocates millions of short-lived
    objects among a few hundred thousand long-lived ones (its groups), so collections that find nothing cost
    it a fifth of its time; what it leaves is freed by reference counting, the rest by the next collection."""
    import gc

    from elect_bench.simulation import experiments

    s, cfg, strategy, seed, ack_delay = job
    enabled = gc.isenabled()
    gc.disable()
    try:
        return experiments.trial(s.nodes, s.partitions, s.rf, cfg, seed, strategy=strategy, ack_delay=ack_delay)
    finally:
        if enabled:
            gc.enable()


def _chunk(shape: RaftShape, workers: int) -> int:
    """Trials per task: enough small ones that handing them over costs nothing next to running them, but no more
    than about 20,000 group members' worth (a few seconds), so that the last chunk leaves no worker idle for
    long (100 nodes x 10,000 partitions at RF 3 takes seconds a trial: one at a time)."""
    return max(1, min(shape.trials // (8 * workers), 20_000 // (shape.partitions * shape.rf)))


def run(scenario: SimScenario, progress: Progress, command: str = "") -> SimResult:
    """Every cell's trials, seeds 0..trials-1, over `scenario.workers` processes. Results are taken in seed order
    whatever finishes first, so a seed gives the same figures with any number of workers."""
    from concurrent.futures import ProcessPoolExecutor

    made = Provenance.begin(command)
    cells = [SimCell(m, s) for s in scenario.shapes for m in scenario.methods]
    total = sum(c.shape.trials for c in cells)
    done = 0
    workers = scenario.workers or os.cpu_count() or 1
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for cell in cells:
            s = cell.shape
            name = f"{cell.method} / {s.nodes} nodes x {s.partitions} partitions, RF {s.rf} (simulated)"
            cfg, strategy = core_config(cell.method, s, scenario.budget)
            delay = acks_after(cell.method, s, scenario.budget)
            t0 = time.monotonic()
            jobs = [(s, cfg, strategy, seed, delay) for seed in range(s.trials)]
            for seed, (cold, crash) in enumerate(pool.map(_trial, jobs, chunksize=_chunk(s, workers))):
                cell.balanced.append(cold.balanced)
                cell.all_led_at.append(cold.all_led_at)
                cell.failover += [t for t in crash.failover if math.isfinite(t)]
                cell.unrecovered += sum(1 for t in crash.failover if not math.isfinite(t))
                cell.after_balanced.append(crash.balanced)
                done += 1
                progress(name, done, total, f"trial {seed + 1}/{s.trials}")
            cell.wall = time.monotonic() - t0
    return SimResult(scenario, cells, made.tick())


COLUMNS = [
    ("method", "method", "{}"), ("nodes", "nodes", "{}"), ("partitions", "partitions", "{}"),
    ("replication", "RF", "{}"), ("trials", "trials", "{}"), ("cold_balanced", "balanced cold start", "{:.0%}"),
    ("all_led_p50", "all led p50", "{:.2f} s"), ("failover_p50", "failover p50", "{:.2f} s"),
    ("failover_p99", "p99", "{:.2f} s"), ("failover_max", "max", "{:.2f} s"),
    ("failover_p99_ratio", "p99/budget", "{:.2f}"), ("unrecovered", "unrecovered", "{}"),
    ("after_balanced", "balanced after crash", "{:.0%}"), ("wall", "wall", "{:.1f} s"),
]


def rows(result: SimResult) -> list[list[str]]:
    def cell(value: Any, fmt: str) -> str:
        return "-" if isinstance(value, float) and math.isnan(value) else fmt.format(value)

    return [[cell(summary[key], fmt) for key, _, fmt in COLUMNS]
            for summary in (c.summary(result.scenario.budget) for c in result.cells)]


def provenance(result: SimResult) -> str:
    return (f"{result.made.header()} Deterministic simulation of the Raft core (seeds 0..trials-1), election "
            f"timeout = detection budget {result.scenario.budget:g} s; latencies are simulated seconds, `wall` is real "
            "time per cell.")
