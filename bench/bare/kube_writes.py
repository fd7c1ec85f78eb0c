"""How many Lease writes a second the API server takes here, with nothing else asking: N Leases created, then
each updated once on condition of its version (what a takeover of N roles is), from P processes at once, each
with its own connection (elect's client, `cas_lease.kube_api`). Beside `elect bench` at thousands of roles, it
says what the infrastructure itself allows: a survivor taking 2,000 roles over writes 2,000 Leases.

    python3 bench/bare/kube_writes.py --leases 2000 --processes 4
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from elect_cluster.local import LocalCluster

_WRITER = """
import sys, time
from elect.config import spec_from_url
from cas_lease.kube_api import Client, leases, resolve
client = Client(resolve(spec_from_url(sys.argv[1], member="m").options))
names = [f"{sys.argv[2]}-{i}" for i in range(int(sys.argv[3]))]
go = float(sys.argv[4])
while time.time() < go:
    time.sleep(0.001)
began = time.perf_counter()
made = []
for name in names:
    status, lease = client.request("POST", leases("default"), {"metadata": {"name": name}, "spec": {}}, 30)
    assert status == 201, lease
    made.append(lease)
created = time.perf_counter()
for lease in made:
    lease["spec"]["holderIdentity"] = "m"
    status, answer = client.request("PUT", leases("default") + "/" + lease["metadata"]["name"], lease, 30)
    assert status == 200, answer
print(began, created, time.perf_counter())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leases", type=int, default=2000, help="Leases in all, split over the processes")
    parser.add_argument("--processes", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kube-writes-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", services=("kubernetes",)) as cluster:
        endpoints = cluster.endpoints
        url = endpoints.urls()["kubernetes"]
        each = args.leases // args.processes
        go = time.time() + 3.0  # every writer imported and connected before the first write
        writers = [subprocess.Popen([sys.executable, "-c", _WRITER, url, f"w{p}", str(each), str(go)],
                                    stdout=subprocess.PIPE, text=True) for p in range(args.processes)]
        try:
            times = [tuple(float(x) for x in w.communicate(timeout=600)[0].split()) for w in writers]
        finally:
            for w in writers:
                w.kill()
        n = each * args.processes
        began, created = min(t[0] for t in times), max(t[1] for t in times)
        updating = max(t[2] - t[1] for t in times)  # the slowest process's updates (after its own creates)
        total = max(t[2] for t in times) - began
        print(f"{n} Leases from {args.processes} processes: all created in {created - began:.2f} s "
              f"({n / (created - began):.0f}/s); each process's updates in at most {updating:.2f} s "
              f"({n / updating:.0f}/s); {2 * n} writes in {total:.2f} s ({2 * n / total:.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
