"""What a rolling restart costs a bare consumer group, before any election runs on top: 3 confluent-kafka consumers
of one topic (6 partitions), each in turn SIGTERMed (it closes, leaving the group), started again with the same
name after a hold, the next once the group shares the partitions evenly again; timed from the consumers' own
revoke and assign callbacks.

Per partition that moved, the gap is from the revoke of its last owner to the assign of its next one: a NELI fast
member cannot lead a partition it has not been assigned, so this is the floor of `elect bench --faults
rolling-restart` for kafka-fast (classic) and kafka-fast-848. On the classic protocol, `--static` gives each
consumer `group.instance.id` = its name (KIP-345): a static member's close does not leave the group, so its
partitions wait for it (up to the session timeout) instead of moving twice.

    python bench/bare/kafka_rolling.py [--protocol classic|consumer] [--static] [--session 1] [--trials 3]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from pathlib import Path

from elect_bench.rebalance import CONSUMER, LIMIT, Consumer, balanced, configure_group, new_topic
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

STATIC = CONSUMER.replace('"enable.auto.commit": False}',
                          '"enable.auto.commit": False, **({"group.instance.id": name} if sys.argv[6] == "static" '
                          'else {})}').replace('"cooperative-sticky"', 'sys.argv[7]')


class Bare(Consumer):
    """A bare consumer, with `group.instance.id` when `static`."""

    def __init__(self, servers: str, topic: str, name: str, session: float, protocol: str, static: bool,
                 assignor: str = "cooperative-sticky") -> None:
        import os
        import subprocess
        import sys

        self.member_id = name
        argv = [sys.executable, "-c", STATIC, servers, topic, name, str(session), protocol,
                "static" if static else "dynamic", assignor]
        self._popen = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.proc = self._popen
        assert self._popen.stdout is not None
        os.set_blocking(self._popen.stdout.fileno(), False)
        self.owned: set[int] = set()
        self.lines: list[dict[str, object]] = []


def rolling(servers: str, protocol: str, static: bool, session: float, hold: float, assignor: str,
            partitions: int = 6, consumers: int = 3) -> list[float]:
    """One rolling restart; the gap of every partition handover in it (seconds)."""
    topic = new_topic(servers, partitions)
    if protocol == "consumer":
        configure_group(servers, topic, session)
    group = [Bare(servers, topic, f"c{i}", session, protocol, static, assignor) for i in range(consumers)]
    lines: list[tuple[float, str, str, int]] = []  # (mono, consumer, event, partition) of every life
    try:
        wait_until(lambda: balanced(group, partitions), LIMIT, what="the group balanced")
        began = time.monotonic()
        for i in range(consumers):
            old = group[i]
            old.signal(15)
            old._popen.wait(30)
            old.pump()
            time.sleep(hold)  # the member is away for the hold, as the harness's rolling restart does
            group[i] = Bare(servers, topic, old.member_id, session, protocol, static, assignor)
            group[i].lines = old.lines  # one history per name
            wait_until(lambda: balanced(group, partitions), LIMIT, what="the group balanced again")
        for c in group:
            c.pump()
            lines += [(float(str(x["mono"])), c.member_id, str(x["event"]), int(p))
                      for x in c.lines for p in x["parts"]  # type: ignore[attr-defined]
                      if float(str(x["mono"])) >= began]
    finally:
        for c in group:
            c.kill()
    gaps = []
    for p in range(partitions):
        mine = sorted(x for x in lines if x[3] == p)
        for a, b in itertools.pairwise(mine):
            if a[2] == "revoke" and b[2] == "assign":
                gaps.append(b[0] - a[0])
    return gaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--static", action="store_true", help="group.instance.id = the consumer's name")
    parser.add_argument("--session", type=float, default=1.0)
    parser.add_argument("--hold", type=float, default=1.0)
    parser.add_argument("--assignor", default="cooperative-sticky", help="classic: cooperative-sticky, range, ...")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/elect-bare-rolling"))
    args = parser.parse_args()
    with LocalCluster(args.workdir, services=["kafka"]) as cluster:
        servers = ",".join(cluster.endpoints.kafka)
        for trial in range(args.trials):
            gaps = rolling(servers, args.protocol, args.static, args.session, args.hold, args.assignor)
            print(f"trial {trial + 1}: {len(gaps)} handovers, gap median {statistics.median(gaps):.3f} s, "
                  f"max {max(gaps):.3f} s; all {[round(g, 3) for g in sorted(gaps)]}", flush=True)


if __name__ == "__main__":
    main()
