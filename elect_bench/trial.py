"""One trial: start a group of real member processes, wait for steady state, inject one fault, watch
the handover, stop, and turn the merged event lines into measurements.

The fault (elect_bench.faults) strikes the member leading role 0 at steady state, or one member of the
method's infrastructure (the store's leader, or the only broker), which is then measured as disruption:
which roles lost their leader, how long until each was led again, gaps and overlap. A steady-state trial
strikes nothing: cold start distribution and load.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elect.contract import Characteristics
from elect.errors import ConfigError
from elect.member_reports import TIMED
from elect_bench.busy import Busy
from elect_bench.fakeclock import FakeClock
from elect_bench.faults import Fault, InfraFault, MemberFault
from elect_bench.faults.lifecycle import LifecycleFault
from elect_bench.fenced.workload import Workload, store_host
from elect_bench.infrastructure import InfraFaults
from elect_bench.judging.checker import Violation, check_promise
from elect_bench.judging.history import FaultRecord as Record
from elect_bench.judging.history import History
from elect_bench.judging.measures import (
    balanced,
    balanced_from,
    disruptions,
    failovers,
    handover_gaps,
    leaderless,
    max_led,
    overlaps,
    total,
)
from elect_bench.members import MemberProcess, leaders, led, settle
from elect_bench.metering import Router
from elect_bench.methods import Group, Method, direct
from elect_bench.placement import LocalPlacement, Placement
from elect_bench.progress import Status
from elect_bench.rollout import Fleet, Rollout, measure, roll
from elect_cluster.endpoints import Endpoints
from elect_cluster.process import usage
from elect_cluster.waiting import WaitTimeout, wait_until


@dataclass(frozen=True)
class TrialSpec:
    method: Method
    fault: Fault
    budget: float = 1.0
    members: int = 3
    roles: int = 6
    hold: float = 0.0  # pause / cut / infra outage length; 0 = 3 x budget
    load_window: float = 0.0  # seconds of steady state over which each member's sent messages are counted
    overrides: dict[str, str] = field(default_factory=dict)
    workload: str = "none"  # none | fenced | unfenced: leaders write to a store of their own (elect_bench.fenced)
    rest: float = 0.0  # seconds at rest after steady state, before the fault: leadership changes there are false
    busy: int = 0  # CPU-bound processes beside the members for the whole trial (elect_bench.busy)

    @property
    def hold_for(self) -> float:
        return self.hold or 3 * self.budget

    @property
    def bound(self) -> float:
        """How long to wait for a recovery: generous, as anything slower is reported as unrecovered."""
        return 10 * self.budget + 20

    @property
    def role_names(self) -> set[str]:
        return {str(r) for r in range(self.roles)}


@dataclass
class TrialResult:
    method: str
    fault: str
    trial: int
    ok: bool
    error: str = ""
    failover: list[float] = field(default_factory=list)    # per role the victim led, seconds
    unrecovered: int = 0                                  # roles no survivor acquired before the end
    disrupted: int = 0                                    # infra fault: roles whose leader lost leadership
    gap: float = 0.0                                      # leaderless seconds summed over roles, after the fault
    overlap: float = 0.0                                  # seconds two or more led one role, summed over roles
    max_overlap: float = 0.0                              # the longest single overlap
    steady_max_led: int = 0                               # most roles one member led at steady state
    steady_balanced: bool = False
    after_max_led: int = 0                                # the same among survivors after the handover
    after_balanced: bool = False
    rebalance: float | None = None                        # restart: from the return to balanced for good
    violations: list[Violation] = field(default_factory=list)
    startup: float = 0.0                                  # seconds from start to every role led
    settled: float | None = None                          # seconds from start until quiet (None: never, in bound)
    cpu: dict[str, float] = field(default_factory=dict)   # member -> share of one core
    rss_mb: dict[str, float] = field(default_factory=dict)
    members: int = 0
    sent_rps: dict[str, float] = field(default_factory=dict)  # member -> requests / messages per s it sent
    sent_pps: dict[str, float] = field(default_factory=dict)  # member -> packets/s it sent at steady state
    sent_bps: dict[str, float] = field(default_factory=dict)  # member -> bytes/s
    workload: str = "none"                                # the write workload the members ran (elect_bench.fenced)
    writes: int = 0                                       # writes the store accepted
    rejected: int = 0                                     # writes it refused (a stale token; fenced store only)
    stale_writes: int = 0                                 # accepted under a token below one accepted before
    lost_writes: int = 0                                  # acknowledged to a writer, missing from the store
    conflicting_writes: int = 0                           # accepted over another member's newer-token writes
    rest: float = 0.0                                     # seconds of the window at rest (no fault)
    rest_changes: int = 0                                 # leaderships that ended in it: false failovers
    rest_cpu: dict[str, float] = field(default_factory=dict)  # member -> share of one core over the window
    busy: int = 0                                         # CPU-bound processes beside the members
    steps: dict[str, list[float]] = field(default_factory=dict)  # step -> seconds, as the members timed them
    max_drift: float | None = None                        # the clock-rate difference the method said it tolerates
    rollout: dict[str, Any] = field(default_factory=dict)  # a lifecycle fault: elect_bench.rollout.Measured
    history: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialResult:
        """A trial as `to_json` wrote it (a resumed run keeps the trials it already has)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known | {"violations": [Violation.from_json(v) for v in known.get("violations", [])]})


class Environment:
    """Where a trial runs: the infrastructure's endpoints and the members' placement."""

    def __init__(self, endpoints: Endpoints | None, workdir: Path, placement: Placement | None = None,
                 infra: InfraFaults | None = None, router: Router | None = None) -> None:
        self.endpoints = endpoints
        self.workdir = workdir
        self.placement: Placement = placement or LocalPlacement()
        self.infra = infra
        self.router = router  # counting relays between members and what they dial, when load is counted


def run_trial(spec: TrialSpec, env: Environment, index: int, unique: str,
              progress: Status = lambda _m: None) -> TrialResult:
    """Run one trial; never raises for a failed trial (it comes back with ok=False and the reason)."""
    result = TrialResult(spec.method.name, spec.fault.name, index, ok=False, members=spec.members, busy=spec.busy)
    lifecycle = spec.fault if isinstance(spec.fault, LifecycleFault) else None
    ids = [f"m{i}" for i in range(lifecycle.members_at_start(spec.members) if lifecycle else spec.members)]
    group = Group(ids, spec.roles, unique, env.endpoints, env.placement.address, env.router or direct,
                  state_dir=str(env.workdir / unique / "state"))
    urls = spec.method.member_urls(group, spec.budget, spec.overrides)
    procs: list[MemberProcess] = []
    workload = Workload(spec.workload, env.workdir / unique / "writes")
    result.workload = workload.kind
    records: list[Record] = []
    began = time.monotonic()
    busy = Busy(spec.busy)
    try:
        busy.start()
        workload.open(store_host(env.placement) if workload.active else "127.0.0.1")
        procs += [member_process(spec.method, spec.roles, env, unique, urls[i], i, workload.member_args(i),
                                 fake_clock=spec.fault.fakes_clock) for i in ids]
        promised = spec.method.promises(urls[ids[0]])
        _reach_steady_state(spec, procs, result, began, progress)
        if spec.rest > 0:
            progress(f"at rest for {spec.rest:g} s")
            _rest(spec, env, procs, result)
        if spec.load_window > 0:
            progress(f"counting load for {spec.load_window:g} s")
            _count_load(spec, env, procs, result)
        if isinstance(spec.fault, MemberFault):
            strike_member(spec.fault, spec, env, procs, records, progress)
        elif isinstance(spec.fault, InfraFault):
            strike_infrastructure(spec.fault, spec, env, procs, records, progress, turn=index)
        rolled: tuple[Rollout, int | None] | None = None
        if lifecycle is not None:
            rolled = roll_trial(lifecycle, spec, env, group, urls, procs, workload, unique, records, progress)
        history = _observed(env.placement, procs, records, began, result)
        _measure(spec, promised, history, procs, result)
        if rolled is not None:
            done, sent = rolled
            result.rollout = measure(history, done, sorted(spec.role_names), sum(1 for p in procs if p.alive),
                                     sent).to_json()
        result.ok = True
    except Exception as exc:  # a trial that could not run is a finding, not a crash of the suite
        result.error = _failure(exc, procs)
        history = History([line for p in procs for line in p.log.lines], records, start=began,
                          end=time.monotonic())
    finally:
        try:
            _stop(spec, env, procs, progress)
            result.steps = timings(procs)
        finally:
            try:
                _judge_writes(workload, result)
            finally:
                busy.stop()
    result.history = history.to_json()
    return result


def roll_trial(fault: LifecycleFault, spec: TrialSpec, env: Environment, group: Group, urls: dict[str, str],
               procs: list[MemberProcess], workload: Workload, unique: str, records: list[Record],
               progress: Status) -> tuple[Rollout, int | None]:
    """Carry out a lifecycle fault on the trial's members (`procs` ends with every member that ran, the retired
    too: their lines are the history); returns the rollout and the requests counted during it (None: uncounted)."""
    def launch(ident: str, url: str) -> MemberProcess:
        return member_process(spec.method, spec.roles, env, unique, url, ident, workload.member_args(ident))

    fleet = Fleet(spec.method, group, spec.budget, dict(spec.overrides), dict(urls), list(procs), launch,
                  env.placement, env.workdir / unique / "state")
    before = sum(env.router.messages().values()) if env.router else None
    try:
        done = roll(fault, fleet, spec.role_names, spec.members, spec.hold_for, spec.bound, records, progress)
    finally:
        procs[:] = [*fleet.procs, *fleet.retired]
    sent = None if before is None or env.router is None else sum(env.router.messages().values()) - before
    settle(fleet.live, quiet=max(1.0, spec.budget), limit=spec.bound)
    return done, sent


def member_process(method: Method, roles: int, env: Environment, unique: str, url: str, member: str,
                   extra_args: Sequence[str], *, fake_clock: bool = False) -> MemberProcess:
    """One member of a trial or soak, as its placement runs it; `fake_clock`: under a clock the harness can change
    (for faults that need one, `Fault.fakes_clock`: a CPython member only, on this machine's kernel). A local
    member's temporary files (PySyncObj's journals, without a data_dir) go under the run's work directory, so that
    those of a member killed with SIGKILL, which cannot remove them, go with it."""
    command = method.launch(url, member, range(roles), env.placement.python)
    local = isinstance(env.placement, LocalPlacement)
    tmp = env.workdir / unique / "tmp"
    if local:
        tmp.mkdir(parents=True, exist_ok=True)
    clock = None
    if fake_clock:
        if not local:  # a container's process cannot read our spec file
            raise ConfigError("clock faults run members on this machine (a local placement), not in containers",
                              parameter="faults")
        if command is not None and Path(command[0]).name != Path(env.placement.python).name:
            raise ConfigError(f"clock faults: {method.name} runs {command[0]}, whose clock cannot be faked (only "
                              "CPython members and the Python anchors can)", parameter="faults")
        clock = FakeClock(env.workdir / unique / "clocks" / f"{member}.spec")
    return MemberProcess(url, member, list(range(roles)), log_dir=env.workdir / unique,
                         prefix=env.placement.prefix(member), python=env.placement.python,
                         align_clock=env.placement.separate_clocks, extra_args=extra_args, command=command,
                         fake_clock=clock, env={"TMPDIR": str(tmp)} if local else None)


def set_clocks(procs: Sequence[MemberProcess], rates: Mapping[str, float]) -> None:
    """Run the named members' clocks at the given rates of real time from now on."""
    for proc in procs:
        if proc.member_id in rates:
            if proc.fake_clock is None:
                raise RuntimeError(f"member {proc.member_id} was not started under a clock the harness can change")
            proc.fake_clock.set_rate(rates[proc.member_id])


def timings(procs: Sequence[MemberProcess]) -> dict[str, list[float]]:
    """The steps of their handovers the members timed (`TIMED`, printed on their way out), merged per step."""
    merged: dict[str, list[float]] = {}
    for proc in procs:
        for report in proc.reports(TIMED):
            for step, seconds in report.items():
                merged.setdefault(step, []).extend(float(s) for s in seconds)
    return merged


def _judge_writes(workload: Workload, result: TrialResult) -> None:
    """Once the members stopped: judge what they wrote, and stop the store whatever happens. A fenced store
    that let a stale write through is a violation; an unfenced one only counts it (that is what it shows)."""
    if not workload.active:
        return
    try:
        found = workload.judge()
    except Exception as exc:  # the store died or its log is unreadable: the trial cannot vouch for the writes
        result.ok = False
        result.error = "\n".join(filter(None, [result.error, f"writes not checked: {type(exc).__name__}: {exc}"]))
        return
    finally:
        workload.close()
    if found is None:
        return
    result.writes, result.rejected = found.accepted, found.rejected
    result.stale_writes, result.lost_writes = len(found.stale_accepted), len(found.lost)
    result.conflicting_writes = len(found.conflicting)
    if workload.kind == "fenced":
        result.violations += [v.as_violation() for v in found.violations()]


def _reach_steady_state(spec: TrialSpec, procs: Sequence[MemberProcess], result: TrialResult, began: float,
                        progress: Status) -> None:
    """Start the members; once every role is led and the group has settled, record start-up and distribution."""
    progress("starting members")
    for p in procs:
        p.start()
    wait_until(lambda: led(procs) >= spec.role_names, spec.bound + 30, interval=0.05,
               what=f"{spec.method.name}: a leader for every role")
    result.startup = time.monotonic() - began
    progress("settling")
    quiet = spec.method.quiet(spec.budget)
    if settle(procs, quiet=quiet, limit=spec.bound, all_started=True):
        result.settled = max(p.log.last for p in procs) - began
    else:  # a liveness failure of its own: the group never went quiet (an acquire/fence loop, say)
        result.violations.append(Violation("unsettled", "", time.monotonic(),
                                           f"the group had not been quiet for {quiet:g} s within {spec.bound:g} s "
                                           "of every role being led after its cold start"))
    steady = time.monotonic()
    steady_ivs = History([line for p in procs for line in p.log.lines], end=steady).intervals()
    result.steady_max_led = max_led(steady_ivs, steady - 1e-6)
    result.steady_balanced = balanced(result.steady_max_led, spec.roles, len(procs))


def _rest(spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess], result: TrialResult) -> None:
    """The group at rest, nothing struck, for `spec.rest` seconds: every leadership that ends in the window (a
    `fenced` or `revoked` line) is a false failover; each member's CPU over the window; with the relays (meter),
    what each member sent, as the load window counts it."""
    ends = sum(p.log.ended for p in procs)
    cpu = {p.member_id: used.cpu_seconds for p in procs
           if (used := usage(env.placement.process_id(p, p.pid))) is not None}
    sent = env.router.messages() if env.router else {}
    t0 = time.monotonic()
    wait_until_time(t0 + spec.rest)
    result.rest = time.monotonic() - t0
    result.rest_changes = sum(p.log.ended for p in procs) - ends
    for p in procs:
        used = usage(env.placement.process_id(p, p.pid))
        if used is not None and p.member_id in cpu:
            result.rest_cpu[p.member_id] = (used.cpu_seconds - cpu[p.member_id]) / result.rest
    after = env.router.messages() if env.router else {}
    for member, count in after.items():
        result.sent_rps[member] = (count - sent.get(member, 0)) / result.rest


def _count_load(spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess], result: TrialResult) -> None:
    before = {p.member_id: env.placement.sent(p.member_id) for p in procs}
    sent_before = env.router.messages() if env.router else {}
    t0 = time.monotonic()
    wait_until_time(t0 + spec.load_window)
    elapsed = time.monotonic() - t0
    sent_after = env.router.messages() if env.router else {}
    for p in procs:
        if p.member_id in sent_after:
            result.sent_rps[p.member_id] = (sent_after[p.member_id] - sent_before.get(p.member_id, 0)) / elapsed
    for p in procs:
        a, b = before[p.member_id], env.placement.sent(p.member_id)
        if a is not None and b is not None:
            result.sent_pps[p.member_id] = (b[0] - a[0]) / elapsed
            result.sent_bps[p.member_id] = (b[1] - a[1]) / elapsed


def strike_member(fault: MemberFault, spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess],
                  records: list[Record], progress: Status, role: str = "0") -> None:
    """Fault the leader of `role` (a trial: role 0; a soak: the role its schedule drew); wait for survivors to
    take its roles (if the fault makes them move); heal it after the hold if the fault heals, and wait for it to
    report how its leadership ended (a restarted one: to lead again); settle."""
    victim = (leaders(procs, role) or [procs[0]])[0]
    held = set(victim.log.leading())
    survivors = [p for p in procs if p is not victim]
    read = {p.member_id: len(p.log) for p in survivors}  # lines from before the fault need no look
    waiting = set(held)
    progress(f"{fault} {victim.member_id} (leads {len(held)} roles)")
    skewed = fault.clocks(victim.member_id, [p.member_id for p in survivors])
    at = time.monotonic()
    set_clocks(procs, skewed)
    fault.inject(env.placement, victim)
    records.append(Record(at, fault.name, victim.member_id))

    def recovered() -> bool:  # reads only the lines that came since the last look
        for p in survivors:
            new = p.log.since(read[p.member_id])
            read[p.member_id] += len(new)
            waiting.difference_update(line["role"] for line in new if line["event"] == "acquired" and
                                      line["mono"] >= at)
        return not waiting

    if fault.fails_over:  # a lossy or slow link may move nothing: it is held for the hold only
        with contextlib.suppress(WaitTimeout):  # what did not recover is reported as unrecovered
            wait_until(recovered, spec.bound, interval=0.02, what="survivors acquiring the victim's roles")
    if fault.healed_as is not None:
        wait_until_time(at + spec.hold_for)
        records.append(Record(time.monotonic(), fault.healed_as, victim.member_id))
        set_clocks(procs, dict.fromkeys(skewed, 1.0))  # the time they lost or gained stays: a rate, not a step
        fault.heal(env.placement, victim)
        if fault.fails_over:
            with contextlib.suppress(WaitTimeout):  # the woken victim reports how its leadership ended
                wait_until(lambda: not (set(victim.log.leading()) & held), spec.bound, interval=0.02,
                           what="the victim to fence itself")
        if fault.kills_process:  # started again: back once its new life leads (each method shares roles out) ...
            with contextlib.suppress(WaitTimeout):
                wait_until(victim.log.leading, spec.bound, interval=0.02, what="the restarted victim to lead")
                # ... and once the group is balanced again (a rebalance may wait out a hysteresis, in silence)
                wait_until(lambda: _balanced_now(procs, spec.role_names), spec.bound, interval=0.05,
                           what="the group balanced again")
    settle(procs, quiet=max(1.0, spec.budget), limit=spec.bound)


def _balanced_now(procs: Sequence[MemberProcess], roles: set[str]) -> bool:
    """Every role has one leader, and the busiest member leads ceil(roles / members), as the logs say now."""
    held = [p.log.leading() & roles for p in procs if p.alive]
    if sum(len(h) for h in held) != len(roles) or set().union(*held) != roles:
        return False  # a role led by nobody, or by two
    return balanced(max((len(h) for h in held), default=0), len(roles), len(procs))


def strike_infrastructure(fault: InfraFault, spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess],
                          records: list[Record], progress: Status, turn: int = 0) -> None:
    """Fault one member of the service the method's `turn`-th infrastructure fault strikes (`Method.strikes`), hold,
    bring it back, wait until every role is led."""
    if env.infra is None or not spec.method.needs:
        raise ValueError(f"{spec.method.name} has no infrastructure the harness can fault")
    service = spec.method.strikes(turn)
    at = time.monotonic()
    victim = fault.inject(env.infra, service)
    records.append(Record(at, fault.name, victim.label, f"1 of {env.infra.members(service)}"))
    progress(f"{fault} {victim.label}; holding {spec.hold_for:g} s")
    try:
        wait_until_time(at + spec.hold_for)
    finally:
        records.append(Record(time.monotonic(), fault.healed_as, victim.label))
        progress(f"{fault.healed_as} {victim.label}")
        fault.heal(env.infra, victim, timeout=spec.bound + 30)
    progress("waiting for every role to be led again")
    with contextlib.suppress(WaitTimeout):  # what did not recover is reported as unrecovered
        wait_until(lambda: led(procs) >= spec.role_names, spec.bound, interval=0.02,
                   what="a leader for every role after the restart")


def _observed(placement: Placement, procs: Sequence[MemberProcess], records: list[Record], began: float,
              result: TrialResult) -> History:
    """The history up to now, and what each live member has used over its life."""
    end = time.monotonic()
    for p in procs:
        used = usage(placement.process_id(p, p.pid)) if p.alive else None
        if used is not None:
            result.cpu[p.member_id], result.rss_mb[p.member_id] = used.cpu_share, used.rss_mb
    return History([line for p in procs for line in p.log.lines if line["mono"] <= end], records,
                   start=began, end=end)


def _measure(spec: TrialSpec, promised: Characteristics, history: History, procs: Sequence[MemberProcess],
             result: TrialResult) -> None:
    ivs = history.intervals()
    if history.faults and isinstance(spec.fault, LifecycleFault):
        record = next(f for f in history.faults if f.kind == spec.fault.name)
        gaps = handover_gaps(history, record)
        result.failover = [f.latency for f in gaps if f.latency is not None]
        result.unrecovered = sum(1 for f in gaps if f.latency is None)
        result.gap = sum(total(leaderless(ivs.get(r, []), record.mono, history.end)) for r in spec.role_names)
        live = sum(1 for p in procs if p.alive)
        result.after_max_led = max_led(ivs, history.end - 1e-6)
        result.after_balanced = balanced(result.after_max_led, spec.roles, live)
    elif history.faults:
        record = history.faults[0]
        disrupts = spec.fault.measured_as_disruption
        lost = disruptions(history, record) if disrupts else failovers(history, record)
        result.disrupted = len(lost) if disrupts else 0
        result.failover = [f.latency for f in lost if f.latency is not None]
        result.unrecovered = sum(1 for f in lost if f.latency is None)
        result.gap = sum(total(leaderless(ivs.get(r, []), record.mono, history.end)) for r in spec.role_names)
        # a killed or stopped victim is gone; a paused or cut one is back by the end and counts
        gone = record.target if spec.fault.removes_victim else None
        result.after_max_led = max_led({r: [i for i in v if i.member != gone] for r, v in ivs.items()},
                                       history.end - 1e-6)
        result.after_balanced = balanced(result.after_max_led, spec.roles,
                                         sum(1 for p in procs if p.member_id != gone))
        back = next((f for f in history.faults if spec.fault.kills_process and f.kind == spec.fault.healed_as), None)
        if back is not None:
            since = balanced_from(ivs, sorted(spec.role_names), len(procs), back.mono, history.end)
            result.rebalance = None if since is None else since - back.mono
    spans = [o for r in ivs.values() for o in overlaps(r)]
    result.overlap = sum(e - s for s, e, _ in spans)
    result.max_overlap = max((e - s for s, e, _ in spans), default=0.0)
    result.violations += check_promise(history, promised, spec.budget)
    result.max_drift = promised.max_drift


def _failure(exc: Exception, procs: Sequence[MemberProcess]) -> str:
    """Why a trial could not run, with the last words of every member that exited with an error."""
    error = f"{type(exc).__name__}: {exc}"
    for p in procs:
        if p.returncode not in (None, 0):
            error += f"\n--- {p.member_id} exited {p.returncode}:\n{p.stderr_tail(15)}"
    return error


def _stop(spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess], progress: Status) -> None:
    progress("stopping members")
    if isinstance(spec.fault, MemberFault):
        for p in procs:
            with contextlib.suppress(Exception):  # put every member back in a state where it can stop
                spec.fault.heal(env.placement, p)
                if p.fake_clock is not None and p.alive:
                    p.fake_clock.set_rate(1.0)
    for p in procs:
        p.stop(timeout=max(10.0, 5 * spec.budget))


def wait_until_time(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
