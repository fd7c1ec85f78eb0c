"""A nemesis soak: one group of real members under a long, seeded random schedule of faults.

A trial (elect_bench.trial) strikes a fresh group once; a soak keeps one group alive for minutes or hours and
strikes it again and again, so what only shows after many handovers (a token that goes backwards on the
40th failover, a member that never comes back, an overlap that needs a pause to land on a renewal) has the
chance to happen. Between faults the group recovers: every role led again and the struck member back (a
killed or stopped member is started again with the same id, URL and data). Each strike is the trial's own
(`strike_member` / `strike_infrastructure`), so a soak and a trial measure a fault the same way.

The schedule is a pure function of the seed: the n-th fault's kind and the role whose leader it strikes are
the same on every run with that seed. Who leads that role at that moment is up to the method, so a replay
strikes the same *role's leader*, not necessarily the same member id.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect.contract import Characteristics
from elect_bench import faults as fault_kinds
from elect_bench import html
from elect_bench.faults import Fault, InfraFault, LifecycleFault, MemberFault, MembershipFault
from elect_bench.faults.membership import Add, Remove, Replace
from elect_bench.fenced.workload import Workload, store_host
from elect_bench.judging.checker import Violation, check_promise
from elect_bench.judging.history import FaultRecord, History
from elect_bench.judging.measures import Summary, disruptions, failovers, handover_gaps, overlaps
from elect_bench.members import MemberProcess, led, settle
from elect_bench.methods import Group, Method, direct
from elect_bench.progress import Status
from elect_bench.provenance import Provenance
from elect_bench.rollout import Fleet, roll
from elect_bench.suite import seconds
from elect_bench.trial import (
    Environment,
    TrialSpec,
    member_process,
    strike_infrastructure,
    strike_member,
    wait_until_time,
)
from elect_cluster.waiting import WaitTimeout, wait_until


@dataclass(frozen=True)
class Planned:
    """The n-th strike of a schedule: which kind, and the role whose leader it strikes."""

    index: int
    fault: Fault
    role: int


def schedule(seed: int, kinds: Sequence[Fault], roles: int) -> Iterator[Planned]:
    """The seeded, endless schedule, dealt in rounds: each round strikes with every kind once, in an order the
    seed shuffles, so after n rounds each kind has had exactly n strikes. The same seed gives the same kinds
    and roles in the same order."""
    if not kinds:
        raise ValueError("a soak needs at least one fault kind")
    rng = random.Random(seed)
    index = 0
    while True:
        deck = list(kinds)
        rng.shuffle(deck)
        for kind in deck:
            yield Planned(index, kind, rng.randrange(roles))
            index += 1


@dataclass(frozen=True)
class SoakSpec:
    method: Method
    faults: tuple[Fault, ...]
    duration: float  # seconds of striking; the last fault started before it ends is seen through
    seed: int
    budget: float = 1.0
    members: int = 3
    roles: int = 6
    hold: float = 0.0  # a fault's length (pause, cut, outage, a killed member's absence); 0 = 3 x budget
    workload: str = "fenced"  # fenced | unfenced | none: leaders write to a store that checks their tokens
    rounds: int = 0  # stop after this many rounds (each kind once per round), if before the duration; 0 = no limit
    overrides: dict[str, str] = field(default_factory=dict)

    def trial_spec(self, fault: Fault) -> TrialSpec:
        """What the trial's strike functions need to know, for one fault of the soak."""
        return TrialSpec(self.method, fault, self.budget, self.members, self.roles, self.hold,
                         overrides=dict(self.overrides))


@dataclass
class Strike:
    """One fault of the soak as it happened."""

    index: int
    fault: str
    target: str
    at: float
    failover: list[float] = field(default_factory=list)
    unrecovered: int = 0
    leaderless: int = 0  # roles no member led at all in the wait before the next strike (whoever had led them)
    overlap: float = 0.0
    failed_starts: int = 0  # lives of the struck member that exited while starting again, then started again


@dataclass
class SoakResult:
    spec: SoakSpec
    made: Provenance  # its load sampled after each strike
    strikes: list[Strike]
    violations: list[Violation]
    evidence: dict[int, list[dict[str, Any]]]  # violation index -> the event lines around it
    history: History
    writes: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and not self.violations and not any(s.unrecovered or s.leaderless for s in self.strikes)

    def counts(self) -> Counter[str]:
        return Counter(s.fault for s in self.strikes)

    def by_kind(self) -> list[dict[str, Any]]:
        """One summary row per fault kind: how many, failover distribution, roles never led again, overlap."""
        out = []
        for kind in sorted(self.counts()):
            mine = [s for s in self.strikes if s.fault == kind]
            fo = Summary.of([x for s in mine for x in s.failover])
            out.append({"fault": kind, "strikes": len(mine), "failover_n": fo.n, "failover_p50": fo.p50,
                        "failover_p99": fo.p99, "failover_max": fo.max,
                        "unrecovered": sum(s.unrecovered for s in mine),
                        "leaderless": sum(s.leaderless for s in mine),
                        "failed_starts": sum(s.failed_starts for s in mine),
                        "overlap": sum(s.overlap for s in mine)})
        return out

    def to_json(self) -> dict[str, Any]:
        s = self.spec
        return {**self.made.to_json(), "method": s.method.name, "seed": s.seed, "rounds": s.rounds, "budget": s.budget,
                "duration": s.duration if math.isfinite(s.duration) else None,
                "members": s.members, "roles": s.roles, "hold": s.hold or 3 * s.budget, "workload": s.workload,
                "faults": [f.name for f in s.faults], "error": self.error,
                "by_kind": self.by_kind(), "writes": self.writes,
                "violations": [{"violation": str(v), "record": v.to_json(), "lines": self.evidence.get(i, [])}
                               for i, v in enumerate(self.violations)],
                "strikes": [st.__dict__ for st in self.strikes], "history": self.history.to_json()}


class _Group:
    """The soak's members: started once, each started again (same id, URL and data) after it was removed."""

    def __init__(self, spec: SoakSpec, env: Environment, unique: str, workload: Workload) -> None:
        ids = [f"m{i}" for i in range(spec.members)]
        group = Group(ids, spec.roles, unique, env.endpoints, env.placement.address, env.router or direct,
                      state_dir=str(env.workdir / unique / "state"))
        self.urls = spec.method.member_urls(group, spec.budget, spec.overrides)
        self.reported: set[str] = set()  # the violations the live line has spelled out
        fake_clock = any(f.fakes_clock for f in spec.faults)
        self.procs = [member_process(spec.method, spec.roles, env, unique, self.urls[i], i, workload.member_args(i),
                                     fake_clock=fake_clock) for i in ids]
        self.role_names = {str(r) for r in range(spec.roles)}
        self.spec = spec
        # membership changes and rollouts: members that joined later, and those that left (their lines stay)
        self.fleet = Fleet(spec.method, group, spec.budget, dict(spec.overrides), self.urls, self.procs,
                           lambda ident, url: member_process(spec.method, spec.roles, env, unique, url, ident,
                                                             workload.member_args(ident)),
                           env.placement, env.workdir / unique / "state")

    def all_led(self) -> bool:
        return led(self.procs) >= self.role_names

    def revive(self, bound: float) -> int:
        """Start again every member that is no longer running (a kill or stop removed it) and wait, up to
        `bound`, until each new life reports it started; a life that exits first (its store unreachable at
        start-up, which `elect member` reports and exits on) is started again. Returns how many lives failed
        to start (or had not started by the deadline): the next fault must meet a whole group, or faults would
        pile up on a shrinking one."""
        lives = [p for p in self.procs if not p.alive]
        failed = 0
        for p in lives:
            p.restart()
        deadline = time.monotonic() + bound
        while lives and time.monotonic() < deadline:
            for p in lives:
                if not p.alive:
                    failed += 1
                    p.restart()
            lives = [p for p in lives if not p.started()]
            time.sleep(0.05)  # polling the members' logs, bounded by the deadline above
        return failed + len(lives)  # a life still not started at the deadline failed too

    def lines(self) -> list[dict[str, Any]]:
        return [line for p in [*self.procs, *self.fleet.retired] for line in p.log.lines]

    def join(self) -> MemberProcess:
        """A new member that joins through the running ones (raft:// `join=`), started."""
        return self.fleet.add(self.fleet.fresh())

    def retire(self, proc: MemberProcess, bound: float) -> None:
        """Ask `proc` to leave (raft:// `leave` on its control input: drain, removed from the configuration, exit 0),
        and wait for it to exit."""
        self.fleet.retire(proc, bound)


def run(spec: SoakSpec, env: Environment, progress: Status, *, command: str = "",
        machine: dict[str, Any] | None = None, keep_logs: Path | None = None) -> SoakResult:
    """Strike the group until `spec.duration` has passed; never raises for what the group did (that is the
    report), only for a soak that could not start. The members' and the store's logs are copied to
    `keep_logs`: what a member printed besides its event lines is how a reader finds why it did not come back."""
    unique = f"soak-{spec.seed}-{int(time.time() * 1000) % 10**8}"
    records: list[FaultRecord] = []
    strikes: list[Strike] = []
    made = Provenance.begin(command)
    if machine is not None:
        made.machine = machine
    began = time.monotonic()
    error = ""
    with Workload.start(spec.workload, env.workdir / unique, store_host(env.placement)) as workload:
        group = _Group(spec, env, unique, workload)
        promised = spec.method.promises(group.urls["m0"])
        bound = spec.trial_spec(spec.faults[0]).bound
        try:
            for p in group.procs:
                p.start()
            wait_until(group.all_led, bound + 30, interval=0.05, what=f"{spec.method.name}: a leader for every role")
            settle(group.procs, quiet=spec.method.quiet(spec.budget), limit=bound, all_started=True)
            plan = schedule(spec.seed, spec.faults, spec.roles)
            limit = spec.rounds * len(spec.faults) if spec.rounds else math.inf
            while time.monotonic() - began < spec.duration and len(strikes) < limit:
                planned = next(plan)
                before = len(records)
                failed = _strike(planned, spec, env, group, records, progress)
                strikes.append(Strike(planned.index, planned.fault.name, records[before].target, records[before].mono,
                                      failed_starts=failed))
                made.sample()
                for text in _status(strikes, group, records, promised, began, spec).splitlines():
                    progress(text)
        except Exception as exc:  # what stopped the soak is part of its report
            error = f"{type(exc).__name__}: {exc}"
        except (KeyboardInterrupt, SystemExit) as exc:  # Ctrl-C or SIGTERM: stop striking, report what was seen
            error = f"interrupted ({type(exc).__name__} {exc})".replace(" )", ")")
        finally:
            stopped = time.monotonic()  # what the members print from here is their shutdown, not a fault's doing
            for p in group.procs:
                with contextlib.suppress(Exception):
                    p.stop(timeout=max(10.0, 5 * spec.budget))
        history = History([line for line in group.lines() if line["mono"] <= stopped], records, start=began,
                          end=stopped)
        try:
            writes = workload.check()
        except Exception as exc:  # the strikes and the history still make a report
            writes = {}
            error = f"{error + '; ' if error else ''}the writes could not be checked: {type(exc).__name__}: {exc}"
    if keep_logs is not None:
        keep_logs.mkdir(parents=True, exist_ok=True)
        for log in sorted((env.workdir / unique).glob("*.log")):
            shutil.copyfile(log, keep_logs / log.name)
    _measure(strikes, history, records, sorted(group.role_names), bound)
    violations = check_promise(history, promised, spec.budget)
    evidence = {i: _around(history, v) for i, v in enumerate(violations)}
    return SoakResult(spec, made.tick(), strikes, violations, evidence, history, writes, error)


def _strike(planned: Planned, spec: SoakSpec, env: Environment, group: _Group, records: list[FaultRecord],
            progress: Status) -> int:
    """One fault, then recovery: every member running again, every role led, the group settled. Returns how many
    of the members' new lives failed to start."""
    fault = planned.fault
    trial = spec.trial_spec(fault)
    failed_starts = 0
    with contextlib.suppress(WaitTimeout):  # a role still leaderless shows as unrecovered in the strike before
        wait_until(group.all_led, trial.bound, interval=0.05, what="a leader for every role before the next fault")
    if isinstance(fault, LifecycleFault):
        roll(fault, group.fleet, group.role_names, spec.members, trial.hold_for, trial.bound, records, progress)
    elif isinstance(fault, MembershipFault):
        _change(fault, planned, trial.bound, group, records, progress)
    elif isinstance(fault, MemberFault):
        before = len(records)
        strike_member(fault, trial, env, group.procs, records, progress, role=str(planned.role))
        if fault.removes_victim:  # a stopped member may still be handing over: it is away once it has exited
            victim = next(p for p in group.procs if p.member_id == records[before].target)
            with contextlib.suppress(WaitTimeout):
                wait_until(lambda: not victim.alive, trial.bound, interval=0.05, what="the victim to exit")
            victim.kill()  # (a no-op once it exited; one that would not stop is taken down all the same)
        if not all(p.alive for p in group.procs):
            wait_until_time(records[before].mono + trial.hold_for)  # the member stays away for the hold
            failed_starts = group.revive(trial.bound)
    elif isinstance(fault, InfraFault):
        # each kind once a round: a method whose faults strike several services takes them in turn, round by round
        strike_infrastructure(fault, trial, env, group.procs, records, progress,
                              turn=planned.index // max(1, len(spec.faults)))
    with contextlib.suppress(WaitTimeout):
        wait_until(group.all_led, trial.bound, interval=0.05, what="a leader for every role after the fault")
    settle(group.procs, quiet=max(1.0, spec.budget), limit=trial.bound)
    return failed_starts


def _change(fault: Fault, planned: Planned, bound: float, group: _Group, records: list[FaultRecord],
            progress: Status) -> None:
    """A membership change (raft://): `add`, a new member joins and leads its share; `remove`, the leader of the
    planned role leaves (and, were the group to shrink below its size, a new member joins after it, as an operator
    replaces a retired machine); `replace`, a new member joins, then the leader of the planned role leaves. Recorded
    when it strikes the group: a join as it starts, a leave as it is asked."""
    def newcomer() -> MemberProcess:
        proc = group.join()
        if isinstance(fault, Add):
            records.append(FaultRecord(time.monotonic(), fault.name, proc.member_id))
        progress(f"{fault.name}: {proc.member_id} joins")
        with contextlib.suppress(WaitTimeout):  # a voter, leading its share
            wait_until(lambda: bool(proc.log.leading()), bound + 10, interval=0.05,
                       what=f"{proc.member_id} leading a role")
        return proc

    def leaver() -> None:
        role = str(planned.role)
        victim = next((p for p in group.procs if p.alive and role in p.log.leading()), group.procs[0])
        records.append(FaultRecord(time.monotonic(), fault.name, victim.member_id))
        progress(f"{fault.name}: {victim.member_id} leaves")
        group.retire(victim, bound + 10)

    if isinstance(fault, Add | Replace):
        newcomer()
    if isinstance(fault, Remove | Replace):
        leaver()
    if isinstance(fault, Remove) and len(group.procs) < group.spec.members:
        newcomer()


def _measure(strikes: list[Strike], history: History, records: Sequence[FaultRecord], roles: Sequence[str],
             bound: float) -> None:
    """Per strike: failover of each role the struck member led (or disruption, for the infrastructure), the
    overlap from the strike to the next one, and the roles nobody led at all in the `bound` seconds before the next
    one began: the soak waits that long for every role to be led before striking again, and a role the struck member
    did not lead may have lost its leader too (one without a leader only for a moment, a handover under way as the
    next strike came, is not counted)."""
    by_role = history.intervals()
    struck = [r for r in records if fault_kinds.known(r.kind) is not None]
    for i, (strike, record) in enumerate(zip(strikes, struck, strict=False)):
        kind = fault_kinds.fault(record.kind)
        until = struck[i + 1].mono if i + 1 < len(struck) else history.end
        lost = (handover_gaps(history, record, until) if kind.gradual else
                disruptions(history, record, until) if kind.measured_as_disruption else failovers(history, record))
        strike.failover = [f.latency for f in lost if f.latency is not None]
        strike.unrecovered = sum(1 for f in lost if f.latency is None)
        strike.overlap = sum(e - s for ivs in by_role.values() for s, e, _ in overlaps(ivs, lo=record.mono, hi=until))
        if i + 1 < len(struck):
            strike.leaderless = sum(1 for role in roles
                                    if not any(iv.start <= until and iv.end >= until - bound
                                               for iv in by_role.get(role, ())))


def _around(history: History, violation: Violation, window: float = 1.0) -> list[dict[str, Any]]:
    """The event lines of the violation's role from `window` seconds before it (or before the earlier event
    it relates to) to `window` seconds after: the evidence a reader checks."""
    first = min(violation.at, violation.since if violation.since is not None else violation.at) - window
    return [line for line in history.lines
            if line["role"] == violation.role and first <= line["mono"] <= violation.at + window]


def _status(strikes: Sequence[Strike], group: _Group, records: list[FaultRecord], promised: Characteristics,
            began: float, spec: SoakSpec) -> str:
    """The live line: faults so far by kind, violations so far, and what is left (time, or rounds). Each new
    violation is spelled out too, so that a run cut short still says what it found."""
    counts = Counter(s.fault for s in strikes)
    so_far = check_promise(History(group.lines(), list(records), start=began, end=time.monotonic()), promised,
                           spec.budget)
    new = [f"violation: {v}\n" for v in so_far if str(v) not in group.reported]
    group.reported.update(str(v) for v in so_far)
    kinds = " ".join(f"{k} {n}" for k, n in sorted(counts.items()))
    left = []
    if spec.rounds:
        left.append(f"round {min(spec.rounds, len(strikes) // len(spec.faults) + 1)} of {spec.rounds}")
    if math.isfinite(spec.duration):
        left.append(f"{max(0.0, spec.duration - (time.monotonic() - began)):.0f} s left")
    return "".join(new) + f"{len(strikes)} faults ({kinds}), {len(so_far)} violations, " + ", ".join(left)


def markdown(result: SoakResult) -> str:
    """The soak report: provenance, faults by kind, writes, and every violation with its lines."""
    s = result.spec
    rows = ["| fault | strikes | failover p50 | p99 | max | unrecovered roles | leaderless until the next strike | "
            "failed starts | overlap s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k in result.by_kind():
        rows.append(f"| {k['fault']} | {k['strikes']} | {seconds(k['failover_p50'])} | {seconds(k['failover_p99'])} | "
                    f"{seconds(k['failover_max'])} | {k['unrecovered']} | {k['leaderless']} | {k['failed_starts']} | "
                    f"{k['overlap']:.3f} |")
    parts = [f"# elect soak: {s.method.name}", "",
             f"{result.made.header()} Seed {s.seed} (the same "
             f"seed replays the schedule), {s.members} members, {s.roles} roles, detection budget {s.budget:g} s, "
             f"hold {s.hold or 3 * s.budget:g} s, faults drawn from {', '.join(f.name for f in s.faults)}; "
             f"workload: {s.workload}. {result.made.busy()}", "", *rows, ""]
    if gradual := [f.name for f in s.faults if f.gradual]:
        parts += [f"For {', '.join(gradual)} (changes that unfold over seconds) the failover columns are each "
                  "handover's gap: from the moment a role's leader gave it up until the role was acquired again.", ""]
    if result.writes:
        parts += ["Writes to the " + ("fenced" if s.workload == "fenced" else "unfenced") + " store: " +
                  ", ".join(f"{k} {v}" for k, v in result.writes.items() if not isinstance(v, list | dict)), ""]
    if result.error:
        parts += [f"The soak stopped early: {result.error}", ""]
    parts += [f"Violations: {len(result.violations)}.", ""]
    for i, v in enumerate(result.violations):
        parts += [f"- {v}", "", "```", *(json.dumps(line) for line in result.evidence.get(i, [])), "```", ""]
    return "\n".join(parts)


def write(result: SoakResult, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data, report = out / "soak.json", out / "soak.md"
    as_json = result.to_json()
    data.write_text(json.dumps(as_json, indent=1))
    report.write_text(markdown(result))
    html.write(html.of_soak(as_json), out)
    return data, report
