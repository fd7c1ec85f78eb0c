"""`elect soak METHOD --duration 30m --faults kill,stop,pause,cut --seed N`: a nemesis soak.

`--rounds N` instead of (or besides) a duration: the schedule is dealt in rounds, each striking once with every
named kind in a seeded order, so N rounds give exactly N strikes of each kind.

One group of real members (3 by default, 6 roles) is struck again and again for the duration by a seeded
random schedule of the named faults, recovering between them (a killed or stopped member comes back with the
same id and data). Leaders write to a store that checks their fencing tokens (`--workload fenced`; `unfenced`
accepts every write, to show what overlap costs an application that does not fence; `none`). A live line shows
faults so far by kind and violations so far; the report (soak.md, soak.json) has counts per fault kind, the
failover distribution per kind, total overlap, stale and lost writes, every violation with the event lines
that show it, and the seed that replays the schedule; the members' own logs go to OUT/logs. Ctrl-C or SIGTERM
stops the striking and still writes the report of what was seen. Exit status 1 if anything was violated or left
unrecovered, or the soak stopped early.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from elect.errors import ConfigError
from elect_cli import bench
from elect_cluster.local import BROKERS

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def register(sub: Any) -> None:
    p = sub.add_parser("soak", help="strike one group with a long seeded random schedule of faults",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("method", help="a bench method (see `elect bench --help`), e.g. raft, etcd, kafka-fast")
    p.add_argument("--duration", default=None, type=duration,
                   help="how long to strike: 90s, 30m, 2h (default 5m, or no limit with --rounds)")
    p.add_argument("--rounds", type=int, default=0,
                   help="stop after N rounds; a round strikes once with each kind, so each kind gets N strikes")
    p.add_argument("--faults", default="kill,stop,pause", help="comma-separated fault kinds to draw from")
    p.add_argument("--seed", type=int, default=1, help="the schedule's seed (the same seed replays it)")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--roles", type=int, default=6)
    p.add_argument("--budget", type=float, default=1.0, help="detection budget in seconds")
    p.add_argument("--hold", type=float, default=0.0, help="fault length in seconds (default 3 x budget)")
    p.add_argument("--workload", choices=("fenced", "unfenced", "none"), default=None,
                   help="leaders write to a store checking tokens (default fenced; none for an anchor)")
    p.add_argument("--store-members", type=int, choices=(1, 3), default=None,
                   help="etcd members / ZooKeeper nodes (default 3 when infra faults are drawn, else 1)")
    p.add_argument("--broker", choices=BROKERS, default="apache")
    p.add_argument("--out", type=Path, default=Path("results/soak"), help="where soak.md and soak.json go")
    p.set_defaults(run=run)


def duration(text: str) -> float:
    """Seconds from `90`, `90s`, `30m` or `2h`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 30m, 2h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def run(args: argparse.Namespace) -> int:
    from elect_bench import soak, suite
    from elect_bench.faults import fault
    from elect_bench.methods import METHODS
    from elect_bench.scenario import Scenario

    bench.exit_cleanly_on(*bench.TERMINATING)
    if args.method not in METHODS:
        raise ConfigError(f"unknown method {args.method!r}; known: {', '.join(METHODS)}", parameter="method")
    kinds = tuple(fault(name) for name in args.faults.split(",") if name.strip())
    if not kinds:
        raise ConfigError("name at least one fault kind", parameter="faults")
    from elect_bench.faults import MembershipFault

    if args.method != "raft" and (changes := [k.name for k in kinds if isinstance(k, MembershipFault)]):
        raise ConfigError(f"{', '.join(changes)}: membership changes are raft://'s (its members are configured; "
                          "the other methods' members come and go as they start and stop)", parameter="faults")
    infra = any(k.infrastructure for k in kinds)
    if infra and not METHODS[args.method].needs:
        raise ConfigError(f"{args.method} has no infrastructure to fault; drop infra faults", parameter="faults")
    store_members = args.store_members or (3 if infra else 1)
    method = METHODS[args.method]
    workload = args.workload or ("none" if method.anchor else "fenced")
    if method.anchor and workload != "none":
        raise ConfigError(f"{args.method} is an anchor: its adapter does not write; use --workload none",
                          parameter="workload")
    scenario = Scenario(name="soak", budget=args.budget, members=args.members, roles=args.roles, trials=1,
                        hold=args.hold, faults=kinds, methods=(args.method,), store_members=store_members,
                        broker=args.broker, brokers=3 if infra and args.broker.startswith("apache") else 1)
    if args.rounds < 0:
        raise ConfigError("--rounds must be 0 (no limit) or more", parameter="rounds")
    limit = args.duration if args.duration is not None else (math.inf if args.rounds else 300.0)
    spec = soak.SoakSpec(METHODS[args.method], kinds, limit, args.seed, args.budget, args.members,
                         args.roles, args.hold, workload, rounds=args.rounds)
    line = bench.live_line()
    with tempfile.TemporaryDirectory(prefix="elect-soak-") as tmp, \
            suite.environment(scenario, Path(tmp)) as env:
        result = soak.run(spec, env, lambda status: line(f"soak {args.method}: {status}"), command=bench._command(),
                          keep_logs=args.out / "logs")
    print(file=sys.stderr)
    data, report = soak.write(result, args.out)
    print(soak.markdown(result))
    print(f"wrote {data}, {report}")
    return 0 if result.ok else 1
