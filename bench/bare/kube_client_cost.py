"""What a Lease round trip costs through elect's own client (`cas_lease.kube_api`: the standard library) beside
the official Kubernetes Python client (`kubernetes`, the anchors extra), on one kube-apiserver started by the
project's own code: the import, then N times a read and a conditional update of one Lease, one after another, as
a member renewing does. Prints milliseconds per request (wall) and the client's CPU per request.

    python3 bench/bare/kube_client_cost.py --requests 500
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from elect_cluster.local import LocalCluster

_OURS = """
import sys, time
began = time.perf_counter()
from elect.config import spec_from_url
from cas_lease.kube_api import Client, leases, resolve
imported = time.perf_counter() - began
client = Client(resolve(spec_from_url(sys.argv[1], member="m").options))
path = leases("default") + "/" + sys.argv[2]
status, lease = client.request("POST", leases("default"), {"metadata": {"name": sys.argv[2]}, "spec": {}}, 10)
cpu, wall = time.process_time(), time.perf_counter()
for i in range(int(sys.argv[3])):
    status, lease = client.request("GET", path, None, 10)
    lease["spec"]["leaseTransitions"] = i
    status, lease = client.request("PUT", path, lease, 10)
    assert status == 200, lease
print(imported, time.perf_counter() - wall, time.process_time() - cpu)
"""

_OFFICIAL = """
import sys, time
began = time.perf_counter()
from kubernetes import client, config
imported = time.perf_counter() - began
config.load_kube_config(config_file=sys.argv[1])
api = client.CoordinationV1Api()
api.create_namespaced_lease("default", client.V1Lease(metadata={"name": sys.argv[2]}, spec=client.V1LeaseSpec()))
cpu, wall = time.process_time(), time.perf_counter()
for i in range(int(sys.argv[3])):
    lease = api.read_namespaced_lease(sys.argv[2], "default")
    lease.spec.lease_transitions = i
    api.replace_namespaced_lease(sys.argv[2], "default", lease)
print(imported, time.perf_counter() - wall, time.process_time() - cpu)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="read-and-update pairs per client and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kube-client-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", services=("kubernetes",)) as cluster:
        endpoints = cluster.endpoints
        url = endpoints.urls()["kubernetes"]
        found: dict[str, list[tuple[float, float, float]]] = {"elect (stdlib)": [], "kubernetes 37.0.2": []}
        for round_ in range(args.rounds):
            for name, script, target in (("elect (stdlib)", _OURS, url),
                                         ("kubernetes 37.0.2", _OFFICIAL, endpoints.kubeconfig)):
                out = subprocess.run([sys.executable, "-c", script, target, f"cost-{round_}-{len(found[name])}-"
                                      f"{'e' if name.startswith('elect') else 'k'}", str(args.requests)],
                                     capture_output=True, text=True, check=True)
                imported, wall, cpu = (float(x) for x in out.stdout.split())
                found[name].append((imported, wall, cpu))
        n = 2 * args.requests
        print(f"{'client':<18} {'import s':>9} {'ms/request':>11} {'CPU ms/request':>15}  "
              f"({args.rounds} rounds of {n})")
        for name, runs in found.items():
            print(f"{name:<18} {statistics.median(r[0] for r in runs):>9.3f} "
                  f"{statistics.median(r[1] for r in runs) / n * 1000:>11.2f} "
                  f"{statistics.median(r[2] for r in runs) / n * 1000:>15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
