"""Run a scenario: start the infrastructure it needs, every (method, fault) x trials, and summarize.

Members of every trial are fresh processes in a fresh group (new topic, key prefix or ports), so
trials do not leak into each other; the infrastructure is shared by the whole run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect import registry
from elect.errors import ConfigError, MissingExtra, UnknownScheme
from elect_bench import anchors
from elect_bench.cell_measures import summarize
from elect_bench.faults import Fault, fault
from elect_bench.infrastructure import DockerInfra, LocalInfra
from elect_bench.metering import Router
from elect_bench.methods import Method, method_spec
from elect_bench.placement import DockerPlacement, NetnsPlacement
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance
from elect_bench.relays import Meter
from elect_bench.scenario import Scenario, load
from elect_bench.trial import Environment, TrialResult, TrialSpec, run_trial
from elect_cluster.endpoints import Endpoints
from elect_cluster.local import LocalCluster
from elect_cluster.ports import free_ports


@dataclass
class Cell:
    """All trials of one method under one fault, and their summary."""

    method: Method
    fault: Fault
    members: int
    trials: list[TrialResult] = field(default_factory=list)

    def summary(self, budget: float) -> dict[str, Any]:
        """Every measure of the cell, by key (`elect_bench.cell_measures`)."""
        return summarize(self.method.name, self.fault, self.members, self.trials, budget)


@dataclass
class RunResult:
    scenario: Scenario
    cells: list[Cell]
    skipped: dict[str, str]
    made: Provenance  # its load sampled after each trial
    kafka_broker: str = ""  # which broker served the kafka methods ("" when none ran)

    @property
    def ok(self) -> bool:
        return all(t.ok for c in self.cells for t in c.trials)

    def summaries(self) -> list[dict[str, Any]]:
        return [c.summary(self.scenario.budget) for c in self.cells]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        """A run as `to_json` wrote it (results.json), to report again (`elect report`)."""
        chosen = load({k: v for k, v in data["scenario"].items() if k != "kind"})
        cells: dict[tuple[str, str, int], Cell] = {}
        for raw in data.get("trials", []):
            trial = TrialResult.from_json(raw)
            key = (trial.method, trial.fault, trial.members)
            if key not in cells:
                cells[key] = Cell(method_spec(trial.method), fault(trial.fault), trial.members)
            cells[key].trials.append(trial)
        return cls(chosen, list(cells.values()), dict(data.get("skipped", {})), Provenance.from_json(data),
                   str(data.get("kafka_broker", "")))

    def to_json(self) -> dict[str, Any]:
        return {
            **self.made.to_json(), "kafka_broker": self.kafka_broker,
            "scenario": self.scenario.__dict__ | {"faults": [f.name for f in self.scenario.faults],
                                                  "methods": list(self.scenario.methods)},
            "skipped": self.skipped,
            "summary": self.summaries(),
            "trials": [t.to_json() for c in self.cells for t in c.trials],
        }


def available(method: str) -> str | None:
    """None if the method's elector (or anchor program) is installed, else why not."""
    if method_spec(method).anchor:
        return anchors.available(method_spec(method).scheme)
    try:
        registry.get(method_spec(method).scheme).check_installed()
    except (UnknownScheme, MissingExtra) as exc:
        return str(exc)
    return None


def seconds(x: float) -> str:
    """Seconds as the soak's tables print them: three decimals, "-" for none (NaN)."""
    return "-" if math.isnan(x) else f"{x:.3f}"


@contextlib.contextmanager
def environment(scenario: Scenario, workdir: Path, placement: str = "local") -> Iterator[Environment]:
    """Start what the scenario needs; members live on network-namespace hosts when a fault needs them (a cut)
    or their packets are counted.

    With `scenario.meter` every member dials through counting relays (bench.metering).
    With placement "docker" the infrastructure is the compose cluster's (cluster/docker-compose.yml with the
    images built here; "docker-official": the official images), brought up for the run and down after it, and
    members are containers on its network; `ELECT_MEMBER_HOSTS` (m0=ssh://host,m1=...) starts members through
    other hosts' engines, `ELECT_COMPOSE_OVERRIDES` (comma-separated files) adds compose files.
    """
    if placement in ("docker", "docker-official"):
        yield from _compose_environment(scenario, workdir, local=placement == "docker")
        return
    hosts = None
    members = [f"m{i}" for i in range(max(scenario.group_sizes))]
    if scenario.on_hosts:
        from elect_cluster.netns import Hosts

        hosts = Hosts(members).up()
    host = hosts.gateway if hosts else "127.0.0.1"
    meter = Meter().start() if scenario.meter else None
    router = Router(meter, host) if meter else None
    try:
        endpoints = None
        cluster = None
        secured = None
        if scenario.plain_needs:
            front = free_ports(1, host)[0] if router and "kafka" in scenario.plain_needs else None
            cluster = LocalCluster(workdir / "infra", services=scenario.plain_needs,
                                   etcd_members=scenario.store_members, zookeeper_nodes=scenario.store_members,
                                   host=host, kafka_advertised_port=front, broker=scenario.broker,
                                   kafka_brokers=scenario.brokers)
            endpoints = cluster.up()
            if router and front is not None:
                router.front_kafka(f"{host}:{cluster.members('kafka')[0].ports['listen']}", front, members)
        try:
            if scenario.secure_needs:  # the secured methods' own cluster, beside the plain one
                secured = LocalCluster(workdir / "infra-secure", services=scenario.secure_needs,
                                       etcd_members=scenario.store_members, zookeeper_nodes=scenario.store_members,
                                       host=host, secure=True)
                endpoints = dataclasses.replace(endpoints or Endpoints(), secured=secured.up())
            yield Environment(endpoints, workdir, NetnsPlacement(hosts) if hosts is not None else None,
                              LocalInfra(cluster) if cluster is not None else None, router)
        finally:
            if secured is not None:
                secured.down()
            if cluster is not None:
                cluster.down()
    finally:
        if meter is not None:
            meter.close()
        if hosts is not None:
            hosts.down()


def _compose_environment(scenario: Scenario, workdir: Path, *, local: bool) -> Iterator[Environment]:
    from elect_cluster import compose
    from elect_cluster.containers import ComposeCluster

    overrides = [Path(f) for f in os.environ.get("ELECT_COMPOSE_OVERRIDES", "").split(",") if f]
    cluster = ComposeCluster(local=local, overrides=overrides)
    if local:  # the images built here: build what is missing or out of date (a no-op when all are current)
        from elect_cluster import images

        images.build(["member", *scenario.needs], tool=cluster.engine.tool,
                     say=lambda m: print(f"elect bench: images: {m}", file=sys.stderr, flush=True))
    hosts = dict(pair.split("=", 1) for pair in os.environ.get("ELECT_MEMBER_HOSTS", "").split(",") if "=" in pair)
    placement = DockerPlacement(str(workdir), image="elect-member:local" if local else "elect-member:latest",
                                engine=cluster.engine, hosts=hosts)
    try:
        cluster.up(scenario.needs)
        yield Environment(compose.endpoints(), workdir, placement, DockerInfra(engine=cluster.engine))
    finally:
        try:
            placement.close()
        finally:
            cluster.down()


def run(scenario: Scenario, workdir: Path, progress: Progress, command: str = "",
        placement: str = "local", checkpoint: Callable[[RunResult], None] | None = None,
        resume: dict[str, Any] | None = None) -> RunResult:
    """Every cell's trials; `checkpoint` gets the result so far after each trial (an hour's run is not lost to
    a crash, a cut session or a failing report). `resume`: a checkpoint of this same scenario (`to_json`), whose
    trials are kept and not run again; the run's command, start and seconds carry on from it."""
    if resume is not None:
        _same_scenario(scenario, resume)
    made = Provenance.begin(command, resume)
    skipped = {m: why for m in scenario.methods if (why := available(m))}
    methods = [method_spec(m) for m in scenario.methods if m not in skipped]
    for f in scenario.faults:
        for m in methods:
            if f.infrastructure and not m.needs:
                skipped[f"{m.name} / {f}"] = "no infrastructure to fault (its members are the whole system)"
    cells = [Cell(m, f, n) for m in methods for f in scenario.faults for n in scenario.group_sizes
             if m.needs or not f.infrastructure]
    with environment(scenario, workdir, placement) as env:
        broker = env.endpoints.kafka_broker if env.endpoints is not None else ""

        def so_far() -> RunResult:
            return RunResult(scenario, cells, skipped, made.tick(), broker)

        def after_trial() -> None:
            made.sample()
            if checkpoint is not None:
                checkpoint(so_far())

        if resume is not None:
            kept = [TrialResult.from_json(t) for t in resume.get("trials", [])]
            for cell in cells:
                cell.trials = sorted((t for t in kept if t.method == cell.method.name and t.fault == cell.fault.name
                                      and t.members == cell.members), key=lambda t: t.trial)[:scenario.trials]

        run_cells(scenario, cells, env, progress, after_trial=after_trial)
    return so_far()


def _same_scenario(scenario: Scenario, resume: dict[str, Any]) -> None:
    """A checkpoint resumes only the run it came from: the same methods, faults, trials and settings."""
    theirs = dict(resume.get("scenario", {}))
    ours = json.loads(json.dumps(RunResult(scenario, [], {}, Provenance("", 0.0)).to_json()["scenario"], default=str))
    differ = sorted(k for k in ours if ours[k] != theirs.get(k))
    if differ:
        raise ConfigError(f"the checkpoint is of another run: {', '.join(differ)} differ "
                          f"({'; '.join(f'{k}: {theirs.get(k)!r} there, {ours[k]!r} here' for k in differ[:3])})",
                          parameter="resume")


def run_cells(scenario: Scenario, cells: list[Cell], env: Environment, progress: Progress,
              after_trial: Callable[[], None] | None = None) -> None:
    """Every cell's trials, each a fresh group, at the scenario's budget, roles and hold, in rounds: trial i of
    every cell before trial i + 1 of any, so whatever changes on the machine over a long run (another job, a
    warmer cache, a session resumed the next day) falls on every method alike rather than on the last ones."""
    total = len(cells) * scenario.trials
    done = sum(len(c.trials) for c in cells)
    specs = {id(cell): TrialSpec(cell.method, cell.fault, scenario.budget, cell.members, scenario.roles,
                                 scenario.hold, scenario.load_window,
                                 dict(scenario.overrides.get(cell.method.name, {})), workload=scenario.workload,
                                 rest=scenario.rest, busy=scenario.busy)
             for cell in cells}
    for i in range(scenario.trials):
        for cell in cells:
            if len(cell.trials) > i:  # a resumed run has it already
                continue
            name = f"{cell.method.name} / {cell.fault} / {cell.members} members"
            stamp = int(time.time() * 1000) % 10**8
            unique = f"{_safe(cell.method.name)}-{_safe(cell.fault.name)}-{cell.members}-{i}-{stamp}"

            def show(status: str, name: str = name, done: int = done) -> None:
                progress(name, done, total, status)

            result = run_trial(specs[id(cell)], env, i, unique, progress=show)
            cell.trials.append(result)
            done += 1
            progress(name, done, total, "ok" if result.ok else f"failed: {result.error.splitlines()[0]}")
            if after_trial is not None:
                after_trial()


def _safe(name: str) -> str:
    """A name fit for a topic, a key prefix and a directory (a method variant's name has spaces and `=`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)
