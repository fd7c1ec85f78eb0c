"""What each Kubernetes leader election asks of the API server at rest: 3 members of kubernetes://, client-go's
leaderelection and the Python client's (the bench's methods, at detection budget D), every role led, then the
API server's own request counter (`apiserver_request_total`, resource leases, read from /metrics as the
administrator) over a window. The relays that count other methods' requests cannot read TLS; the API server
counts its own. Prints requests per second per member, by verb.

    python3 bench/bare/kube_requests.py --roles 6 --window 30
"""

from __future__ import annotations

import argparse
import collections
import re
import ssl
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

from elect_bench.members import MemberProcess, led
from elect_bench.methods import METHODS, Group
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

_SAMPLE = re.compile(r'^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$')


def lease_requests(cluster: LocalCluster) -> collections.Counter[str]:
    """The API server's count of requests on leases so far, by verb."""
    member = cluster.members("kubernetes")[0]
    token = Path(member.extra["admin_token_file"]).read_text().strip()
    request = urllib.request.Request(f"https://{member.address}/metrics", headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=member.extra["ca"])
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        text = response.read().decode()
    counts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None:
            continue
        labels = dict(part.split("=", 1) for part in re.findall(r'\w+="[^"]*"', found.group(1)))
        if labels.get("resource") == '"leases"':
            counts[labels.get("verb", '"?"').strip('"')] += int(float(found.group(2)))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="kubernetes,client-go,k8s-python")
    parser.add_argument("--roles", type=int, default=6)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=30.0, help="seconds counted at rest")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kube-requests-") as tmp, \
            LocalCluster(Path(tmp) / "cluster", services=("kubernetes",)) as cluster:
        print(f"{'method':<12} {'req/s/member':>12}  by verb (per member per second)")
        for name in args.methods.split(","):
            method = METHODS[name]
            ids = [f"m{i}" for i in range(args.members)]
            group = Group(ids, args.roles, f"req-{name}-{uuid.uuid4().hex[:6]}", cluster.endpoints)
            urls = method.member_urls(group, args.budget)
            roles = list(range(args.roles))
            procs = [MemberProcess(urls[i], i, roles, log_dir=Path(tmp),
                                   command=method.launch(urls[i], i, roles, sys.executable)) for i in ids]
            try:
                for p in procs:
                    p.start()
                wanted = {str(r) for r in roles}
                wait_until(lambda procs=procs, wanted=wanted: led(procs) == wanted, 60.0,  # type: ignore[misc]
                           what=f"{name}: every role led")
                before, began = lease_requests(cluster), time.monotonic()
                time.sleep(args.window)  # the window counted: requests at rest
                after, took = lease_requests(cluster), time.monotonic() - began
            finally:
                for p in procs:
                    p.stop(timeout=20.0)
            rate = {verb: (after[verb] - before[verb]) / took / args.members for verb in after}
            verbs = ", ".join(f"{verb} {value:.1f}" for verb, value in sorted(rate.items()) if value > 0)
            print(f"{name:<12} {sum(rate.values()):>12.1f}  {verbs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
