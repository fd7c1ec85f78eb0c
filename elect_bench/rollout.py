"""Carrying out a lifecycle fault (elect_bench.faults.lifecycle) on a running group, and measuring the rollout.

`Fleet` holds the group's member processes as the rollout changes them: a member started again with its id, a new
member started with a URL its method makes for it (raft:// joins through the running members), one retired for
good (raft:// leaves the configuration as it goes). `roll` takes the fault's steps one at a time and, after each,
waits as an operator's tooling would: a stopped member until it has exited, then the hold; a returning or new member
until every role is led and, where the method hands roles back, the group is balanced again (a rollout that moved
on sooner would stack one step's handovers on the next one's). `measure` reads the whole rollout from the history.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from elect.errors import ConfigError
from elect_bench.faults.lifecycle import ROLLED, STEPS, Fresh, LifecycleFault, Step
from elect_bench.judging.history import FaultRecord, History, Interval
from elect_bench.judging.measures import balanced, balanced_from, holders_at, leaderless
from elect_bench.members import MemberProcess
from elect_bench.methods import Group, Method
from elect_bench.placement import Placement
from elect_bench.progress import Status
from elect_cluster.ports import free_port
from elect_cluster.waiting import WaitTimeout, wait_until

Launch = Callable[[str, str], MemberProcess]  # (member id, URL) -> its process, not started


class Fleet:
    """A group's members through a rollout: `procs` the current ones (in the order they joined), `retired` those
    that left for good (their lines stay in the history)."""

    def __init__(self, method: Method, group: Group, budget: float, overrides: dict[str, str], urls: dict[str, str],
                 procs: list[MemberProcess], launch: Launch, placement: Placement, state_dir: Path) -> None:
        self.method, self.group, self.budget, self.overrides = method, group, budget, overrides
        self.urls = urls
        self.procs = procs
        self.retired: list[MemberProcess] = []
        self.launch = launch
        self.placement = placement
        self.state_dir = state_dir
        self.fresh = Fresh(list(urls))

    def member(self, ident: str) -> MemberProcess:
        return next(p for p in self.procs if p.member_id == ident)

    @property
    def live(self) -> list[MemberProcess]:
        return [p for p in self.procs if p.alive]

    def new_url(self, ident: str) -> str:
        """A URL for a member of a new id: raft:// joins through the running members; a store-based method's
        members differ only by id."""
        if not self.method.grows:
            raise ConfigError(f"{self.method.name}: its members' peers are fixed at start, so no member of a new id "
                              "can be started (bench/raft_membership.py changes the Java Raft anchors' membership with "
                              "their own tools)", parameter="faults")
        if self.method.scheme == "raft":
            running = {p.member_id: raft_address(p.url) for p in self.live}
            return join_url(next(iter(self.urls.values())), ident,
                            f"{self.placement.address(ident)}:{free_port()}", running, self.state_dir / ident)
        return self.method.member_urls(replace(self.group, ids=[ident]), self.budget, self.overrides)[ident]

    def add(self, ident: str) -> MemberProcess:
        """Start a member of a new id beside the running ones."""
        url = self.new_url(ident)
        self.urls[ident] = url
        proc = self.launch(ident, url)
        self.procs.append(proc)
        proc.start()
        return proc

    def retire(self, proc: MemberProcess, bound: float) -> None:
        """Stop `proc` for good, gracefully: raft:// `leave` (drain, removed from the configuration, exit 0), any
        other method SIGTERM (it hands its roles over and exits); wait until it has exited (SIGKILL after `bound`)."""
        if self.method.scheme == "raft" and not self.method.anchor:
            proc.command("leave")
        else:
            self.placement.stop(proc)
        with contextlib.suppress(WaitTimeout):
            wait_until(lambda: not proc.alive, bound, interval=0.02, what=f"{proc.member_id} to leave")
        proc.kill()  # (a no-op once it exited)
        self.procs.remove(proc)
        self.retired.append(proc)


def raft_address(url: str) -> str:
    """HOST:PORT of a raft:// member URL."""
    return url.split("://", 1)[1].split("?", 1)[0].split("@", 1)[1]


def join_url(base: str, ident: str, address: str, running: dict[str, str], data_dir: Path) -> str:
    """A raft:// URL for a new member `ident` at `address` that joins `running` (id -> HOST:PORT): `base`'s options
    with `peers` replaced by `join`, its state in `data_dir`."""
    _, _, query = base.partition("?")
    params = [kv for kv in query.split("&") if kv and not kv.startswith(("peers=", "join=", "data_dir="))]
    joins = ",".join(f"{m}@{a}" for m, a in sorted(running.items()))
    return f"raft://{ident}@{address}?" + "&".join([f"join={joins}", *params, f"data_dir={data_dir}"])


@dataclass
class Rollout:
    """What a rollout did, as it went: when it began and ended, and the moves it could not do without."""

    began: float = 0.0
    ended: float = 0.0
    last_step: float = 0.0
    needed: int = 0
    """Leadership moves no rollout of these steps avoids: each role a departing member led (it must move once), and
    each returning or new member's share where the method hands roles back (they must move to it)."""
    unsettled: int = 0
    """Steps after which the group was not led throughout (and balanced, where the method hands back) within the
    bound: the next step came anyway."""
    steps: int = 0


def roll(fault: LifecycleFault, fleet: Fleet, roles: set[str], members: int, hold: float, bound: float,
         records: list[FaultRecord], progress: Status) -> Rollout:
    """Carry out `fault` on `fleet` (configured size `members`); record each step in `records`."""
    done = Rollout()
    prep = fault.prepare([p.member_id for p in fleet.procs], members, fleet.fresh)
    if prep:
        progress(f"{fault}: first {len(prep)} unmeasured step(s) to {fault.members_at_start(members)} members")
    for step in prep:
        _step(step, fleet, roles, hold, bound, records, progress, Rollout())
    ids = [p.member_id for p in fleet.procs]
    plan = fault.plan(ids, members, fleet.fresh)
    done.began = time.monotonic()
    records.append(FaultRecord(done.began, fault.name, ",".join(ids), f"{len(plan)} steps"))
    for step in plan:
        _step(step, fleet, roles, hold, bound, records, progress, done)
    done.ended = time.monotonic()
    records.append(FaultRecord(done.ended, ROLLED, ",".join(p.member_id for p in fleet.procs)))
    return done


def _step(step: Step, fleet: Fleet, roles: set[str], hold: float, bound: float, records: list[FaultRecord],
          progress: Status, done: Rollout) -> None:
    method = fleet.method
    at = time.monotonic()
    done.steps += 1
    done.last_step = at
    if step.away:
        proc = fleet.member(step.member)
        done.needed += len(proc.log.leading() & roles)
        records.append(FaultRecord(at, STEPS[step.action], step.member))
        progress(f"{step.action} {step.member} (leads {len(proc.log.leading() & roles)})")
        if step.action == "leave":
            fleet.retire(proc, bound)
        else:
            fleet.placement.kill(proc) if step.kills else fleet.placement.stop(proc)
            with contextlib.suppress(WaitTimeout):
                wait_until(lambda: not proc.alive, bound, interval=0.02, what=f"{step.member} to exit")
            proc.kill()  # (a no-op once it exited; one that would not stop is taken down all the same)
            _wait_until_time(at + hold)  # away for the hold, as a pod's replacement takes its time to come up
            return  # it comes back in the next step
        if not _recovered(fleet, roles, bound, None):
            done.unsettled += 1
        return
    if step.action == "start":
        proc = fleet.member(step.member)
        records.append(FaultRecord(time.monotonic(), STEPS["start"], step.member))
        fleet.placement.restart(proc)
    else:
        records.append(FaultRecord(time.monotonic(), STEPS["join"], step.member))
        proc = fleet.add(step.member)
    progress(f"{step.action} {step.member}")
    live = len(fleet.live)
    if method.hands_back:
        done.needed += len(roles) // max(1, live)
    if not _recovered(fleet, roles, bound, proc):
        done.unsettled += 1


def _recovered(fleet: Fleet, roles: set[str], bound: float, arrived: MemberProcess | None) -> bool:
    """Wait until every role has one leader and, where the method hands roles back, the group is balanced (the
    member that `arrived` leading its share); False if `bound` passed first."""
    def ok() -> bool:
        if arrived is not None and not arrived.started():
            return False
        held = [p.log.leading() & roles for p in fleet.live]
        if sum(len(h) for h in held) != len(roles) or set().union(*held) != roles:
            return False
        return not fleet.method.hands_back or balanced(max(len(h) for h in held), len(roles), len(held))

    try:
        wait_until(ok, bound, interval=0.02, what="every role led once (balanced) after the step")
    except WaitTimeout:
        return False
    return True


def _wait_until_time(t: float) -> None:
    while (left := t - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))


@dataclass
class Measured:
    """A rollout read from the history (docs/architecture.md, Lifecycle faults)."""

    seconds: float
    """From the first step to the last step's wait being over."""
    steps: int
    leaderless_sum: float
    """Seconds without a leader, summed over every role, over the rollout."""
    leaderless_max: float
    """The longest single span without a leader of any role."""
    moves: int
    """Leadership moves: each acquisition of a role by another member than its previous leader."""
    moves_needed: int
    moves_max_role: int
    balanced: bool
    """At the end: every role one leader, the busiest member leading ceil(roles / members)."""
    to_balance: float | None
    """From the last step until balanced for good (None: not balanced at the end)."""
    unsettled: int
    store_rps: float | None = None
    """Requests per second all members sent to the store or broker during the rollout (None: not counted)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def measure(history: History, done: Rollout, roles: Sequence[str], members: int,
            sent: int | None = None) -> Measured:
    """The rollout's measures from `history` (which runs past its end), `sent` requests counted during it."""
    ivs = history.intervals()
    lo, hi = done.began, history.end
    spans = [(e - s) for r in roles for s, e in leaderless(ivs.get(r, []), lo, hi)]
    moves_by_role = [_moves(ivs.get(r, []), lo, hi) for r in roles]
    since = balanced_from(ivs, list(roles), members, done.last_step, hi)
    held = holders_at(ivs, hi - 1e-6)
    counts: dict[str, int] = {}
    for r in roles:
        for m in held.get(r, [])[:1]:
            counts[m] = counts.get(m, 0) + 1
    whole = all(len(held.get(r, [])) == 1 for r in roles)
    seconds = max(1e-9, done.ended - done.began)
    return Measured(round(seconds, 3), done.steps, round(sum(spans), 4), round(max(spans, default=0.0), 4),
                    sum(moves_by_role), done.needed, max(moves_by_role, default=0),
                    whole and balanced(max(counts.values(), default=0), len(roles), members),
                    None if since is None else round(max(0.0, since - done.last_step), 3), done.unsettled,
                    None if sent is None else round(sent / seconds, 1))


def _moves(intervals: Sequence[Interval], lo: float, hi: float) -> int:
    """Acquisitions in [lo, hi] by another member than the role's previous leader (or of a role never led)."""
    moves, previous = 0, None
    for iv in sorted(intervals, key=lambda i: i.start):
        if lo <= iv.start <= hi and iv.member != previous:
            moves += 1
        previous = iv.member
    return moves

