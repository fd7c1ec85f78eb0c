"""Seeded chaos for the lease methods in simulation: a nemesis against `LeaseWorld`, judged by the real checker.

One seed draws a schedule of faults (the real harness's fault names: `kill` then a restart, `stop` then a start,
`pause`, `cut` then its heal, `infra-pause`: the store frozen) over `duration` seconds, heals everything
(links, store, every member up) three TTLs later, and runs on until the group has had time to recover. The
members' event lines (`lines_of`) are judged by `elect_bench.checker.check` as a real run's are: no two members
lead a role at once, tokens only grow, and after the heal every role is led again within the bound.

A seed replays exactly in a process whose string hashing is fixed (`PYTHONHASHSEED=0`): the lease core keeps roles
and sessions in sets, whose order follows the hash of their names, and it acts on them in that order. `replay`
runs one there; `elect bench sim-lease` runs every seed there, and its figures are then identical run after run.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial

from cas_lease import etcd, zookeeper
from cas_lease.options import EtcdOptions, ZooKeeperOptions
from elect_bench.checker import Violation, check
from elect_bench.faults.base import Fault
from elect_bench.faults.infrastructure import InfraPause
from elect_bench.faults.member import Cut, Kill, Pause, Stop
from elect_bench.history import FaultRecord, History
from elect_bench.simulation.cas_store import SimStore
from elect_bench.simulation.lease_world import LeaseWorld
from elect_bench.simulation.linked import ServerLink
from elect_bench.simulation.world import lines_of

KINDS = ("etcd", "zookeeper")
HASH_SEED = "0"
"""The `PYTHONHASHSEED` under which seeds replay (see the module)."""
FAULTS: tuple[type[Fault], ...] = (Kill, Stop, Pause, Cut, InfraPause)
"""What the nemesis draws from: the real harness's faults, by their registry classes."""


@dataclass(frozen=True)
class Shape:
    """One lease group: how many members, roles and seconds of TTL, and the nemesis's budget."""

    members: int = 3
    roles: int = 6
    ttl: float = 1.0
    duration: float = 8.0
    faults: int = 5


@dataclass(frozen=True)
class Outcome:
    """One seed's run: its violations, the faults drawn, and what it cost."""

    kind: str
    seed: int
    violations: tuple[Violation, ...]
    faults: tuple[FaultRecord, ...]
    events: int
    lines: int


def build(kind: str, seed: int, shape: Shape = Shape(), link: ServerLink | None = None, *,
          renewal_checks: bool = True, trust_store_expiry: bool = False) -> LeaseWorld:
    """A group of `kind` whose members run the core as `etcd://` / `zookeeper://` would with this TTL: the same
    `Timing` (`cas_lease.etcd.timing`, `cas_lease.zookeeper.timing`), request timeout and session length (for
    `renewal_checks` and `trust_store_expiry`, see `chaos`)."""
    members = {f"m{i}": [str(r) for r in range(shape.roles)] for i in range(shape.members)}
    if kind == "etcd":
        e = EtcdOptions(endpoints=("sim:2379",), ttl=shape.ttl)
        timing, session_ttl, timeout = etcd.timing(e), float(e.lease_seconds), e.timeout
    elif kind == "zookeeper":
        z = ZooKeeperOptions(hosts=("sim:2181",), session_timeout=shape.ttl)
        timing, session_ttl, timeout = zookeeper.timing(z), zookeeper.SESSION_FACTOR * z.session_timeout, z.timeout
    else:
        raise ValueError(f"no lease simulation of {kind!r} (one of {', '.join(KINDS)})")
    if trust_store_expiry:
        timing = replace(timing, silence_takeover=False)
    store = SimStore(kind, session_ttl, renewal_checks=renewal_checks, ephemeral_roles=trust_store_expiry)
    return LeaseWorld(store, timing, members, seed, link, request_timeout=timeout)


def leaderless_bound(shape: Shape) -> float:
    """How long after the heal a role may stay unled: members restarted at the heal open sessions, and a role
    whose holder died is taken once its silence was timed (a TTL), plus the renewal that shows it (slack of a TTL
    for the store's own session lapses and retries)."""
    return 3 * shape.ttl


def chaos(kind: str, seed: int, shape: Shape = Shape(), link: ServerLink | None = None, *,
          renewal_checks: bool = True, trust_store_expiry: bool = False) -> Outcome:
    """One seed's schedule of faults against a group of `kind`, judged. To show what the design prevents:
    `renewal_checks=False`, a ZooKeeper store whose renewals do not check the member's role nodes (what
    `cas_lease.zookeeper` relies on); `trust_store_expiry=True`, the ZooKeeper design before 0a1cbd1 (role nodes
    ephemeral, the core trusting the store to free a dead holder's roles: `Timing.silence_takeover=False`), which
    the soaks of 2026-11-23 broke when a frozen ZooKeeper leader woke."""
    world = build(kind, seed, shape, link, renewal_checks=renewal_checks, trust_store_expiry=trust_store_expiry)
    rng = random.Random(seed ^ 0x1EA5E)
    names = list(world.members)
    ttl = shape.ttl
    faults: list[FaultRecord] = []

    def strike(fault: type[Fault], victim: str, act: Callable[[], None]) -> None:
        faults.append(FaultRecord(world.now, fault.name, victim))
        act()

    for _ in range(shape.faults):
        t = rng.uniform(0.5, shape.duration)
        fault, victim = rng.choice(FAULTS), rng.choice(names)
        act: Callable[[], None]
        if fault is Kill or fault is Stop:  # then a start, as a supervisor would
            act = partial(world.kill if fault is Kill else world.stop, victim)
            world.at(t + rng.uniform(0.05, 3 * ttl), partial(world.restart, victim))
        elif fault is Pause:
            act = partial(world.pause, victim, rng.uniform(0.1, 3 * ttl))
        elif fault is Cut:  # then its heal
            act = partial(world.cut, victim)
            world.at(t + rng.uniform(0.1, 3 * ttl), partial(world.heal, victim))
        else:
            act = partial(world.freeze_store, rng.uniform(0.1, 2 * ttl))
        world.at(t, partial(strike, fault, victim, act))
    healed_at = shape.duration + 3 * ttl

    def heal_all() -> None:
        world.heal()
        for name in names:
            world.restart(name)

    world.at(healed_at, heal_all)
    world.run_until(healed_at + 4 * leaderless_bound(shape))
    lines = lines_of(world.history)
    history = History(lines, faults, start=0.0, end=world.now)
    found = check(history, exclusive=True, leaderless_bound=leaderless_bound(shape), healed_at=healed_at)
    return Outcome(kind, seed, tuple(found), tuple(faults), world.events_processed, len(lines))


def hashed_alike() -> bool:
    """Whether this process hashes strings as `replay` needs."""
    return os.environ.get("PYTHONHASHSEED") == HASH_SEED


@contextmanager
def replay_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """Worker processes that hash strings as `replay` needs: started afresh (spawned, not forked) while
    `PYTHONHASHSEED` is set, which it stays for the pool's life (a pool starts its workers as work comes)."""
    before = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = HASH_SEED
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            yield pool
    finally:
        if before is None:
            del os.environ["PYTHONHASHSEED"]
        else:
            os.environ["PYTHONHASHSEED"] = before


def replay(kind: str, seed: int, shape: Shape = Shape(), *, renewal_checks: bool = True,
           trust_store_expiry: bool = False) -> Outcome:
    """`chaos(kind, seed, shape, ...)` exactly as `elect bench sim-lease` ran it (in a process with fixed string
    hashing: this one if it has it, else a fresh one)."""
    run = partial(chaos, kind, seed, shape, renewal_checks=renewal_checks, trust_store_expiry=trust_store_expiry)
    if hashed_alike():
        return run()
    with replay_pool(1) as pool:
        return pool.submit(run).result()
