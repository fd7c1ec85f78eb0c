"""A kill of a leader in a quiet simulated group, as the failover tests of the lease and NELI worlds make it."""

from __future__ import annotations

from elect_bench.judging.history import FaultRecord, History
from elect_bench.judging.measures import Failover, failovers
from elect_bench.simulation.recorded import lines_of
from elect_bench.simulation.seeded_chaos import ChaosShape, build


def kill_a_leader(kind: str, seed: int = 3) -> tuple[list[Failover], int]:
    """A group of `kind` runs 3 s without faults, the leader of role "0" is killed, and the group runs 8 s more: the
    failovers of the killed member's roles, and how many roles it led."""
    world = build(kind, seed, ChaosShape(faults=0))
    world.run_until(3.0)
    led = world.leaders()
    victim = led["0"][0]
    fault = FaultRecord(world.now, "kill", victim)
    world.kill(victim)
    world.run_until(world.now + 8.0)
    history = History(lines_of(world.history), [fault], start=0.0, end=world.now)
    return failovers(history, fault), sum(victim in names for names in led.values())
