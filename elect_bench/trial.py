"""One trial: start a group of real member processes, wait for steady state, inject one fault, watch
the handover, stop, and turn the merged event lines into measurements.

Faults (DESIGN.md): `kill` (SIGKILL), `pause` (SIGSTOP for a while, then SIGCONT), `stop` (graceful,
SIGTERM), `cut` (the leader's network-namespace host loses its link), `none` (steady state only: cold
start distribution and load). The victim is the member leading role 0 at steady state.

`infra` kills one member of the method's infrastructure instead (the store's leader, or the only
broker) and starts it again after the hold; `infra-pause` freezes it for the hold instead (SIGSTOP,
state intact). Both measure the disruption: which roles lost their leader, how long until each was
led again, gaps and overlap.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elect_bench.checker import check
from elect_bench.history import Fault, History
from elect_bench.infrastructure import InfraFaults
from elect_bench.members import MemberProcess
from elect_bench.metering import Router
from elect_bench.methods import Group, Method, direct
from elect_bench.metrics import balanced, disruptions, failovers, leaderless, max_led, overlaps, total
from elect_bench.placement import LocalPlacement, Placement
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import WaitTimeout, wait_until

FAULTS = ("kill", "pause", "stop", "cut", "infra", "infra-pause", "none")
INFRA_FAULTS = ("infra", "infra-pause")


@dataclass(frozen=True)
class TrialSpec:
    method: Method
    fault: str
    budget: float = 1.0
    members: int = 3
    roles: int = 6
    hold: float = 0.0  # pause / cut / infra outage length; 0 = 3 x budget
    load_window: float = 0.0  # seconds of steady state over which each member's sent messages are counted
    overrides: dict[str, str] = field(default_factory=dict)

    @property
    def hold_for(self) -> float:
        return self.hold or 3 * self.budget


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
    violations: list[str] = field(default_factory=list)
    startup: float = 0.0                                  # seconds from start to every role led
    cpu: dict[str, float] = field(default_factory=dict)   # member -> share of one core
    rss_mb: dict[str, float] = field(default_factory=dict)
    members: int = 0
    sent_rps: dict[str, float] = field(default_factory=dict)  # member -> requests / messages per s it sent
    sent_pps: dict[str, float] = field(default_factory=dict)  # member -> packets/s it sent at steady state
    sent_bps: dict[str, float] = field(default_factory=dict)  # member -> bytes/s
    history: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Environment:
    """Where a trial runs: the infrastructure's endpoints and the members' placement."""

    def __init__(self, endpoints: Endpoints | None, workdir: Path, placement: Placement | None = None,
                 infra: InfraFaults | None = None, router: Router | None = None) -> None:
        self.endpoints = endpoints
        self.workdir = workdir
        self.placement: Placement = placement or LocalPlacement()
        self.infra = infra
        self.router = router  # counting relays between members and what they dial, when load is counted


def _leaders(procs: Sequence[MemberProcess], role: str) -> list[MemberProcess]:
    return [p for p in procs if p.alive and role in p.log.leading()]


def _usage(pid: int) -> tuple[float, float]:
    """(average share of one core over its life, RSS in MB) of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        rss_pages = int(fields[21])
    except (OSError, IndexError, ValueError):
        return math.nan, math.nan
    hz = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    started = int(fields[19]) / hz
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    alive_for = max(uptime - started, 1e-6)
    return (ticks / hz) / alive_for, rss_pages * page / 1e6


def run_trial(spec: TrialSpec, env: Environment, index: int, unique: str,
              progress: Callable[[str], None] = lambda _m: None) -> TrialResult:
    """Run one trial; never raises for a failed trial (it comes back with ok=False and the reason)."""
    result = TrialResult(spec.method.name, spec.fault, index, ok=False, members=spec.members)
    ids = [f"m{i}" for i in range(spec.members)]
    roles = [str(r) for r in range(spec.roles)]
    group = Group(ids, spec.roles, unique, env.endpoints, env.placement.address, env.router or direct)
    urls = spec.method.member_urls(group, spec.budget, spec.overrides)
    logdir = env.workdir / unique
    procs = [MemberProcess(urls[i], i, list(range(spec.roles)), log_dir=logdir, prefix=env.placement.prefix(i),
                           python=env.placement.python) for i in ids]
    faults: list[Fault] = []
    bound = 10 * spec.budget + 20  # generous: anything slower is reported as unrecovered, not waited on
    began = time.monotonic()
    end = began
    try:
        progress("starting members")
        for p in procs:
            p.start()
        wait_until(lambda: all(_leaders(procs, r) for r in roles), bound + 30, interval=0.05,
                   what=f"{spec.method.name}: a leader for every role")
        result.startup = time.monotonic() - began
        progress("settling")
        _settle(procs, quiet=max(1.0, 1.5 * spec.budget), limit=bound)
        steady = time.monotonic()
        steady_ivs = History([line for p in procs for line in p.log.lines], end=steady).intervals()
        result.steady_max_led = max_led(steady_ivs, steady - 1e-6)
        result.steady_balanced = balanced(result.steady_max_led, spec.roles, len(procs))
        if spec.load_window > 0:
            progress(f"counting load for {spec.load_window:g} s")
            _count_load(spec, env, procs, result)
        if spec.fault in INFRA_FAULTS:
            _infra_fault(spec, env, procs, faults, bound, progress)
        elif spec.fault != "none":
            victim = (_leaders(procs, "0") or [procs[0]])[0]
            led = set(victim.log.leading())
            progress(f"{spec.fault} {victim.member_id} (leads {len(led)} roles)")
            at = _inject(spec, env, victim, faults)
            survivors = [p for p in procs if p is not victim]

            def recovered() -> bool:
                return all(any(line["event"] == "acquired" and line["role"] == r and line["mono"] >= at
                               for p in survivors for line in p.log.lines) for r in led)

            with contextlib.suppress(WaitTimeout):  # what did not recover is reported as unrecovered
                wait_until(recovered, bound, interval=0.02, what="survivors acquiring the victim's roles")
            if spec.fault in ("pause", "cut"):
                _wait_until_time(at + spec.hold_for)
                faults.append(Fault(time.monotonic(), "resume" if spec.fault == "pause" else "heal",
                                    victim.member_id))
                if spec.fault == "pause":
                    env.placement.resume(victim)
                else:
                    env.placement.heal(victim.member_id)
                with contextlib.suppress(WaitTimeout):  # the woken victim reports how its leadership ended
                    wait_until(lambda: not (set(victim.log.leading()) & led), bound, interval=0.02,
                               what="the victim to fence itself")
            _settle(procs, quiet=max(1.0, spec.budget), limit=bound)
        end = time.monotonic()
        for p in procs:
            if p.alive:
                result.cpu[p.member_id], result.rss_mb[p.member_id] = _usage(p.pid)
        history = History([line for p in procs for line in p.log.lines if line["mono"] <= end], faults,
                          start=began, end=end)
        _measure(spec, history, faults, procs, result)
        result.ok = True
    except Exception as exc:  # a trial that could not run is a finding, not a crash of the suite
        result.error = f"{type(exc).__name__}: {exc}"
        for p in procs:
            if p.returncode not in (None, 0):
                result.error += f"\n--- {p.member_id} exited {p.returncode}:\n{p.stderr_tail(15)}"
        history = History([line for p in procs for line in p.log.lines], faults, start=began,
                          end=time.monotonic())
    finally:
        progress("stopping members")
        for p in procs:
            with contextlib.suppress(Exception):  # put every member back in a state where it can stop
                if spec.fault == "cut":
                    env.placement.heal(p.member_id)
                elif spec.fault == "pause":
                    env.placement.resume(p)
        for p in procs:
            p.stop(timeout=max(10.0, 5 * spec.budget))
    result.history = history.to_json()
    return result


def _count_load(spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess], result: TrialResult) -> None:
    before = {p.member_id: env.placement.sent(p.member_id) for p in procs}
    sent_before = env.router.messages() if env.router else {}
    t0 = time.monotonic()
    _wait_until_time(t0 + spec.load_window)
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


def _infra_fault(spec: TrialSpec, env: Environment, procs: Sequence[MemberProcess], faults: list[Fault],
                 bound: float, progress: Callable[[str], None]) -> None:
    """Kill (or freeze) one member of the infrastructure, hold, bring it back, wait until every role is led."""
    if env.infra is None or not spec.method.needs:
        raise ValueError(f"{spec.method.name} has no infrastructure the harness can fault")
    service = spec.method.needs[0]
    kill = spec.fault == "infra"
    at = time.monotonic()
    victim = env.infra.kill(service) if kill else env.infra.pause(service)
    faults.append(Fault(at, spec.fault, victim.label, f"1 of {env.infra.members(service)}"))
    progress(f"{'killed' if kill else 'froze'} {victim.label}; holding {spec.hold_for:g} s")
    try:
        _wait_until_time(at + spec.hold_for)
    finally:
        faults.append(Fault(time.monotonic(), "restart" if kill else "resume", victim.label))
        progress(f"{'restarting' if kill else 'resuming'} {victim.label}")
        if kill:
            env.infra.restart(victim, timeout=bound + 30)
        else:
            env.infra.resume(victim)
    progress("waiting for every role to be led again")
    with contextlib.suppress(WaitTimeout):  # what did not recover is reported as unrecovered
        wait_until(lambda: all(_leaders(procs, str(r)) for r in range(spec.roles)), bound, interval=0.02,
                   what="a leader for every role after the restart")


def _inject(spec: TrialSpec, env: Environment, victim: MemberProcess, faults: list[Fault]) -> float:
    actions: dict[str, Callable[[], None]] = {
        "kill": lambda: env.placement.kill(victim),
        "pause": lambda: env.placement.pause(victim),
        "stop": lambda: env.placement.stop(victim),
        "cut": lambda: env.placement.cut(victim.member_id),
    }
    if spec.fault not in actions:
        raise ValueError(f"unknown fault {spec.fault!r}; choose from {', '.join(FAULTS)}")
    at = time.monotonic()
    actions[spec.fault]()
    faults.append(Fault(at, spec.fault, victim.member_id))
    return at


def _measure(spec: TrialSpec, history: History, faults: list[Fault], procs: Sequence[MemberProcess],
             result: TrialResult) -> None:
    ivs = history.intervals()
    if faults and faults[0].kind in INFRA_FAULTS:
        fault = faults[0]
        lost = disruptions(history, fault)
        result.disrupted = len(lost)
        result.failover = [f.latency for f in lost if f.latency is not None]
        result.unrecovered = sum(1 for f in lost if f.latency is None)
        result.gap = sum(total(leaderless(ivs.get(str(r), []), fault.mono, history.end)) for r in range(spec.roles))
        result.after_max_led = max_led(ivs, history.end - 1e-6)
        result.after_balanced = balanced(result.after_max_led, spec.roles, len(procs))
    elif faults:
        fault = faults[0]
        fos = failovers(history, fault)
        result.failover = [f.latency for f in fos if f.latency is not None]
        result.unrecovered = sum(1 for f in fos if f.latency is None)
        result.gap = sum(total(leaderless(ivs.get(str(r), []), fault.mono, history.end)) for r in range(spec.roles))
        # after a kill or stop the victim is gone; a paused or cut victim is back by the end and counts
        gone = fault.target if fault.kind in ("kill", "stop") else None
        live = [p for p in procs if p.member_id != gone]
        result.after_max_led = max_led({r: [i for i in v if i.member != gone] for r, v in ivs.items()},
                                       history.end - 1e-6)
        result.after_balanced = balanced(result.after_max_led, spec.roles, len(live))
    spans = [o for r in ivs.values() for o in overlaps(r)]
    result.overlap = sum(e - s for s, e, _ in spans)
    result.max_overlap = max((e - s for s, e, _ in spans), default=0.0)
    result.violations = [str(v) for v in check(history, exclusive=spec.method.exclusive)]


def _settle(procs: Sequence[MemberProcess], quiet: float, limit: float) -> None:
    """Wait until no member has printed an event for `quiet` seconds (rebalances over), or `limit`."""
    deadline = time.monotonic() + limit

    def last_event() -> float:
        return max((p.log.lines[-1]["mono"] for p in procs if p.log.lines), default=0.0)

    while time.monotonic() < deadline:
        idle = time.monotonic() - last_event()
        if idle >= quiet:
            return
        time.sleep(min(quiet - idle, deadline - time.monotonic(), 0.2) + 0.001)


def _wait_until_time(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
