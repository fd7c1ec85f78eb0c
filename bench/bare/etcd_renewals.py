"""What a bare etcd does with renewals at rest on this machine's disk, with no elect member: one etcd (as the harness
starts it), a client touching one key every `interval` as an etcd:// member's renewal does (a put that etcd
commits with an fsync), each touch timed; then etcd's own fsync histogram. Beside `elect bench floor`, it says how
often the store itself takes longer than a member may wait: at ttl=T an etcd:// leader fences when a renewal has
not come back within `renew_deadline - renew_interval` (T / 2 at the defaults).

    python3 bench/bare/etcd_renewals.py --seconds 300 [--interval 0.025] [--workdir DIR]

`--workdir` places etcd's data (default: the system's temporary directory, as `elect bench` does; TMPDIR moves
both).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path

from elect.etcd_gateway import Gateway, b64
from elect_bench.judging.measures import percentile
from elect_cluster.local import LocalCluster

THRESHOLDS = (0.05, 0.1, 0.25, 0.5)  # T / 2 at ttl = 0.1, 0.2, 0.5 and 1 s


def fsyncs(endpoint: str) -> dict[str, int]:
    """etcd's WAL fsync histogram: upper bound -> count at or below it."""
    text = urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("etcd_disk_wal_fsync_duration_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            out[bound] = int(float(line.rsplit(" ", 1)[1]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--interval", type=float, default=0.025, help="between touches (ttl=0.1: 0.025)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="elect-bare-etcd-", dir=args.workdir) as tmp:
        cluster = LocalCluster(Path(tmp), services=("etcd",))
        endpoints = cluster.up()
        try:
            endpoint = endpoints.etcd[0]
            gateway = Gateway((endpoint,))
            before = fsyncs(endpoint)
            took: list[float] = []
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                sent = time.monotonic()
                gateway.call("kv/put", {"key": b64("/bare/renewal"), "value": b64("x")}, 10.0)
                took.append(time.monotonic() - sent)
                time.sleep(max(0.0, args.interval - (time.monotonic() - sent)))
            after = fsyncs(endpoint)
        finally:
            cluster.down()
    took.sort()
    n = len(took)
    print(f"{n} touches over {args.seconds:g} s in {tmp}: p50 {percentile(took, 50) * 1000:.1f} ms, "
          f"p99 {percentile(took, 99) * 1000:.1f} ms, p99.9 {percentile(took, 99.9) * 1000:.1f} ms, "
          f"max {took[-1] * 1000:.0f} ms")
    for limit in THRESHOLDS:
        over = sum(1 for t in took if t > limit)
        print(f"  slower than {limit * 1000:.0f} ms (fences every leader at ttl={2 * limit:g}): {over} "
              f"({over / (args.seconds / 60):.1f} a minute)")
    total = after["+Inf"] - before["+Inf"]
    for bound in ("0.064", "0.128", "0.256", "0.512", "1.024"):
        over = total - (after[bound] - before[bound])
        print(f"  etcd's fsyncs over {float(bound) * 1000:.0f} ms: {over} of {total}")


if __name__ == "__main__":
    main()
