"""Idle cost of raft:// at scale: N member processes x P partitions on loopback, CPU per node at rest.

    python -m elect_bench.raft_idle --nodes 3 --partitions 1000 --window 30

Every node contends for every role 0..P-1 (one role per partition), so it also renews the leases of the
roles it leads. After every role has a leader and the group has been quiet for a while, the CPU time
(user + system, from /proc) each process uses over ``--window`` seconds is reported as a share of one
core, with the messages and batches it sent (the target: < 10% of one core per node at 3 x 1000).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elect_bench.members import MemberProcess
from elect_bench.methods import METHODS
from elect_bench.methods import Group as MethodGroup
from elect_cluster.waiting import wait_until


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run(nodes: int, partitions: int, window: float, method: str, workdir: Path,
        progress: Any = print, with_roles: bool = True) -> dict[str, Any]:
    ids = [f"n{i}" for i in range(nodes)]
    urls = METHODS[method].member_urls(MethodGroup(ids, partitions, "idle"), 1.0,
                                       {"data_dir": str(workdir / "state"), "partitions": str(partitions)})
    extra = ["--role-count", str(partitions)] if with_roles else []
    procs = [MemberProcess(urls[i], i, [], log_dir=workdir, extra_args=extra) for i in ids]
    began = time.monotonic()
    try:
        for p in procs:
            p.start()
        roles = [str(r) for r in range(partitions)]

        def all_led() -> bool:
            held: set[str] = set()
            for p in procs:
                held |= p.log.leading()
            return len(held) == len(roles)

        if with_roles:
            wait_until(all_led, 120, interval=0.2, what="a leader for every partition")
        else:
            time.sleep(5)  # nothing to observe without roles: give the elections time
        led_at = time.monotonic() - began
        progress(f"every partition led after {led_at:.1f} s; waiting for quiet")

        def quiet() -> bool:
            last = max((p.log.lines[-1]["mono"] for p in procs if p.log.lines), default=0.0)
            return time.monotonic() - last > 3.0

        wait_until(quiet, 120, interval=0.2, what="no leadership change for 3 s")
        before = {p.member_id: cpu_seconds(p.pid) for p in procs}
        lines_before = sum(len(p.log.lines) for p in procs)
        t0 = time.monotonic()
        progress(f"measuring for {window:g} s")
        time.sleep(window)  # the measurement window itself, not a wait for a condition
        elapsed = time.monotonic() - t0
        share = {p.member_id: (cpu_seconds(p.pid) - before[p.member_id]) / elapsed for p in procs}
        counts = {p.member_id: len(p.log.leading()) for p in procs}
        changes = sum(len(p.log.lines) for p in procs) - lines_before
        return {"method": method, "nodes": nodes, "partitions": partitions, "window_s": round(elapsed, 2),
                "all_led_after_s": round(led_at, 2),
                "cpu_share_of_one_core": {k: round(v, 4) for k, v in share.items()},
                "max_cpu_share": round(max(share.values()), 4), "leaders_per_node": counts,
                "rss_mb": {p.member_id: round(rss_mb(p.pid), 1) for p in procs},
                "leadership_changes_during_window": changes}
    finally:
        for p in procs:
            p.kill()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--method", default="raft", help="raft, raft-zeebe or raft-stock (elect_bench/methods.py)")
    ap.add_argument("--no-roles", action="store_true",
                    help="members contend for no role (isolates the cost of renewing role deadlines)")
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="elect-raft-idle-") as tmp:
        result = run(args.nodes, args.partitions, args.window, args.method, Path(tmp),
                     progress=lambda m: print(f"raft_idle: {m}", file=sys.stderr, flush=True),
                     with_roles=not args.no_roles)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
