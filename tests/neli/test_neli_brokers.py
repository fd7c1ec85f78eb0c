"""NELI on three Apache Kafka brokers: the leader topic is replicated, so losing a broker loses no token."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_neli_faults import BOUND, SESSION, Members, settled

from elect_bench.judging.checker import check
from elect_bench.judging.history import History
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until
from neli.options import KafkaOptions
from neli.topic import admin_client

pytestmark = pytest.mark.infra

ROLES = [str(r) for r in range(6)]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_killing_the_coordinator_of_three_brokers_keeps_every_token(protocol: str, kafka3: LocalCluster,
                                                                    tmp_path: Path) -> None:
    group = Members(",".join(kafka3.endpoints.kafka), tmp_path, protocol=protocol)
    victim = None
    try:
        members = [group.start(name, ROLES) for name in ("a", "b")]
        settled(members, ROLES, timeout=3 * BOUND)  # a cold start on three brokers: topic, group, assignment
        topic = group.url.split("/")[3].split("?")[0]
        admin = admin_client(KafkaOptions(servers=kafka3.endpoints.kafka, topic=topic))
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        assert {len(p.replicas) for p in partitions.values()} == {3}  # replicated on every broker

        victim = kafka3.wait_for_leader("kafka", timeout=30)  # the broker coordinating every group
        killed = time.monotonic()
        kafka3.kill("kafka", victim)

        def led_again() -> bool:  # past any fencing the loss caused, each role has one leader again
            settled_by = killed + 5 * SESSION
            return time.monotonic() > settled_by and all(
                sum(1 for m in members if r in m.log.leading()) == 1 for r in ROLES)
        wait_until(led_again, 3 * BOUND, 0.1, what="every role led again after the coordinator's broker died")
        history = History([ln for m in members for ln in m.log.lines])
        assert [v for v in check(history, exclusive=True) if v.kind == "token"] == []
    finally:
        group.close()
        if victim is not None:
            kafka3.start_member("kafka", victim)
