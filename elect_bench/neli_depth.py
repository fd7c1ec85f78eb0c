"""NELI (kafka://) in depth: failover, handover overlap and distribution under crash, graceful stop and
freeze, beside the broker's own rebalance time.

Each cell is a method, or a variant of one with URL parameters of its own (full mode's T), under one fault,
run through the suite like any scenario's cells. Beyond the suite's measures a cell reports, per role the
victim led, the *overlap* after the fault (a full-mode leaver leads on for T after SIGTERM; a frozen one until
T passes) and *survivor fences*: `fenced` events of members the fault did not strike (should be 0). The
rebalance rows fault one of a group of bare confluent-kafka consumers instead (elect_bench.rebalance).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect.errors import ConfigError
from elect_bench import suite
from elect_bench.faults import Fault, MemberFault, fault
from elect_bench.judging.history import History
from elect_bench.judging.measures import Summary, handover_overlaps, survivor_fences
from elect_bench.methods import METHODS, Method, split_spec
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance
from elect_bench.rebalance import rebalance_time
from elect_bench.scenario import Scenario, listed


@dataclass(frozen=True)
class Handover:
    """One cell: a method, with URL parameters of its own if any, under one fault."""

    method: str
    fault: Fault
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Handover:
        """`METHOD FAULT [KEY=VALUE ...]`, e.g. `kafka-full pause heartbeat_timeout=3.5`."""
        words = text.split()
        if len(words) < 2:
            raise ConfigError(f"a cell is 'METHOD FAULT [KEY=VALUE ...]'; got {text!r}", parameter="cells")
        name, params = split_spec([words[0], *words[2:]])
        return cls(name, fault(words[1]), tuple(params.items()))

    @property
    def as_method(self) -> Method:
        base = METHODS[self.method]
        return base.variant(dict(self.params)) if self.params else base


@dataclass(frozen=True)
class NeliScenario:
    """rebalance: the faults to strike bare consumers with (as many consumers as members, partitions as roles),
    on each of `protocols` (the group protocols: classic, and KIP-848's consumer). broker: which Kafka broker
    (elect_cluster.local.BROKERS; `apache-defaults`: Apache Kafka with its group settings at Kafka's defaults)."""

    name: str = "neli"
    budget: float = 1.0
    members: int = 3
    roles: int = 20
    trials: int = 20
    hold: float = 4.0
    cells: tuple[Handover, ...] = ()
    rebalance: tuple[MemberFault, ...] = ()
    protocols: tuple[str, ...] = ("classic",)
    broker: str = "apache"

    def __post_init__(self) -> None:
        if not self.cells and not self.rebalance:
            raise ConfigError("a NELI scenario needs cells or rebalance faults", parameter="cells")
        if unknown := sorted(set(self.protocols) - {"classic", "consumer"}):
            raise ConfigError(f"unknown group protocol(s) {unknown}; known: classic, consumer", parameter="protocols")
        if self.rebalance and "kafka" not in self.base.needs:
            raise ConfigError("rebalance rows need a kafka method among the cells (for the broker)",
                              parameter="rebalance")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> NeliScenario:
        given = {k: v for k, v in data.items() if k != "kind"}
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(given) - known)
        if unknown:
            raise ConfigError(f"unknown NELI scenario key(s) {unknown}; known: {sorted(known)}")
        given["cells"] = tuple(Handover.parse(str(c)) for c in listed(given.get("cells", [])))
        given["rebalance"] = tuple(_consumer_fault(str(f)) for f in listed(given.get("rebalance", [])))
        if "protocols" in given:
            given["protocols"] = tuple(str(p) for p in listed(given["protocols"]))
        return cls(**given)

    @property
    def base(self) -> Scenario:
        """The suite's view of it: the infrastructure to start, the group's shape, the hold."""
        return Scenario(self.name, self.budget, self.members, self.roles, self.trials, self.hold,
                        faults=tuple(dict.fromkeys(c.fault for c in self.cells)),
                        methods=tuple(dict.fromkeys(c.method for c in self.cells)), broker=self.broker)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "neli", "name": self.name, "budget": self.budget, "members": self.members,
                "roles": self.roles, "trials": self.trials, "hold": self.hold,
                "cells": [" ".join([c.method, c.fault.name, *(f"{k}={v}" for k, v in c.params)]) for c in self.cells],
                "rebalance": [f.name for f in self.rebalance], "protocols": list(self.protocols),
                "broker": self.broker}


def _consumer_fault(name: str) -> MemberFault:
    chosen = fault(name)
    if not isinstance(chosen, MemberFault) or chosen.needs_hosts:
        raise ConfigError(f"bare consumers can be struck by a member fault on this host, not {name!r}",
                          parameter="rebalance")
    return chosen


@dataclass
class RebalanceCell:
    """One fault to bare consumers, repeated: seconds until the survivors were assigned the victim's partitions."""

    fault: MemberFault
    trials: int
    protocol: str = "classic"
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        took = Summary.of(self.seconds)
        return {key: math.nan for key, _, _ in COLUMNS} | {
            "method": self.name, "fault": self.fault.name, "trials": self.trials, "ok": took.n,
            "failover_p50": took.p50, "failover_p99": took.p99, "failover_max": took.max,
            "errors": self.errors[:3]}

    @property
    def name(self) -> str:
        return "raw consumers" + (" (KIP-848)" if self.protocol == "consumer" else "")


@dataclass
class NeliResult:
    scenario: NeliScenario
    run: suite.RunResult  # the member cells, as any scenario's (plots read it)
    rebalance: list[RebalanceCell]

    @property
    def ok(self) -> bool:
        return self.run.ok and not any(c.errors for c in self.rebalance)

    def summaries(self) -> list[dict[str, Any]]:
        members = [c.summary(self.scenario.budget) | _handovers(c) for c in self.run.cells]
        return [*members, *(c.summary() for c in self.rebalance)]

    def to_json(self) -> dict[str, Any]:
        return self.run.to_json() | {
            "scenario": self.scenario.to_json(), "summary": self.summaries(),
            "rebalance": [{"fault": c.fault.name, "protocol": c.protocol, "seconds": c.seconds, "errors": c.errors}
                          for c in self.rebalance]}


def _handovers(cell: suite.Cell) -> dict[str, Any]:
    """The overlap per role the victim led, and the survivors' fences, over the cell's trials."""
    overlap: list[float] = []
    fences = 0
    for trial in cell.trials:
        history = History.from_json(trial.history)
        if trial.ok and history.faults:
            overlap += handover_overlaps(history, history.faults[0])
            fences += survivor_fences(history, history.faults[0])
    took = Summary.of(overlap)
    return {"overlap_p50": took.p50, "overlap_p99": took.p99, "overlap_max": took.max, "survivor_fences": fences}


def run(scenario: NeliScenario, workdir: Path, progress: Progress, command: str = "") -> NeliResult:
    made = Provenance.begin(command)
    shared = scenario.base
    skipped = {m: why for m in shared.methods if (why := suite.available(m))}
    cells = [suite.Cell(c.as_method, c.fault, scenario.members) for c in scenario.cells if c.method not in skipped]
    rebalance = [RebalanceCell(f, scenario.trials, p) for p in scenario.protocols for f in scenario.rebalance]
    with suite.environment(shared, workdir) as env:
        suite.run_cells(shared, cells, env, progress)
        for cell in rebalance:
            _rebalance(cell, scenario, ",".join(env.endpoints.kafka) if env.endpoints else "", progress)
    result = suite.RunResult(shared, cells, skipped, made.tick())
    return NeliResult(scenario, result, rebalance)


def _rebalance(cell: RebalanceCell, scenario: NeliScenario, servers: str, progress: Progress) -> None:
    name = f"{cell.name} / {cell.fault}"
    for i in range(cell.trials):
        progress(name, i, cell.trials, "rebalancing")
        try:
            cell.seconds.append(rebalance_time(servers, cell.fault, scenario.members, scenario.roles, scenario.budget,
                                               cell.protocol))
            status = "ok"
        except Exception as exc:  # a trial that could not run is a finding, not a crash of the run
            cell.errors.append(f"{type(exc).__name__}: {exc}")
            status = f"failed: {cell.errors[-1]}"
        progress(name, i + 1, cell.trials, status)


COLUMNS = [
    ("method", "method", "{}"), ("fault", "fault", "{}"), ("ok", "trials", "{ok}/{trials}"),
    ("failover_p50", "failover p50", "{:.2f} s"), ("failover_p99", "p99", "{:.2f} s"),
    ("failover_max", "max", "{:.2f} s"), ("overlap_p50", "overlap/role p50", "{:.2f} s"),
    ("overlap_p99", "p99", "{:.2f} s"), ("overlap_max", "max", "{:.2f} s"),
    ("steady_max_led", "most roles/member", "{}"), ("steady_balanced", "balanced", "{:.0%}"),
    ("survivor_fences", "survivor fences", "{}"), ("violations", "violations", "{}"),
]

NOTES = ("*failover* is from the fault to a surviving member's `acquired`, per role the victim led; for *raw "
         "consumers* it is from the fault to the survivors' assignment of the victim's partitions, the part the "
         "broker and the client decide. *overlap/role* is, per role the victim led, the time after the fault two "
         "members believed they led it; *survivor fences* counts `fenced` events of members the fault did not "
         "strike; *balanced* is the share of trials whose busiest member led ceil(roles / members) at steady state.")


def step_table(result: NeliResult) -> list[str]:
    """Where each cell's handovers spent their time, as the members timed the steps (`KafkaElector.steps`): per step,
    p50 / p99 over every timing of the cell's trials (a member prints its timings on its way out, so those of a
    member killed by the fault are not among them)."""
    from neli.elector import KafkaElector

    steps = [step for step, _ in KafkaElector.steps]
    rows = []
    for cell in result.run.cells:
        timed: dict[str, list[float]] = {}
        for trial in cell.trials:
            for step, seconds in trial.steps.items():
                timed.setdefault(step, []).extend(seconds)
        if not timed:
            continue
        cells = []
        for step in steps:
            took = Summary.of(timed.get(step, []))
            cells.append("-" if not took.n else f"{took.p50 * 1000:.0f} / {took.p99 * 1000:.0f} ms ({took.n})")
        rows.append(f"| {cell.method.name} | {cell.fault.name} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    said = "; ".join(f"*{step}*: {what}" for step, what in KafkaElector.steps)
    return ["## Where the time goes (steps timed inside the members)", "",
            "p50 / p99 (timings) of each step, over the cell's trials: " + said + ".", "",
            "| method | fault | " + " | ".join(steps) + " |", "|---|---|" + "---|" * len(steps), *rows, ""]


def provenance(result: NeliResult) -> str:
    s = result.scenario
    r = result.run
    return (f"{r.made.header()} {s.members} members, {s.roles} roles, "
            f"{s.trials} trials per cell (a fresh group each), session timeout = detection budget {s.budget:g} s, "
            f"pauses held {s.hold:g} s.")
