"""Idle cost at scale: N member processes x P partitions at rest, per node its CPU share of one core and RSS.

Every node contends for every role 0..P-1 (one role per partition), so it also renews the deadlines of the
roles it leads. Once every role has a leader and no leadership has changed for `QUIET` seconds, the CPU time
(user + system) each process uses over `window` seconds is its share of one core (the target: < 10% of one
core per node at 3 x 1000), reported with its resident memory, the roles it leads and the leadership changes
during the window. Only methods whose members are the whole system (Raft): there the cost is all theirs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from elect.errors import ConfigError
from elect_bench.judging.measures import mean
from elect_bench.members import MemberProcess, led, settle
from elect_bench.methods import METHODS, Group
from elect_bench.progress import Progress
from elect_bench.provenance import Provenance
from elect_bench.scenario import listed
from elect_cluster.process import Usage, usage
from elect_cluster.waiting import wait_until

QUIET = 3.0  # seconds without a leadership change before the window opens
LIMIT = 120.0  # seconds to wait for every role to be led, and again for quiet


@dataclass(frozen=True)
class IdleScenario:
    """contend: nodes contend for the roles (False: the cost of the partitions alone, no deadlines to renew)."""

    name: str = "idle"
    methods: tuple[str, ...] = ("raft",)
    nodes: int = 3
    partitions: tuple[int, ...] = (100, 1000)
    window: float = 30.0
    budget: float = 1.0
    contend: bool = True

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ConfigError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}", parameter="methods")
        served = [m for m in self.methods if METHODS[m].needs]
        if served:
            raise ConfigError(f"an idle run measures members that are the whole system; {served} use "
                              "infrastructure", parameter="methods")
        if self.nodes < 1 or not self.partitions or min(self.partitions) < 1:
            raise ConfigError("nodes >= 1 and partitions >= 1 are required")
        if self.window <= 0 or self.budget <= 0:
            raise ConfigError("window > 0 and budget > 0 are required")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> IdleScenario:
        given = {k: v for k, v in data.items() if k != "kind"}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ConfigError(f"unknown idle scenario key(s) {unknown}; known: {sorted(known)}")
        if "methods" in given:
            given["methods"] = tuple(listed(given["methods"]))
        try:
            if "partitions" in given:
                given["partitions"] = tuple(int(p) for p in listed(given["partitions"]))
            return cls(**given)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"idle scenario: {exc}") from None


@dataclass
class IdleCell:
    """One method at one partitions count: per node what it used over the window at rest."""

    method: str
    nodes: int
    partitions: int
    error: str = ""
    all_led_after: float = math.nan  # seconds from start until every role was led
    window: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # node -> share of one core over the window
    rss_mb: dict[str, float] = field(default_factory=dict)
    leading: dict[str, int] = field(default_factory=dict)  # node -> roles it leads
    changes: int = 0  # leadership events during the window (0 at rest)

    def summary(self) -> dict[str, Any]:
        return {"method": self.method, "nodes": self.nodes, "partitions": self.partitions, "ok": not self.error,
                "all_led_after": self.all_led_after, "window": self.window,
                "cpu_mean": mean(self.cpu.values()), "cpu_max": max(self.cpu.values(), default=math.nan),
                "rss_mb_mean": mean(self.rss_mb.values()), "rss_mb_max": max(self.rss_mb.values(), default=math.nan),
                "leading_max": max(self.leading.values(), default=0), "changes": self.changes,
                "error": self.error.splitlines()[0] if self.error else ""}


@dataclass
class IdleResult:
    scenario: IdleScenario
    cells: list[IdleCell]
    made: Provenance

    @property
    def ok(self) -> bool:
        return all(not c.error for c in self.cells)

    def summaries(self) -> list[dict[str, Any]]:
        return [c.summary() for c in self.cells]

    def to_json(self) -> dict[str, Any]:
        return {**self.made.to_json(), "scenario": {"kind": "idle", **asdict(self.scenario)},
                "summary": self.summaries(), "cells": [asdict(c) for c in self.cells]}


def run(scenario: IdleScenario, workdir: Path, progress: Progress, command: str = "") -> IdleResult:
    made = Provenance.begin(command)
    cells = [IdleCell(m, scenario.nodes, p) for p in scenario.partitions for m in scenario.methods]
    for done, cell in enumerate(cells):
        name = f"{cell.method} / {cell.nodes} nodes x {cell.partitions} partitions"

        def show(status: str, name: str = name, done: int = done) -> None:
            progress(name, done, len(cells), status)

        measure(cell, scenario, workdir / f"{cell.method}-{cell.partitions}", show)
        progress(name, done + 1, len(cells), f"failed: {cell.error.splitlines()[0]}" if cell.error else "ok")
    return IdleResult(scenario, cells, made.tick())


def measure(cell: IdleCell, scenario: IdleScenario, workdir: Path, progress: Callable[[str], None]) -> None:
    """Start the group, wait until it is at rest, and fill `cell` with what each node used over the window;
    a group that cannot get there leaves the reason in `cell.error`."""
    ids = [f"n{i}" for i in range(cell.nodes)]
    unique = f"idle-{cell.method}-{cell.partitions}-{int(time.time() * 1000) % 10**8}"
    urls = METHODS[cell.method].member_urls(Group(ids, cell.partitions, unique), scenario.budget)
    extra = ["--role-count", str(cell.partitions)] if scenario.contend else []
    procs = [MemberProcess(urls[i], i, [], log_dir=workdir, extra_args=extra) for i in ids]
    began = time.monotonic()
    try:
        progress("starting members")
        for p in procs:
            p.start()
        if scenario.contend:
            wait_until(lambda: len(led(procs)) == cell.partitions, LIMIT, interval=0.2,
                       what="a leader for every partition")
        else:
            time.sleep(5 * scenario.budget)  # nothing to observe without roles: give the elections time
        cell.all_led_after = time.monotonic() - began
        progress(f"every partition led after {cell.all_led_after:.1f} s; waiting for quiet")
        if not settle(procs, quiet=QUIET, limit=LIMIT):
            raise TimeoutError(f"leadership still changing after {LIMIT:g} s")
        progress(f"measuring for {scenario.window:g} s")
        _window(cell, procs, scenario.window)
    except Exception as exc:  # a group that could not come to rest is a finding, not a crash of the run
        cell.error = f"{type(exc).__name__}: {exc}"
    finally:
        for p in procs:
            p.kill()


def _window(cell: IdleCell, procs: Sequence[MemberProcess], window: float) -> None:
    before = {p.member_id: _used(p).cpu_seconds for p in procs}
    lines_before = sum(len(p.log) for p in procs)
    t0 = time.monotonic()
    time.sleep(window)  # the measurement window itself, not a wait for a condition
    cell.window = time.monotonic() - t0
    for p in procs:
        used = _used(p)
        cell.cpu[p.member_id] = (used.cpu_seconds - before[p.member_id]) / cell.window
        cell.rss_mb[p.member_id] = used.rss_mb
        cell.leading[p.member_id] = len(p.log.leading())
    cell.changes = sum(len(p.log) for p in procs) - lines_before


def _used(proc: MemberProcess) -> Usage:
    used = usage(proc.pid)
    if used is None:
        raise RuntimeError(f"{proc.member_id} exited:\n{proc.stderr_tail(15)}")
    return used


COLUMNS = [
    ("method", "method", "{}"), ("nodes", "nodes", "{}"), ("partitions", "partitions", "{}"),
    ("all_led_after", "all led after", "{:.1f} s"), ("cpu_mean", "cpu/node", "{:.1%}"),
    ("cpu_max", "cpu/node max", "{:.1%}"), ("rss_mb_mean", "rss/node", "{:.0f} MB"),
    ("rss_mb_max", "rss/node max", "{:.0f} MB"), ("leading_max", "most roles/node", "{}"),
    ("changes", "changes in window", "{}"),
]

NOTES = ("Per cell: every node contends for every role, one per partition. Once every role was led and no "
         f"leadership had changed for {QUIET:g} s, each node's CPU time (user + system, from /proc) over the window "
         "is its *cpu/node*, a share of one core; *rss* is its resident memory at the end of the window; "
         "*changes in window* counts leadership events during it (0 at rest).")


def provenance(result: IdleResult) -> str:
    s = result.scenario
    return (f"{result.made.header()} {s.nodes} nodes per "
            f"group, {'each contending for every role' if s.contend else 'contending for no role'}, detection "
            f"budget {s.budget:g} s, CPU measured over {s.window:g} s at rest.")
