"""Run the raft:// membership scenarios (elect_bench/membership.py) and write results.json and report.md.

    python3 bench/raft_membership.py --out docs/results/raft-membership --trials 3
    python3 bench/raft_membership.py --methods raft,jraft,ratis --only replace,replace-kill ...

raft:// runs every scenario; the anchors sofa-jraft (jraft) and Apache Ratis (ratis) run the replace scenarios,
their membership changed with their own operator API (elect_bench/membership.py, AnchorCluster).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path

from elect_bench.membership import RUNS, Outcome, run


def report(results: list[Outcome], command: str, load: tuple[float, float]) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    methods = sorted({o.method for o in results})
    lines = [
        "# Membership changes on real processes: raft://" + (" beside the Raft anchors" if len(methods) > 1 else ""),
        "",
        f"`{command}` on commit {commit}, {platform.node()}: {os.cpu_count()} cores, 1-minute load average "
        f"{load[0]:.1f} at the start and {load[1]:.1f} at the end. D = 1 s (election timeout), 12 roles over 12 "
        "partitions (one group each), every member contending for every role, on loopback. Figures per trial, from "
        "the members' own event lines; *leaderless* is the longest span in which some role had no leader, from the "
        "first change to the end; *moved*: roles whose leader at the end is not the one before; *handovers*: "
        "acquisitions from the first change to the end (each time a role changed hands; a replace-all needs at "
        "least one per role).",
        "",
        "raft:// members are `elect member` processes (the first three with `peers=`, the new ones with `join=`; "
        "one leaves with `--leave`, a killed one is removed with `elect raft remove`). An anchor's member is its "
        "adapter (bench/anchors), and its membership is changed as its operators change it: the new member is "
        "started, then `admin change-peers` (sofa-jraft's `CliService.changePeers`, Ratis' "
        "`admin().setConfiguration`, joint consensus in both) adds it to every group as the lowest priority; the "
        "old member is stopped with SIGTERM (the adapter hands each group it leads to its next-priority live peer) "
        "or SIGKILLed; then the same command removes it, giving the new member its priorities. The anchors end "
        "as they end: neither is waited on for balance.",
        "",
        "| method | scenario | trial | longest leaderless (s) | overlaps | moved | handovers | leaders at the end | "
        "timings (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in results:
        leaders = " / ".join(f"{m} {n}" for m, n in sorted(o.leaders.items()))
        timings = ", ".join(f"{k} {v:g}" for k, v in o.seconds.items())
        lines.append(f"| {o.method} | {o.scenario} | {o.trial + 1} | {o.longest_leaderless:.3f} | "
                     f"{o.overlaps}{f' ({o.overlap_seconds:.3f} s)' if o.overlaps else ''} | "
                     f"{o.moved} | {o.handovers} | {leaders} | {timings} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/raft-membership"))
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--methods", default="raft", help=f"comma-separated: {', '.join(RUNS)}")
    p.add_argument("--only", default="", help="comma-separated scenarios (default: every one each method runs): "
                   + "; ".join(f"{m}: {', '.join(names)}" for m, names in RUNS.items()))
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = [w for w in args.only.split(",") if w]
    which = [(m, n) for m in args.methods.split(",") for n in (wanted or RUNS.get(m, ()))]
    started = os.getloadavg()[0]
    results = run(args.out, args.trials, which, progress=lambda s: print(s, file=sys.stderr))
    command = "python3 bench/raft_membership.py " + " ".join(sys.argv[1:])
    (args.out / "report.md").write_text(report(results, command, (started, os.getloadavg()[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
