"""`elect demo`: the one-command tour.

Starts the embedded infrastructure (Kafka-protocol broker, etcd, ZooKeeper) on free loopback ports,
runs the short comparison in bench/demo.yaml (3 members, 6 roles, the leader of role 0 SIGKILLed,
3 trials per method, detection budget 1 s), prints the table, writes results/demo/ and tears
everything down. Flags are those of `elect bench`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from elect_cli import bench


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="the one-command tour: a short comparison on embedded infrastructure",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_arguments(p)
    p.set_defaults(run=run, out=Path("results/demo"))


def run(args: argparse.Namespace) -> int:
    print(__doc__.split("\n\n")[1].replace("\n", " ") + "\n")
    return bench.run(args, scenario_name="demo")
