"""kubernetes:// in a crowded namespace: N Leases of another group (written as elect writes its role Leases) are
made first, then rounds of M `elect member` processes of a new group with R roles start in the same namespace;
each round prints when every role was led, when every member had started and the group came to rest, and the
leaderships that ended in S seconds at rest. Run it with two versions of the code (PYTHONPATH) to see what the
other group's Leases cost a member.

    python3 bench/bare/kube_crowded.py --others 18000 --members 12 --roles 6 --rest 30 --rounds 2
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cas_lease.kube_api import Client, leases, resolve
from elect.config import spec_from_url
from elect_bench.members import MemberProcess, settle
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until


def _crowd(url: str, others: int, threads: int = 4) -> float:
    """Make `others` role Leases of a group named `other`; the seconds it took."""
    clients = [Client(resolve(spec_from_url(url, member="crowd").options)) for _ in range(threads)]
    began = time.monotonic()

    def make(t: int) -> None:
        for i in range(t, others, threads):
            body = {"metadata": {"name": f"other-{i}", "labels": {"elect.io/group": "other", "elect.io/kind": "role"},
                                 "annotations": {"elect.io/role": json.dumps(str(i))}},
                    "spec": {"holderIdentity": "gone", "leaseDurationSeconds": 240}}
            status, answer = clients[t].request("POST", leases("default"), body, 30)
            assert status == 201, answer

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(make, range(threads)))
    return time.monotonic() - began


def _all_led(procs: list[MemberProcess], roles: int) -> bool:
    return len(set().union(*(p.log.leading() for p in procs))) == roles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--others", type=int, default=18000, help="Leases of another group in the namespace")
    parser.add_argument("--members", type=int, default=12)
    parser.add_argument("--roles", type=int, default=6)
    parser.add_argument("--rest", type=float, default=30.0, help="seconds at rest per round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kube-crowded-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", services=("kubernetes",)) as cluster:
        if args.others:
            took = _crowd(cluster.endpoints.urls()["kubernetes"], args.others)
            print(f"{args.others} Leases of another group made in {took:.1f} s")
        roles = [str(r) for r in range(args.roles)]
        for r in range(args.rounds):
            url = cluster.endpoints.urls(f"crowded-{uuid.uuid4().hex[:6]}")["kubernetes"]
            procs = [MemberProcess(url, f"m{i}", roles, log_dir=Path(tmp) / f"round-{r}") for i in range(args.members)]
            began = time.monotonic()
            try:
                for p in procs:
                    p.start()
                wait_until(functools.partial(_all_led, procs, len(roles)), 120, what="every role led")
                led = time.monotonic() - began
                settle(procs, quiet=1.5, limit=120, all_started=True)
                rested = time.monotonic() - began
                ended = sum(p.log.ended for p in procs)
                time.sleep(args.rest)  # the window at rest itself, not a wait for a condition
                ended = sum(p.log.ended for p in procs) - ended
                per_hour = ended / len(procs) / (args.rest / 3600)
                print(f"round {r}: every role led after {led:.2f} s, at rest after {rested:.2f} s; "
                      f"{ended} leaderships ended in {args.rest:g} s at rest ({per_hour:.0f} per member-hour)")
            finally:
                for p in procs:
                    p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
