"""Crash failover and leader distribution of raft:// (improved, plain ZEP006, stock) in real processes.

    python -m elect.bench.raft_failover --methods raft,raft-zeebe,raft-stock --trials 50 --nodes 3 --partitions 6
    python -m elect.bench.raft_failover --methods raft --trials 50 --nodes 5 --partitions 20
    python -m elect.bench.raft_failover --sim --trials 200      # the same measures in the simulator

Each trial starts a fresh cluster of ``--nodes`` `elect member` processes (every node contends for roles
0..P-1, one per partition; election timeout 1 s, heartbeat 100 ms), and measures:

* cold start: the most partitions one node leads when every partition first has a leader, and again
  once no leadership changed for 1.5 s (for `raft`, rebalancing may still act later: its hysteresis
  is 3 ET); *balanced* means max <= ceil(P / N) (ZEP006's successCount / totalCount);
* crash failover: SIGKILL of the node leading role 0 at a random phase of the heartbeat cycle, then per
  partition it led, the time until a survivor printed `acquired` (DESIGN.md's failover latency);
* after the crash: the most partitions one survivor leads once quiet; balanced means <= ceil(P/(N-1)).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from elect.bench.methods import METHODS
from elect.bench.methods import Group as MethodGroup
from elect.cluster.members import MemberProcess
from elect.cluster.waiting import WaitTimeout, wait_until

BUDGET = 1.0  # election timeout; heartbeat = budget / 10 (bench/methods.py)


def _leaders(procs: Sequence[MemberProcess], partitions: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {str(r): [] for r in range(partitions)}
    for p in procs:
        if p.alive:
            for r in p.log.leading():
                out.setdefault(r, []).append(p.member_id)
    return out


def _max_led(procs: Sequence[MemberProcess]) -> int:
    return max((len(p.log.leading()) for p in procs if p.alive), default=0)


def _quiet(procs: Sequence[MemberProcess], quiet: float, limit: float) -> None:
    def idle() -> bool:
        last = max((p.log.lines[-1]["mono"] for p in procs if p.log.lines), default=0.0)
        return time.monotonic() - last >= quiet

    wait_until(idle, limit, interval=0.05, what=f"no leadership change for {quiet:g} s")


def trial(method: str, nodes: int, partitions: int, workdir: Path, index: int, rng: random.Random) -> dict[str, Any]:
    ids = [f"n{i}" for i in range(nodes)]
    urls = METHODS[method].member_urls(MethodGroup(ids, partitions, f"{method}-{index}"), BUDGET,
                                       {"data_dir": str(workdir / f"state-{index}")})
    procs = [MemberProcess(urls[i], i, list(range(partitions)), log_dir=workdir / f"t{index}") for i in ids]
    res: dict[str, Any] = {"method": method, "trial": index}
    try:
        for p in procs:
            p.start()
        wait_until(lambda: all(len(v) == 1 for v in _leaders(procs, partitions).values()), 60, interval=0.02,
                   what="one leader per partition")
        res["start_max"] = _max_led(procs)
        _quiet(procs, 1.5, 30)
        res["steady_max"] = _max_led(procs)
        time.sleep(rng.random() * BUDGET / 10)  # a random phase of the heartbeat cycle
        victim = next(p for p in procs if "0" in p.log.leading())
        led = sorted(victim.log.leading())
        at = time.monotonic()
        victim.kill()
        survivors = [p for p in procs if p is not victim]

        def first_acquired(role: str) -> float | None:
            times = [x["mono"] for p in survivors for x in p.log.lines
                     if x["event"] == "acquired" and x["role"] == role and x["mono"] >= at]
            return min(times) if times else None

        with contextlib.suppress(WaitTimeout):  # what did not recover is reported as None
            wait_until(lambda: all(first_acquired(r) is not None for r in led), 30, interval=0.02,
                       what="survivors taking over")
        res["failover"] = [round(t - at, 4) if (t := first_acquired(r)) is not None else None for r in led]
        _quiet(survivors, 1.5, 30)
        res["after_max"] = _max_led(survivors)
    except Exception as exc:  # a failed trial is reported, not fatal
        res["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        for p in procs:
            p.kill()
    return res


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def summarize(rows: list[dict[str, Any]], nodes: int, partitions: int) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    fo = [t for r in ok for t in r["failover"] if t is not None]
    lost = sum(1 for r in ok for t in r["failover"] if t is None)
    b1, b2 = -(-partitions // nodes), -(-partitions // (nodes - 1))
    return {
        "trials": len(rows), "failed_trials": len(rows) - len(ok),
        "failover_samples": len(fo), "unrecovered": lost,
        "failover_p50": round(_pct(fo, 0.5), 3), "failover_p99": round(_pct(fo, 0.99), 3),
        "failover_max": round(max(fo), 3) if fo else math.nan,
        "failover_mean": round(statistics.fmean(fo), 3) if fo else math.nan,
        "cold_start_balanced_share": round(sum(r["start_max"] <= b1 for r in ok) / max(len(ok), 1), 3),
        "settled_balanced_share": round(sum(r["steady_max"] <= b1 for r in ok) / max(len(ok), 1), 3),
        "after_crash_balanced_share": round(sum(r["after_max"] <= b2 for r in ok) / max(len(ok), 1), 3),
        "bounds": {"ceil(P/N)": b1, "ceil(P/(N-1))": b2},
    }


def simulate(method: str, nodes: int, partitions: int, trials: int) -> dict[str, Any]:
    """The same measures on the deterministic simulator (the pure core; no processes)."""
    from raft_priority.config import RaftConfig
    from raft_priority.experiments import cold_start, crash_one
    from raft_priority.options import RaftOptions

    params = METHODS[method].params(BUDGET)
    opts = RaftOptions(listen="127.0.0.1:1", peers=tuple(f"p{i}@127.0.0.1:{i + 2}" for i in range(nodes - 1)),
                       partitions=partitions, election_timeout=BUDGET, heartbeat_interval=BUDGET / 10,
                       priority=params["priority"],  # type: ignore[arg-type]
                       improvements=params.get("improvements", "on") != "off")
    from raft_priority.elector import raft_config

    cfg: RaftConfig = raft_config(opts)
    strategy = opts.strategy
    starts = [cold_start(nodes, partitions, nodes, cfg, s, strategy=strategy) for s in range(trials)]
    crashes = [crash_one(nodes, partitions, nodes, cfg, s, strategy=strategy) for s in range(trials)]
    fo = [t for c in crashes for t in c.failover if t != math.inf]
    return {
        "trials": trials, "failover_samples": len(fo),
        "failover_p50": round(_pct(fo, 0.5), 3), "failover_p99": round(_pct(fo, 0.99), 3),
        "failover_max": round(max(fo), 3) if fo else math.nan,
        "cold_start_balanced_share": round(sum(s.balanced for s in starts) / trials, 3),
        "after_crash_balanced_share": round(sum(c.balanced for c in crashes) / trials, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default="raft,raft-zeebe,raft-stock")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--sim", action="store_true", help="run the simulator instead of processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write every trial and the summaries here")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    out: dict[str, Any] = {"nodes": args.nodes, "partitions": args.partitions, "election_timeout": BUDGET,
                           "heartbeat_interval": BUDGET / 10, "mode": "simulator" if args.sim else "processes",
                           "summary": {}, "trials": {}}
    for method in args.methods.split(","):
        if args.sim:
            out["summary"][method] = simulate(method, args.nodes, args.partitions, args.trials)
        else:
            rows = []
            with tempfile.TemporaryDirectory(prefix="elect-raft-failover-") as tmp:
                for i in range(args.trials):
                    rows.append(trial(method, args.nodes, args.partitions, Path(tmp), i, rng))
                    r = rows[-1]
                    print(f"raft_failover: {method} trial {i}: start_max={r.get('start_max')} "
                          f"failover={r.get('failover')} after_max={r.get('after_max')} {r.get('error', '')}",
                          file=sys.stderr, flush=True)
            out["trials"][method] = rows
            out["summary"][method] = summarize(rows, args.nodes, args.partitions)
        print(f"{method}: {json.dumps(out['summary'][method])}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
