"""Seeded chaos in simulation, judged by the real checker: the lease methods (`LeaseWorld` against a simulated etcd
or ZooKeeper), NELI (`NeliWorld` against a simulated Kafka broker) and Raft (`Simulation` of `raft://` nodes with
their electors: the core, and the member's own policy that keeps the application's leaderships on deadlines).

One seed draws a schedule of faults (the real harness's fault names: `kill` then a restart, `stop` then a start,
`pause`, `cut` then its heal, `infra-pause`: the store or broker frozen; Raft has no server, and its cuts are one
way or both; `drift`: a member's clock at another rate for a while, within the bound the method states) over
`duration` seconds, heals everything (links, server, every member up) three TTLs later, and runs on until the group
has had time to recover. The members' event lines (`lines_of`) are judged by `elect_bench.judging.checker.check` as
a real run's are: no two members lead a role at once (or, for NELI full above its exclusivity bound, not for longer than
T), tokens only grow, and after the heal every role is led again within the bound.

The kinds are the `elect bench` method names (`etcd`, `zookeeper`, `kafka-fast`, `kafka-full` on the classic
protocol with the cooperative-sticky assignor, `kafka-fast-848`, `kafka-full-848` on KIP-848), and NELI on the
classic protocol's eager `range` assignor (`kafka-fast-eager`, `kafka-full-eager`), which the real suite does not
run by default, and `raft` (a `raft://` group of `members` nodes, one partition per role, the URL's defaults at an
election timeout of `ttl`).

A seed replays exactly in a process whose string hashing is fixed (`PYTHONHASHSEED=0`): the lease core keeps roles
and sessions in sets, whose order follows the hash of their names, and it acts on them in that order. `replay`
runs one there; `elect bench sim-lease` runs every seed there, and its figures are then identical run after run.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import Any

from cas_lease import etcd, zookeeper
from cas_lease.options import EtcdOptions, ZooKeeperOptions
from elect_bench.faults.base import Fault
from elect_bench.faults.clock import Drift
from elect_bench.faults.infrastructure import InfraPause
from elect_bench.faults.member import Cut, Kill, Pause, Stop
from elect_bench.faults.membership import Add, Remove, Replace
from elect_bench.judging.checker import Violation, check
from elect_bench.judging.history import FaultRecord, History
from elect_bench.simulation import raft_runner
from elect_bench.simulation.cas_store import SimStore
from elect_bench.simulation.kafka_group import Protocol
from elect_bench.simulation.lease_world import LeaseWorld
from elect_bench.simulation.linked import ServerLink
from elect_bench.simulation.neli_world import NeliWorld
from elect_bench.simulation.raft_world import NetworkModel, Simulation
from elect_bench.simulation.recorded import lines_of
from neli.options import KafkaOptions

LEASE_KINDS = ("etcd", "zookeeper")
NELI_KINDS = ("kafka-fast", "kafka-full", "kafka-fast-848", "kafka-full-848", "kafka-fast-eager", "kafka-full-eager")
RAFT_KINDS = ("raft", "raft-members")
KINDS = LEASE_KINDS + NELI_KINDS + RAFT_KINDS
HASH_SEED = "0"
"""The `PYTHONHASHSEED` under which seeds replay (see the module)."""
FAULTS: tuple[type[Fault], ...] = (Kill, Stop, Pause, Cut, InfraPause)
"""What the nemesis draws from: the real harness's faults, by their registry classes."""
RAFT_FAULTS: tuple[type[Fault], ...] = (Kill, Stop, Pause, Cut, Drift)
"""... against Raft, which has no infrastructure to freeze, and whose members' clocks may run at other rates (within
the bound the method states: `raft_options(shape).max_drift`)."""
MEMBERSHIP_FAULTS: tuple[type[Fault], ...] = (*RAFT_FAULTS, Add, Remove, Replace)
"""... and against `raft-members`: nodes added, removed and replaced while it runs, beside all of those."""
MOST_VOTERS, FEWEST_VOTERS = 6, 2
"""`raft-members` adds nodes while fewer than MOST_VOTERS vote, and removes while more than FEWEST_VOTERS do."""


@dataclass(frozen=True)
class ChaosShape:
    """One group: how many members, roles and seconds of TTL (a NELI session timeout), and the nemesis's budget:
    `faults` drawn over `duration` seconds, a store or broker frozen for up to `longest_freeze` TTLs."""

    members: int = 3
    roles: int = 6
    ttl: float = 1.0
    duration: float = 8.0
    faults: int = 5
    longest_freeze: float = 2.0
    drifts: int = 2
    """Clock-rate episodes drawn beside the faults against a lease or NELI group (Raft draws `drift` among them)."""


@dataclass(frozen=True)
class Outcome:
    """One seed's run: its violations, the faults drawn, and what it cost."""

    kind: str
    seed: int
    violations: tuple[Violation, ...]
    faults: tuple[FaultRecord, ...]
    events: int
    lines: int


ServerWorld = LeaseWorld | NeliWorld
World = ServerWorld | Simulation
RAFT_NETWORK = NetworkModel(spike_probability=0.02, spike_delay=0.05)
"""The gRPC streams between `raft://` nodes: in order, nothing lost while a link is up, 2 % of batches 50 ms late."""
NELI_LINK = ServerLink(spike_probability=0.02, spike_delay=0.05)
"""A NELI member's link: as a lease member's, with 2 % of requests and answers 50 ms late (a busy two-core machine
descheduling a sender between stamping a heartbeat and sending it), so records land out of their send order."""


def kafka_options(kind: str, shape: ChaosShape) -> tuple[KafkaOptions, Protocol]:
    """The options a `kafka://` member of `kind` has at the shape's budget (its session timeout), and the protocol."""
    if kind not in NELI_KINDS:
        raise ValueError(f"no NELI simulation of {kind!r} (one of {', '.join(NELI_KINDS)})")
    protocol: Protocol = "consumer" if kind.endswith("-848") else "eager" if kind.endswith("-eager") else "cooperative"
    options = KafkaOptions(servers=("sim:9092",), mode="full" if kind.startswith("kafka-full") else "fast",
                           session_timeout=shape.ttl, protocol="consumer" if protocol == "consumer" else "classic",
                           assignment="range" if protocol == "eager" else "cooperative-sticky")
    return options, protocol


def build(kind: str, seed: int, shape: ChaosShape = ChaosShape(), link: ServerLink | None = None, *,
          renewal_checks: bool = True, trust_store_expiry: bool = False, prefetch: bool = True,
          skewed_walls: bool = False) -> ServerWorld:
    """A group of `kind` whose members run the core as `etcd://`, `zookeeper://` or `kafka://` would with this TTL
    (session timeout): the same `Timing` (`cas_lease.etcd.timing`, `cas_lease.zookeeper.timing`), request timeout and
    session length, or the same `KafkaOptions` (for `renewal_checks`, `trust_store_expiry`, `prefetch` and
    `skewed_walls`, see `chaos`)."""
    members = {f"m{i}": [str(r) for r in range(shape.roles)] for i in range(shape.members)}
    if kind in NELI_KINDS:
        options, protocol = kafka_options(kind, shape)
        drawn = random.Random(seed ^ 0x4AF)
        return NeliWorld(options, protocol, members, seed, link or NELI_LINK, local_session_check=drawn.random() < 0.5,
                         prefetch=prefetch, skewed_walls=skewed_walls)
    lease: EtcdOptions | ZooKeeperOptions
    if kind == "etcd":
        e = lease = EtcdOptions(endpoints=("sim:2379",), ttl=shape.ttl)
        timing, session_ttl, characteristics = etcd.timing(e), float(e.lease_seconds), etcd.characteristics(e)
    elif kind == "zookeeper":
        z = lease = ZooKeeperOptions(hosts=("sim:2181",), session_timeout=shape.ttl)
        timing, session_ttl = zookeeper.timing(z), zookeeper.SESSION_FACTOR * z.session_timeout
        characteristics = zookeeper.characteristics(z)
    else:
        raise ValueError(f"no lease simulation of {kind!r} (one of {', '.join(KINDS)})")
    if trust_store_expiry:
        timing = replace(timing, silence_takeover=False)
    store = SimStore(kind, session_ttl, renewal_checks=renewal_checks, ephemeral_roles=trust_store_expiry)
    return LeaseWorld(store, lease, timing, characteristics, members, seed, link)


@cache
def raft_options(shape: ChaosShape, member: str = "n0") -> Any:
    """The options of `raft://` member `member` of the shape's group (`members` nodes n0.., a partition per role) at
    an election timeout of `ttl`, from the URL a real member is given (its ports numbered, not taken); a node past
    the first `members` joins through n0. Made once per shape, member and process."""
    first = [f"n{i}" for i in range(shape.members)]
    if member in first:
        return raft_runner.member_options("raft", raft_runner.RaftShape(shape.members, shape.roles, 1), shape.ttl,
                                          member)
    o = raft_options(shape, "n0")
    return replace(o, listen=f"127.0.0.1:{int(member[1:]) + 1}", peers=(), join=(f"n0@{o.listen}",))


def raft_world(seed: int, shape: ChaosShape = ChaosShape(), *, resume: bool = True) -> Simulation:
    """A `raft://` group of the shape, its nodes the real electors (`resume`: `raft_priority.renewals.Renewals`),
    started as `raft://` nodes start (the cluster group, partitions following its configuration)."""
    from raft_priority.elector import raft_config
    from raft_priority.membership import Layout

    o = raft_options(shape)
    names = [f"n{i}" for i in range(shape.members)]
    return Simulation([], raft_config(o), seed, RAFT_NETWORK, nodes=names, start_jitter=0.3, ack_delay=o.acks_after,
                      electors=True, resume=resume, membership=Layout(shape.roles, o.replication, o.strategy),
                      member_options=partial(raft_options, shape))


def clock_bound(kind: str, shape: ChaosShape) -> float:
    """The clock-rate difference a member of `kind` tolerates at the shape's TTL (`Characteristics.max_drift`); NELI
    full above its exclusivity bound states none (its overlap bound rests on wall clocks too): the harness's own
    `drift` rate stands in (`Drift.rate`, inside every bound stated here)."""
    if kind in NELI_KINDS:
        bound = kafka_options(kind, shape)[0].max_drift
        return 1 / Drift.rate - 1 if bound is None else bound
    if kind == "etcd":
        return EtcdOptions(endpoints=("sim:2379",), ttl=shape.ttl).max_drift
    if kind == "zookeeper":
        return ZooKeeperOptions(hosts=("sim:2181",), session_timeout=shape.ttl).max_drift
    return float(raft_options(shape).max_drift)


def drift_rate(rng: random.Random, bound: float) -> float:
    """A drifting clock's rate: (1 + bound) ** x, x within +-1/2 (half the time at either end), so any two clocks'
    rates stay within `bound` however drifts overlap."""
    x = rng.choice((-0.5, 0.5)) if rng.random() < 0.5 else rng.uniform(-0.5, 0.5)
    return float((1 + bound) ** x)


def leaderless_bound(kind: str, shape: ChaosShape) -> float:
    """How long after the heal a role may stay unled. Leases: members restarted at the heal open sessions, and a
    role whose holder died is taken once its silence was timed (a TTL), plus the renewal that shows it (slack of a
    TTL for the store's own session lapses and retries). NELI: the dead members' sessions expire (a session
    timeout), the group moves their partitions (a cooperative move takes two rounds, each member joining within a
    group heartbeat), and the new owner waits out the old owner's claims (the heartbeat timeout or T)."""
    if kind in NELI_KINDS:
        return 3 * shape.ttl + kafka_options(kind, shape)[0].timeout
    return 3 * shape.ttl  # Raft: a restarted node's first election timeout, its election and a decay round


def promise(kind: str, shape: ChaosShape) -> float:
    """The longest two members may lead one role together: 0 for every exclusive method; for NELI full above its
    exclusivity bound T plus one heartbeat interval (`KafkaElector.characteristics.max_overlap`), judged per pair
    (`elect_bench.judging.checker.check`)."""
    if kind in NELI_KINDS:
        return kafka_options(kind, shape)[0].characteristics().max_overlap or 0.0
    return 0.0  # leases and Raft are exclusive


@dataclass
class Run:
    """One seed's schedule of faults, carried out: the world as it ended, the faults struck, when all was healed."""

    world: World
    faults: list[FaultRecord]
    healed_at: float

    def history(self) -> History:
        return History(lines_of(self.world.history), self.faults, start=0.0, end=self.world.now)


def chaos(kind: str, seed: int, shape: ChaosShape = ChaosShape(), link: ServerLink | None = None, *,
          renewal_checks: bool = True, trust_store_expiry: bool = False, prefetch: bool = True,
          resume: bool = True, drift: float | None = None, skewed_walls: bool = False) -> Outcome:
    """One seed's schedule of faults against a group of `kind`, judged. To show what the design prevents:
    `renewal_checks=False`, a ZooKeeper store whose renewals do not check the member's role nodes (what
    `cas_lease.zookeeper` relies on); `trust_store_expiry=True`, the design before silence timing (role keys on the
    holder's etcd lease or ephemeral ZooKeeper nodes, the core trusting the store to free a dead holder's roles:
    `Timing.silence_takeover=False`), which the soaks of 2026-11-23 broke when a frozen etcd or ZooKeeper leader woke;
    `prefetch=False`, NELI members that read a fetch answer as it arrives (`NeliWorld`), the model that found
    kafka-full's stale own record; `resume=False`, Raft nodes that leave the lapsed roles of a group they still lead
    unled (`raft_priority.renewals`), the design a soak found leaving roles leaderless for minutes; `drift`, clocks
    whose rates differ by up to that much (instead of the bound the method states; 0: every clock true, and a lease or
    NELI seed's history as before clocks were simulated); `skewed_walls`, NELI members whose wall clocks drift with
    their monotonic ones (the harness's libfaketime) instead of staying true as NTP keeps them."""
    if kind == "raft-members":
        done = raft_members_strike(seed, shape, resume=resume, drift=drift)
    elif kind in RAFT_KINDS:
        done = raft_strike(seed, shape, resume=resume, drift=drift)
    else:
        done = strike(kind, seed, shape, link, renewal_checks=renewal_checks, trust_store_expiry=trust_store_expiry,
                      prefetch=prefetch, drift=drift, skewed_walls=skewed_walls)
    history = done.history()
    bound = promise(kind, shape)
    found = check(history, exclusive=not bound, max_overlap=bound or None,
                  leaderless_bound=leaderless_bound(kind, shape), healed_at=done.healed_at, budget=shape.ttl)
    return Outcome(kind, seed, tuple(found), tuple(done.faults), done.world.events_processed, len(history.lines))


def strike(kind: str, seed: int, shape: ChaosShape = ChaosShape(), link: ServerLink | None = None, *,
           renewal_checks: bool = True, trust_store_expiry: bool = False, prefetch: bool = True,
           drift: float | None = None, skewed_walls: bool = False) -> Run:
    """The seed's schedule of faults against a group of `kind` (see `chaos`), run to its end, not judged; beside
    it `shape.drifts` clocks at another rate for a while (`drift_rate` within `clock_bound`, or `drift`), drawn
    from a stream of their own, so the other faults fall as the seed drew them before clocks were simulated."""
    world = build(kind, seed, shape, link, renewal_checks=renewal_checks, trust_store_expiry=trust_store_expiry,
                  prefetch=prefetch, skewed_walls=skewed_walls)
    ttl = shape.ttl
    bound = clock_bound(kind, shape) if drift is None else drift

    def down(end: Callable[[str], None]) -> Move:
        def move(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
            world.at(t + rng.uniform(0.05, 3 * ttl), partial(world.restart, victim))  # as a supervisor would
            return partial(end, victim)
        return move

    def cut(victim: str, t: float, rng: random.Random) -> Callable[[], None]:  # then its heal
        world.at(t + rng.uniform(0.1, 3 * ttl), partial(world.heal, victim))
        return partial(world.cut, victim)

    def skew(victim: str, t: float, rng: random.Random) -> Callable[[], None]:  # then the true rate again
        rate = drift_rate(rng, bound)
        world.at(t + rng.uniform(0.1, 3 * ttl), partial(world.set_rate, victim, 1.0))
        return partial(world.set_rate, victim, rate)

    moves: Moves = {
        Kill: down(world.kill), Stop: down(world.stop),
        Pause: lambda victim, t, rng: partial(world.pause, victim, rng.uniform(0.1, 3 * ttl)),
        Cut: cut, Drift: skew,
        InfraPause: lambda victim, t, rng: partial(world.freeze_store, rng.uniform(0.1, shape.longest_freeze * ttl)),
    }

    drifts = shape.drifts if bound > 0 else 0
    return _nemesis(world, list(world.members), kind, seed, shape, FAULTS, moves, (drifts, (Drift,), seed ^ 0xD21F7))


def raft_strike(seed: int, shape: ChaosShape = ChaosShape(), *, resume: bool = True, drift: float | None = None) -> Run:
    """The seed's schedule of faults against a `raft://` group (see `chaos`), run to its end, not judged. A stop is
    graceful (every led partition handed on first, within the member's `handover` bound); a cut is one way or both;
    a drift runs the victim's clock at a rate of (1 + max_drift) ** x for a while, x within +-1/2 (half the time at
    either end), so any two clocks' rates stay within the stated bound however drifts overlap (`drift`: another
    bound than the stated one, to show what the stated one is for)."""
    sim = raft_world(seed, shape, resume=resume)
    options = raft_options(shape)
    handover, max_drift = float(options.handover), float(options.max_drift if drift is None else drift)
    names = list(sim.nodes)
    ttl = shape.ttl

    def down(end: Callable[[str], None]) -> Move:
        def move(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
            sim.at(t + rng.uniform(0.05, 3 * ttl), partial(sim.restart, victim))  # as a supervisor would
            return partial(end, victim)
        return move

    def skew(victim: str, t: float, rng: random.Random) -> Callable[[], None]:  # then the true rate again
        rate = drift_rate(rng, max_drift)
        sim.at(t + rng.uniform(0.1, 3 * ttl), partial(sim.set_rate, victim, 1.0))
        return partial(sim.set_rate, victim, rate)

    def cut(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
        others = [n for n in names if n != victim]
        way = rng.randrange(3)  # both ways, or only what the victim sends, or only what it hears
        sim.at(t + rng.uniform(0.1, 3 * ttl), partial(sim.heal, victim))
        return partial(sim.cut, [victim] if way < 2 else others, others if way < 2 else [victim], way == 0)

    moves: Moves = {
        Kill: down(sim.crash), Stop: down(lambda victim: sim.stop(victim, handover)),
        Pause: lambda victim, t, rng: partial(sim.pause, victim, rng.uniform(0.1, 3 * ttl)),
        Drift: skew, Cut: cut,
    }

    return _nemesis(sim, names, "raft", seed, shape, RAFT_FAULTS, moves)


def raft_members_world(seed: int, shape: ChaosShape = ChaosShape(), *, resume: bool = True) -> Simulation:
    """A `raft://` cluster of the shape (`raft_world`), into which nodes can join and from which they can be removed
    while it runs."""
    return raft_world(seed, shape, resume=resume)


def raft_members_strike(seed: int, shape: ChaosShape = ChaosShape(), *, resume: bool = True,
                        drift: float | None = None) -> Run:
    """`raft_strike`'s faults, and membership changes among them: `add` (a new node joins, asking until it is a
    voter), `remove` (a voter drawn at the strike is removed), `replace`
    (a new node joins; the drawn voter is removed a little later), within `MOST_VOTERS` and `FEWEST_VOTERS`. A
    removed node runs on (it learns it is out and
    stays quiet) until the nemesis kills it or the heal restarts it; its victims are drawn among the nodes there are
    at the strike."""
    sim = raft_members_world(seed, shape, resume=resume)
    options = raft_options(shape)
    handover, max_drift = float(options.handover), float(options.max_drift if drift is None else drift)
    names = list(sim.nodes)
    ttl = shape.ttl
    at_strike = random.Random(seed ^ 0x3E3B)  # choices made when a fault strikes, in the order they strike
    joined = [0]
    struck: dict[str, str] = {}  # drawn victim -> whom the fault that just struck chose (`_anyone`)

    def pick_for(drawn: str) -> str:
        who = _anyone(sim, at_strike, drawn)
        struck["last"] = who
        return who

    def named(drawn: str) -> str:
        return struck.pop("last", drawn)

    def fresh() -> str:
        joined[0] += 1
        name = f"j{joined[0]}"
        names.append(name)
        return name

    def now_voter() -> str | None:
        voters = sim.voters()
        return at_strike.choice(voters) if len(voters) > FEWEST_VOTERS else None

    def strike_change(fault: type[Fault], t: float, rng: random.Random) -> Callable[[], None]:
        later = rng.uniform(0.5, 2 * ttl)

        def go() -> None:
            if fault is Remove:
                victim = now_voter()
                if victim is not None:
                    struck["last"] = victim
                    sim.remove(victim)
                return
            if len(sim.voters()) >= MOST_VOTERS:
                return
            struck["last"] = fresh()
            sim.join(struck["last"])
            if fault is Replace:
                def then() -> None:
                    victim = now_voter()
                    if victim is not None:
                        sim.remove(victim)
                sim.at(sim.now + later, then)

        return go

    def down(fault: type[Fault]) -> Move:  # then a start, as a supervisor would
        def move(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
            back = rng.uniform(0.05, 3 * ttl)

            def strike() -> None:
                who = pick_for(victim)
                sim.at(sim.now + back, partial(sim.restart, who))
                if fault is Kill:
                    sim.crash(who)
                else:
                    sim.stop(who, handover)
            return strike
        return move

    def pause(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
        length = rng.uniform(0.1, 3 * ttl)
        return lambda: sim.pause(pick_for(victim), length)

    def skew(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
        rate, length = drift_rate(rng, max_drift), rng.uniform(0.1, 3 * ttl)

        def strike() -> None:
            who = pick_for(victim)
            sim.at(sim.now + length, partial(sim.set_rate, who, 1.0))
            sim.set_rate(who, rate)
        return strike

    def cut(victim: str, t: float, rng: random.Random) -> Callable[[], None]:
        way, length = rng.randrange(3), rng.uniform(0.1, 3 * ttl)

        def strike() -> None:
            who = pick_for(victim)
            others = [n for n in sim.nodes if n != who]
            sim.at(sim.now + length, partial(sim.heal, who))
            sim.cut([who] if way < 2 else others, others if way < 2 else [who], way == 0)
        return strike

    def change(fault: type[Fault]) -> Move:
        return lambda victim, t, rng: strike_change(fault, t, rng)

    moves: Moves = {Kill: down(Kill), Stop: down(Stop), Pause: pause, Drift: skew, Cut: cut,
                    Add: change(Add), Remove: change(Remove), Replace: change(Replace)}

    return _nemesis(sim, names, "raft-members", seed, shape, MEMBERSHIP_FAULTS, moves, named=named)


def _anyone(sim: Simulation, rng: random.Random, drawn: str, *_: object) -> str:
    """The victim of a fault to one node, among the nodes there are when it strikes (`drawn` if it still votes)."""
    voters = sim.voters()
    return drawn if drawn in voters or not voters else rng.choice(voters)


Move = Callable[[str, float, random.Random], Callable[[], None]]
"""What a nemesis does for one drawn fault of a kind: `move(victim, t, rng)` schedules what follows it (a restart,
a heal) and returns what strikes at `t`."""
Moves = Mapping[type[Fault], Move]
"""A simulated world's move for each fault kind it can strike: a kind without one is refused before the run."""


Beside = tuple[int, tuple[type[Fault], ...], int]
"""Faults drawn beside a nemesis's own, from a stream of their own: (how many, of which kinds, the stream's seed)."""


def _nemesis(world: World, names: list[str], kind: str, seed: int, shape: ChaosShape, kinds: tuple[type[Fault], ...],
             moves: Moves, beside: Beside = (0, (), 0), named: Callable[[str], str] | None = None) -> Run:
    """`shape.faults` faults drawn from `kinds` (each at a drawn time, on a drawn member, carried out by its move),
    and those drawn `beside` them, then everything healed (links, server, every member up) three TTLs after the
    last could strike, and the group left to recover for four times its bound. `named(drawn)`: whom a fault that
    just struck really struck, where `act` chooses its victim as it strikes."""
    unsimulated = [f.name for f in (*kinds, *beside[1]) if f not in moves]
    if unsimulated:
        raise ValueError(f"the {kind} simulation has no move for {', '.join(unsimulated)}")
    faults: list[FaultRecord] = []

    def hit(fault: type[Fault], victim: str, strike: Callable[[], None]) -> None:
        strike()
        faults.append(FaultRecord(world.now, fault.name, named(victim) if named is not None else victim))

    for count, drawn_from, stream in ((shape.faults, kinds, seed ^ 0x1EA5E), beside):
        rng = random.Random(stream)
        for _ in range(count):
            t = rng.uniform(0.5, shape.duration)
            fault, victim = rng.choice(drawn_from), rng.choice(names)
            world.at(t, partial(hit, fault, victim, moves[fault](victim, t, rng)))
    healed_at = shape.duration + 3 * shape.ttl

    def heal_all() -> None:
        world.heal()
        for name in names:
            world.restart(name)

    world.at(healed_at, heal_all)
    world.run_until(healed_at + 4 * leaderless_bound(kind, shape))
    return Run(world, faults, healed_at)


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


def replay(kind: str, seed: int, shape: ChaosShape = ChaosShape(), *, renewal_checks: bool = True,
           trust_store_expiry: bool = False, drift: float | None = None) -> Outcome:
    """`chaos(kind, seed, shape, ...)` exactly as `elect bench sim-lease` ran it (in a process with fixed string
    hashing: this one if it has it, else a fresh one)."""
    run = partial(chaos, kind, seed, shape, renewal_checks=renewal_checks, trust_store_expiry=trust_store_expiry,
                  drift=drift)
    if hashed_alike():
        return run()
    with replay_pool(1) as pool:
        return pool.submit(run).result()
