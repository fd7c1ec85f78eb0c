"""Where a simulated trial's time goes: CPU seconds, events and messages by type in each phase of one trial.

The 1000-trial run (docs/results/sim-1000) is bounded by the work per trial. This runs the trials the run runs
(`elect_bench.simulation.experiments.trial`, the `raft` method's configuration from its URL) and reports each
phase: the cold start until every group is led, the quiet stretch until the observation at 3 election timeouts,
and the crash of one node until its groups are led again (+ 0.5 ET). CPU is this process's own
(`time.process_time`), so other work on the machine inflates it only through shared caches and cores.

    python3 bench/sim_phases.py                      # 100 nodes x 10,000 partitions, RF 3, seeds 0-2
    python3 bench/sim_phases.py --nodes 10 --partitions 100 --seeds 5
"""

from __future__ import annotations

import argparse
import gc
import time
from collections import Counter

from elect_bench.simulation import experiments
from elect_bench.simulation.raft_runner import RaftShape, acks_after, core_config
from elect_bench.simulation.raft_world import Simulation

PHASES = {"all led": "cold start to every group led", "observed": "quiet until 3 ET",
          "re-led": "crash to re-led, + 0.5 ET"}


class Phases:
    """`trial`'s `mark`: prints each phase of one seed as it ends."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.last = (0.0, 0, 0.0)  # CPU, events, simulated time at the end of the phase before
        self.first_cpu: float | None = None

    def __call__(self, name: str, sim: Simulation) -> None:
        now = (time.process_time(), sim.events_processed, sim.now)
        if self.first_cpu is None:
            self.first_cpu = now[0]
        else:
            kinds = ", ".join(f"{k} {v:,}" for k, v in (sim.census or Counter()).most_common(6))
            print(f"seed {self.seed} | {PHASES[name]}: {now[0] - self.last[0]:.2f} s CPU, "
                  f"{now[2] - self.last[2]:.2f} simulated s, {now[1] - self.last[1]:,} events, messages: {kinds}")
        sim.census = Counter()
        self.last = now


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--replication", type=int, default=3)
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args()
    shape = RaftShape(args.nodes, args.partitions, args.seeds, args.replication)
    config, strategy = core_config("raft", shape, 1.0)
    delay = acks_after("raft", shape, 1.0)
    gc.disable()  # as the run's workers do (elect_bench.simulation.raft_runner._trial)
    for seed in range(args.seeds):
        phases = Phases(seed)
        experiments.trial(args.nodes, args.partitions, args.replication, config, seed, strategy=strategy,
                          ack_delay=delay, mark=phases)
        print(f"seed {seed} | trial: {phases.last[0] - (phases.first_cpu or 0.0):.2f} s CPU after the build")


if __name__ == "__main__":
    main()
