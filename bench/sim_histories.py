"""A digest of every seed's simulated history, to show that a change to the simulator, a core or an elector
leaves the histories as they were (or to find the first seed where it does not).

Each seed's schedule of faults is run as `elect bench sim-lease`, `sim-neli` and `sim-raft` run it
(`elect_bench.simulation.seeded_chaos`), and its history (every member's event lines and the faults struck) is
hashed. Strings are hashed with a fixed seed, as the chaos runs need (`seeded_chaos.HASH_SEED`).

    python3 bench/sim_histories.py --out /tmp/after.json                  # 40 seeds of each kind, this checkout
    git worktree add /tmp/before COMMIT                                   # the code to compare with
    PYTHONPATH=/tmp/before python3 bench/sim_histories.py --out /tmp/before.json
    python3 bench/sim_histories.py --compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

KINDS = ("etcd", "zookeeper", "kafka-fast", "kafka-full", "kafka-fast-848", "kafka-full-848", "raft",
         "raft-members")


def digests(kinds: list[str], seeds: range, faults: int) -> dict[str, str]:
    from elect_bench.simulation import seeded_chaos as sc

    named = "ChaosShape" if hasattr(sc, "ChaosShape") else "Shape"  # its name until 2026-12-04, for older code
    shape = getattr(sc, named)(faults=faults)
    out = {}
    for kind in kinds:
        for seed in seeds:
            if kind == "raft-members":
                run = sc.raft_members_strike(seed, shape)
            elif kind in sc.RAFT_KINDS:
                run = sc.raft_strike(seed, shape)
            else:
                run = sc.strike(kind, seed, shape)
            history = run.history()
            text = json.dumps([history.lines, [f.__dict__ for f in history.faults]], sort_keys=True, default=str)
            out[f"{kind}/{seed}"] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--seeds", type=int, default=40)
    p.add_argument("--faults", type=int, default=8, help="faults per seed (the chaos runs' default is 5)")
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args()
    if args.compare:
        before, after = (json.loads(f.read_text()) for f in args.compare)
        differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        print(f"{len(before.keys() & after.keys())} seeds in both, {len(differ)} differ"
              + (f": {', '.join(differ[:20])}" if differ else ""))
        return 1 if differ else 0
    from elect_bench.simulation.seeded_chaos import HASH_SEED

    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:  # string hashing must be as the runs': start again with it
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.argv])
    found = digests(args.kinds.split(","), range(args.seeds), args.faults)
    text = json.dumps(found, indent=0, sort_keys=True)
    if args.out:
        args.out.write_text(text)
        print(f"{len(found)} histories -> {args.out}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
