"""Rounds of 3 `elect member` processes of kafka:// fast mode on a topic they create as they start, on one Apache
Kafka broker started by the project's own code, each round at rest after every role is led: when the group first
led everything, and every leadership that ended at rest (the first one's time). The broker's log is copied with
this machine's monotonic time in front of each line (Kafka's own lines carry none), so what the broker did when a
leadership ended can be read beside it. `--watch`: a bare consumer reads every partition from the start beside
the members and reports each round's latest delivery (receipt minus the record's CreateTime), to tell records the
broker took late from records the members read late. `--index-interval BYTES`: the topic is created before the
members start, with that `index.interval.bytes` (Kafka's default 4,096), to see the index's part.

    python3 bench/bare/kafka_new_topic_rest.py consumer 60 --rest 15 --rounds 4
    python3 bench/bare/kafka_new_topic_rest.py consumer 60 --rounds 2 --watch --index-interval 1073741824
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import threading
import time
import uuid
from pathlib import Path

from elect_bench.members import MemberProcess
from elect_bench.rebalance import new_topic
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until


def _stamp(source: Path, into: Path, stop: threading.Event) -> None:
    with open(source) as lines, open(into, "w") as out:
        while not stop.is_set():
            line = lines.readline()
            if line:
                out.write(f"{time.monotonic():.3f} {line}")
                out.flush()
            else:
                stop.wait(0.01)


def _watch(servers: str, topic: str, partitions: int, stop: threading.Event, lags: list[float]) -> None:
    """Read every partition of `topic` from its start (once it exists), noting each record's delivery lag."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers})
    while topic not in admin.list_topics(timeout=5).topics:
        if stop.wait(0.05):
            return
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"watch-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    try:
        while not stop.is_set():
            for msg in consumer.consume(500, 0.05):
                if msg.error() is None:
                    lags.append(time.time() - msg.timestamp()[1] / 1000)
    finally:
        consumer.close()


def _all_led(group: list[MemberProcess], roles: int) -> bool:
    """Every role led, and by every member (a member that joins late moves roles at rest otherwise)."""
    shares = [p.log.leading() for p in group]
    return len(set().union(*shares)) == roles and all(shares)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("protocol", choices=["classic", "consumer"])
    parser.add_argument("partitions", type=int)
    parser.add_argument("--rest", type=float, default=15.0, help="seconds at rest per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--watch", action="store_true", help="time delivery with a bare consumer beside the members")
    parser.add_argument("--index-interval", type=int, help="create the topic first, with this index.interval.bytes")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="elect-new-topic-"))
    cluster = LocalCluster(work / "cluster", services=("kafka",))
    cluster.up(timeout=180)
    stop = threading.Event()
    threading.Thread(target=_stamp, args=(next((work / "cluster").rglob("kafka.log")), work / "broker.log", stop),
                     daemon=True).start()
    servers = ",".join(cluster.endpoints.kafka)
    roles = [str(i) for i in range(args.partitions)]
    try:
        for r in range(args.rounds):
            # the members create the topic as they start, unless it is made first with the index interval asked for
            topic = "rest-" + uuid.uuid4().hex[:6] if args.index_interval is None else \
                new_topic(servers, args.partitions, {"index.interval.bytes": str(args.index_interval)})
            url = (f"kafka://{servers}/{topic}?mode=fast&session_timeout=1&protocol={args.protocol}"
                   f"&partitions={args.partitions}")
            lags: list[float] = []
            watching = threading.Event()
            watcher = threading.Thread(target=_watch, args=(servers, topic, args.partitions, watching, lags),
                                       daemon=True) if args.watch else None
            if watcher is not None:
                watcher.start()
            began = time.monotonic()
            procs = [MemberProcess(url, f"m{i}", roles, log_dir=work / f"round-{r}") for i in range(3)]
            try:
                for p in procs:
                    p.start()
                wait_until(functools.partial(_all_led, procs, args.partitions), 120, what="every role led")
                led = time.monotonic()
                shares = ", ".join(f"{p.member_id} {len(p.log.leading())}" for p in procs)
                print(f"round {r} (started at {began:.3f}): every role led after {led - began:.2f} s ({shares})")
                time.sleep(args.rest)  # the window at rest itself, not a wait for a condition
                for p in procs:
                    ended = [line for line in p.log.lines if line["event"] in ("fenced", "revoked")]
                    early = sum(1 for line in ended if line["mono"] < led)
                    ended = [line for line in ended if line["mono"] >= led]
                    if early:
                        print(f"  {p.member_id}: {early} handed over during the cold start")
                    if ended:
                        first = ended[0]
                        print(f"  {p.member_id}: {len(ended)} ended at rest, the first {first['event']} at "
                              f"{first['mono']:.3f} (+{first['mono'] - began:.2f} s)")
                if lags:
                    print(f"  the watching consumer: {len(lags)} records, the latest delivered {max(lags):.2f} s "
                          "after its CreateTime")
            finally:
                watching.set()
                if watcher is not None:
                    watcher.join(10)
                for p in procs:
                    p.kill()
    finally:
        stop.set()
        cluster.down()
    print(f"(member logs and the stamped broker log in {work})")


if __name__ == "__main__":
    main()
