"""How fast one Kafka broker takes a NELI fast-mode heartbeat round: one small record to every partition, acked by
the leader, as a member writes them (`linger.ms` 0), for a few partition counts.

NELI fast writes every partition about ten times a second per member (each member heartbeats the partitions it
owns every D/10), so a round's latency against 100 ms says up to which partition count a broker keeps up."""

from __future__ import annotations

import argparse
import time

from confluent_kafka import Producer

from elect_bench.judging.measures import percentile
from elect_bench.rebalance import new_topic


def _rounds(bootstrap: str, partitions: int, seconds: float) -> tuple[int, list[float]]:
    topic = new_topic(bootstrap, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "enable.idempotence": False})
    took: list[float] = []
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        sent, acked = time.monotonic(), [0]

        def delivered(err: object, msg: object, sent: float = sent, acked: list[int] = acked) -> None:
            acked[0] += 1
            if acked[0] == partitions:
                took.append(time.monotonic() - sent)

        for p in range(partitions):
            producer.produce(topic, b"x" * 80, partition=p, on_delivery=delivered)
        producer.flush(10)
    return len(took), sorted(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("bootstrap", help="HOST:PORT of a plaintext listener")
    parser.add_argument("--partitions", default="60,150,600", help="comma-separated partition counts")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    for partitions in (int(p) for p in args.partitions.split(",")):
        rounds, took = _rounds(args.bootstrap, partitions, args.seconds)
        if not took:
            print(f"{partitions} partitions: no round completed in {args.seconds:g} s")
            continue
        rate = rounds * partitions / args.seconds
        print(f"{partitions} partitions: {rounds} rounds in {args.seconds:g} s ({rate:,.0f} partition writes/s), "
              f"round p50 {1000 * percentile(took, 50):.0f} ms, max {1000 * took[-1]:.0f} ms")


if __name__ == "__main__":
    main()
