"""Run the raft:// membership scenarios (elect_bench/membership.py) and write results.json and report.md.

    python3 bench/raft_membership.py --out docs/results/raft-membership --trials 3
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from pathlib import Path

from elect_bench.membership import SCENARIOS, Outcome, run


def report(results: list[Outcome], trials: int) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    lines = [
        "# raft:// membership changes on real processes",
        "",
        f"`python3 bench/raft_membership.py --trials {trials}` on commit {commit}, {platform.node()}: "
        f"{os.cpu_count()} cores, nothing else running. D = 1 s (election_timeout), 12 roles over 12 partitions, "
        "every member an `elect member` process contending for every role, on loopback. Figures per trial, from "
        "the members' own event lines; *leaderless* is the longest span in which some role had no leader, from the "
        "first change to the end; *moved*: roles whose leader at the end is not the one before.",
        "",
        "| scenario | trial | longest leaderless (s) | overlaps | moved | leaders at the end | timings (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in results:
        leaders = " / ".join(f"{m} {n}" for m, n in sorted(o.leaders.items()))
        timings = ", ".join(f"{k} {v:g}" for k, v in o.seconds.items())
        lines.append(f"| {o.scenario} | {o.trial + 1} | {o.longest_leaderless:.3f} | {o.overlaps} | {o.moved} | "
                     f"{leaders} | {timings} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/raft-membership"))
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = run(args.out, args.trials, args.only.split(","), progress=lambda s: print(s, file=sys.stderr))
    (args.out / "report.md").write_text(report(results, args.trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
