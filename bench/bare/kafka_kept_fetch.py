"""How long a KIP-848 consumer's *kept* partitions go unread when it gives others up, with no election on top.

Consumer A owns all 6 partitions of a topic a producer writes to every 20 ms; consumer B joins (A gives half up),
then leaves (A takes them back). Around each of these rebalances librdkafka pauses the fetch of every partition A
holds while the rebalance callback runs, and resumes the kept ones by clearing a flag in its main thread; the broker
thread that fetches them notices at its next wakeup, up to its 1 s block, unless something else wakes it. The
figure per rebalance is the longest A went without a record of a partition it kept throughout, beside the
producer's 20 ms.

`--wake` queries each kept partition's watermarks right after every rebalance callback: a request to its broker,
whose send and answer wake that broker's thread. (NELI's elector does so only for kept partitions still unread two
heartbeat intervals after the callback: a request at every rebalance delayed its handovers.)

    python bench/bare/kafka_kept_fetch.py [--wake] [--rounds 30]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from elect_bench.rebalance import configure_group, new_topic
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

PARTITIONS = 6


class Member:
    """A KIP-848 consumer polled on a thread of its own, noting when it last read each partition."""

    def __init__(self, servers: str, topic: str, group: str, wake: bool) -> None:
        self.topic, self.wake = topic, wake
        self.owned: set[int] = set()
        self.last_read: dict[int, float] = {}
        self.gaps: list[float] = []  # per partition kept through a rebalance: the longest unread span around it
        self._rebalanced_at: float | None = None
        self._kept: set[int] = set()
        self._longest: dict[tuple[float, int], float] = {}  # (rebalance, partition) -> longest unread span
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "group.protocol": "consumer",
                                   "enable.auto.commit": False, "auto.offset.reset": "latest",
                                   "fetch.wait.max.ms": 100, "fetch.error.backoff.ms": 50})
        self._consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer: Any, parts: list[TopicPartition]) -> None:
        consumer.incremental_assign(parts)
        self._rebalanced(set(self.owned))
        self.owned |= {p.partition for p in parts}

    def _on_revoke(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.owned -= {p.partition for p in parts}
        consumer.incremental_unassign(parts)
        self._rebalanced(set(self.owned))

    def _rebalanced(self, kept: set[int]) -> None:
        now = time.monotonic()
        self._rebalanced_at, self._kept = now, kept
        for p in kept:
            self.last_read.setdefault(p, now)

    def _run(self) -> None:
        woke_for: float | None = None
        while not self._stop.is_set():
            msg = self._consumer.poll(0.05)
            now = time.monotonic()
            p = msg.partition() if msg is not None and msg.error() is None else None
            if p is not None:
                if p in self._kept and self._rebalanced_at is not None and now - self._rebalanced_at < 3.0:
                    gap = now - self.last_read.get(p, now)
                    if gap > 0:
                        self._note(p, gap)
                self.last_read[p] = now
            if self.wake and self._rebalanced_at is not None and woke_for != self._rebalanced_at:
                woke_for = self._rebalanced_at
                for k in sorted(self._kept):
                    with contextlib.suppress(Exception):  # a wake-up only: its answer does not matter
                        self._consumer.get_watermark_offsets(TopicPartition(self.topic, k), timeout=1.0)

    def _note(self, partition: int, gap: float) -> None:
        key = (self._rebalanced_at or 0.0, partition)
        self._longest[key] = max(self._longest.get(key, 0.0), gap)

    def rebalance_gaps(self) -> list[float]:
        """Per rebalance, the longest unread span of any kept partition."""
        per: dict[float, float] = {}
        for (at, _), gap in self._longest.items():
            per[at] = max(per.get(at, 0.0), gap)
        return list(per.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


def _shared(a: Member, b: Member) -> bool:
    """B owns its share and every partition is owned."""
    return bool(b.owned) and len(a.owned) + len(b.owned) == PARTITIONS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wake", action="store_true", help="query each kept partition's watermarks after a rebalance")
    parser.add_argument("--rounds", type=int, default=30, help="joins and leaves of the second consumer")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/elect-bare-kept-fetch"))
    args = parser.parse_args()
    with LocalCluster(args.workdir, services=["kafka"]) as cluster:
        servers = ",".join(cluster.endpoints.kafka)
        topic = new_topic(servers, PARTITIONS)
        group = f"kept-{uuid.uuid4().hex[:8]}"
        configure_group(servers, group, 1.0)
        producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
        writing = threading.Event()

        def write() -> None:
            while not writing.is_set():
                for p in range(PARTITIONS):
                    producer.produce(topic, b"x", partition=p)
                producer.poll(0)
                time.sleep(0.02)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        a = Member(servers, topic, group, args.wake)
        try:
            wait_until(lambda: len(a.owned) == PARTITIONS, 60, what="A owning every partition")
            for i in range(args.rounds):
                b = Member(servers, topic, group, args.wake)
                try:
                    wait_until(partial(_shared, a, b), 60, what="B's share")
                    time.sleep(1.5)  # (a measurement window: A's reads of its kept partitions over the rebalance)
                finally:
                    b.close()
                wait_until(lambda: len(a.owned) == PARTITIONS, 60, what="A owning every partition again")
                time.sleep(1.5)
                print(f"round {i + 1}: longest unread kept partition per rebalance so far "
                      f"{sorted(round(g, 3) for g in a.rebalance_gaps())[-3:]}", flush=True)
        finally:
            writing.set()
            a.close()
        gaps = a.rebalance_gaps()
        print(f"wake={args.wake}: {len(gaps)} rebalances with kept partitions; longest unread span of a kept "
              f"partition: median {statistics.median(gaps):.3f} s, max {max(gaps):.3f} s, "
              f"over 0.3 s in {sum(g > 0.3 for g in gaps)}", flush=True)


if __name__ == "__main__":
    main()
