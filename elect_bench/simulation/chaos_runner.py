"""`elect bench sim-lease`, `elect bench sim-neli`, `elect bench sim-raft`: many seeds of simulated chaos per lease,
NELI or Raft method, each judged by the real checker.

Every seed is one schedule of faults (`elect_bench.simulation.seeded_chaos`) against a simulated group running the
real core and driver (against a simulated etcd, ZooKeeper or Kafka broker; Raft's nodes with their electors' policy
over simulated links); a seed that breaks a promise is listed with what
broke, so anyone can replay it (`replay(method, seed)`). Seeds run in worker processes whose string hashing is fixed
(see `elect_bench.simulation.seeded_chaos`); results are taken in seed order, so they do not depend on the number of
workers, and the seeds a cell has done are always its first ones: a checkpoint (`run`'s `checkpoint`, every few
seconds) lets a run cut short go on where it stopped (`elect bench ... --resume`).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from elect.errors import ConfigError
from elect_bench.faults.base import Fault
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance
from elect_bench.simulation.seeded_chaos import (
    FAULTS,
    KINDS,
    LEASE_KINDS,
    MEMBERSHIP_FAULTS,
    NELI_KINDS,
    RAFT_FAULTS,
    RAFT_KINDS,
    ChaosShape,
    Outcome,
    chaos,
    clock_bound,
    leaderless_bound,
    replay_pool,
)


@dataclass(frozen=True)
class ChaosScenario:
    name: str = "sim-lease"
    methods: tuple[str, ...] = LEASE_KINDS
    seeds: int = 300
    first_seed: int = 0
    shape: ChaosShape = field(default_factory=ChaosShape)
    workers: int = 0  # processes running seeds side by side (0: one per core)
    drift: float | None = None
    """Members' clocks up to this far apart (`chaos`'s `drift`) instead of the bound each method states."""

    def __post_init__(self) -> None:
        for m in self.methods:
            if m not in KINDS:
                raise ConfigError(f"no seeded chaos simulation of {m!r}; one of {', '.join(KINDS)}",
                                  parameter="methods")
        if self.seeds < 1:
            raise ConfigError("seeds must be >= 1", parameter="seeds")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> ChaosScenario:
        known = {f.name for f in fields(cls)} | {f.name for f in fields(ChaosShape)} | {"kind"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(f"unknown chaos scenario keys: {', '.join(unknown)}", parameter=unknown[0])
        methods = raw.get("methods", LEASE_KINDS)
        methods = tuple(methods.split(",") if isinstance(methods, str) else methods)
        given = {f.name: type(getattr(ChaosShape(), f.name))(raw[f.name]) for f in fields(ChaosShape) if f.name in raw}
        shape = ChaosShape(**given)
        return cls(name=str(raw.get("name", cls.name)), methods=methods, seeds=int(raw.get("seeds", cls.seeds)),
                   first_seed=int(raw.get("first_seed", 0)), shape=shape, workers=int(raw.get("workers", 0)),
                   drift=None if raw.get("drift") is None else float(raw["drift"]))


@dataclass
class ChaosCell:
    method: str
    seeds: int = 0
    violating: list[tuple[int, list[str]]] = field(default_factory=list)  # (seed, what broke)
    faults: Counter[str] = field(default_factory=Counter)
    events: int = 0
    lines: int = 0
    wall: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.seeds += 1
        self.events += outcome.events
        self.lines += outcome.lines
        self.faults.update(f.kind for f in outcome.faults)
        if outcome.violations:
            self.violating.append((outcome.seed, [str(v) for v in outcome.violations]))

    def to_json(self) -> dict[str, Any]:
        """Everything `add` accumulated, for a checkpoint (`from_json`)."""
        return {"method": self.method, "seeds": self.seeds, "violating": self.violating, "faults": dict(self.faults),
                "events": self.events, "lines": self.lines, "wall": self.wall}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ChaosCell:
        return cls(str(raw["method"]), int(raw["seeds"]), [(int(seed), list(what)) for seed, what in raw["violating"]],
                   Counter({str(k): int(v) for k, v in raw["faults"].items()}), int(raw["events"]),
                   int(raw["lines"]), float(raw["wall"]))

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "seeds": self.seeds, "faults": sum(self.faults.values()),
                "violating": len(self.violating), "first": self.violating[0][0] if self.violating else "-",
                "events": self.events // max(1, self.seeds), "lines": self.lines // max(1, self.seeds),
                "per_second": self.seeds / self.wall if self.wall else 0.0, "wall": self.wall}


@dataclass
class ChaosResult:
    scenario: ChaosScenario
    cells: list[ChaosCell]
    made: Provenance

    def to_json(self) -> dict[str, Any]:
        s = self.scenario
        return {**self.made.to_json(), "scenario": {"name": s.name, "methods": list(s.methods), "seeds": s.seeds,
                             "first_seed": s.first_seed, "shape": s.shape.__dict__, "drift": s.drift},
                "summary": [c.summary() for c in self.cells], "cells": [c.to_json() for c in self.cells],
                "violating": {c.method: c.violating for c in self.cells},
                "faults": {c.method: dict(c.faults) for c in self.cells}}


def _seeds(job: tuple[str, ChaosShape, int, int, float | None]) -> list[Outcome]:
    method, shape, first, count, drift = job
    return [chaos(method, seed, shape, drift=drift) for seed in range(first, first + count)]


CHECKPOINT_EVERY = 10.0
"""Seconds between checkpoints of a long run (each writes its violating seeds so far: small)."""


def run(scenario: ChaosScenario, progress: Progress, command: str = "",
        checkpoint: Callable[[ChaosResult], None] | None = None,
        resume: Mapping[str, Any] | None = None) -> ChaosResult:
    """Every method's seeds `first_seed .. first_seed + seeds - 1`. `checkpoint` gets the result so far every
    `CHECKPOINT_EVERY` seconds; `resume`, such a checkpoint of this same scenario (`to_json`): its seeds are kept
    and not run again, and the run's command, start and seconds carry on from it."""
    cells = _resumed(scenario, resume) if resume is not None else [ChaosCell(m) for m in scenario.methods]
    made = Provenance.begin(command, resume)

    def so_far() -> ChaosResult:
        return ChaosResult(scenario, cells, made.tick())

    total, done = len(cells) * scenario.seeds, sum(c.seeds for c in cells)
    workers = scenario.workers or os.cpu_count() or 1
    chunk = max(1, min(50, scenario.seeds // (4 * workers)))
    last = time.monotonic()
    with replay_pool(workers) as pool:
        for cell in cells:
            t0, before = time.monotonic(), cell.wall
            end = scenario.first_seed + scenario.seeds
            jobs = [(cell.method, scenario.shape, first, min(chunk, end - first), scenario.drift)
                    for first in range(scenario.first_seed + cell.seeds, end, chunk)]
            for outcomes in pool.map(_seeds, jobs):
                for outcome in outcomes:
                    cell.add(outcome)
                done += len(outcomes)
                cell.wall = before + time.monotonic() - t0
                progress(f"{cell.method} (simulated)", done, total,
                         f"seed {outcomes[-1].seed}, {len(cell.violating)} violating")
                if checkpoint is not None and time.monotonic() - last >= CHECKPOINT_EVERY:
                    checkpoint(so_far())
                    last = time.monotonic()
    return so_far()


def _resumed(scenario: ChaosScenario, resume: Mapping[str, Any]) -> list[ChaosCell]:
    """The cells of a checkpoint of this same scenario (the same methods, seeds and shape), as far as they got."""
    ours = ChaosResult(scenario, [], Provenance("", 0.0)).to_json()["scenario"]
    theirs = dict(resume.get("scenario", {}))
    differ = sorted(k for k in ours if json.loads(json.dumps(ours[k])) != theirs.get(k))
    if differ or "cells" not in resume:
        raise ConfigError(f"the checkpoint is of another run: {', '.join(differ) or 'no cells'} differ "
                          f"({'; '.join(f'{k}: {theirs.get(k)!r} there, {ours[k]!r} here' for k in differ[:3])})",
                          parameter="resume")
    return [ChaosCell.from_json(c) for c in resume["cells"]]


COLUMNS = [
    ("method", "method", "{}"), ("seeds", "seeds", "{}"), ("faults", "faults", "{}"),
    ("violating", "seeds violating", "{}"), ("first", "first violating seed", "{}"),
    ("events", "events/seed", "{}"), ("lines", "event lines/seed", "{}"), ("per_second", "seeds/s", "{:.1f}"),
    ("wall", "wall", "{:.0f} s"),
]


def provenance(result: ChaosResult) -> str:
    s = result.scenario
    bounds = ", ".join(f"{leaderless_bound(m, s.shape):g}" for m in s.methods)
    return (f"{result.made.header()} Deterministic simulation of {_simulated(s.methods)} (seeds "
            f"{s.first_seed}..{s.first_seed + s.seeds - 1}): {s.shape.members} members, {s.shape.roles} roles, "
            f"TTL (session timeout) {s.shape.ttl:g} s, {s.shape.faults} faults per seed over "
            f"{s.shape.duration:g} s, drawn from "
            f"{', '.join(f.name for f in _faults(s.methods))}{_beside(s)}; every role must be led "
            f"again within {bounds} s of the heal (per method, in order).")


def _beside(s: ChaosScenario) -> str:
    """The clock-rate episodes a lease or NELI seed draws beside its faults (`seeded_chaos.strike`), and the bound
    a drift keeps to."""
    stated = ", ".join(f"{m} {clock_bound(m, s.shape):.3g}" for m in s.methods)
    bound = (f"max_drift {s.drift:g} (not the bound each method states)" if s.drift is not None else
             f"max_drift as each method states it: {stated}")
    if all(m in RAFT_KINDS for m in s.methods):
        return f" (a drift at (1 + max_drift) ** x of true time, |x| <= 1/2; {bound})"
    if not s.shape.drifts:
        return ""
    return (f", and beside them {s.shape.drifts} drifts (a member's monotonic clock at (1 + max_drift) ** x of true "
            f"time, |x| <= 1/2, for up to 3 TTLs; wall clocks stay true, as NTP keeps them; {bound})")


def _faults(methods: tuple[str, ...]) -> tuple[type[Fault], ...]:
    """The faults drawn: Raft has no server to freeze; `raft-members` adds, removes and replaces nodes too."""
    if methods and all(m == "raft-members" for m in methods):
        return MEMBERSHIP_FAULTS
    return RAFT_FAULTS if all(m in RAFT_KINDS for m in methods) else FAULTS


def _simulated(methods: tuple[str, ...]) -> str:
    what = []
    if any(m in LEASE_KINDS for m in methods):
        what.append("the lease core and driver against a simulated store")
    if any(m in NELI_KINDS for m in methods):
        what.append("the NELI core and driver against a simulated Kafka broker (its group coordinator and partition "
                    "logs; the -eager kinds use the classic protocol's range assignor)")
    if any(m in RAFT_KINDS for m in methods):
        what.append("raft:// nodes, their election cores and their electors' renewal policy "
                    "(raft_priority.renewals), over simulated links (in order, 2 % of batches 50 ms late), a "
                    "partition per role, the TTL as the election timeout (raft has no infra-pause; its cuts are one "
                    "way or both; a drift runs a node's clock at another rate, within the stated max_drift)")
    if "raft-members" in methods:
        what.append("(raft-members) nodes started as raft:// nodes start, with the cluster group and partitions "
                    "following its configuration: `add` starts a new node that joins and asks until it is a voter, "
                    "`remove` removes a voter drawn at the strike, `replace` does both, within 2 to 6 voters")
    return " and ".join(what)


NOTES = ("Each seed is judged by the checker real runs use (elect_bench.judging.checker): *violating* seeds had two "
         "members believing they led one role at once (NELI full above its exclusivity bound: for longer than T "
         "plus one heartbeat interval), a token that did not grow, or a role unled for longer than the bound after "
         "everything healed. `replay(method, seed)` in elect_bench.simulation.seeded_chaos replays a seed exactly.")
