"""ZooKeeper answers kazoo, and a 3-node ensemble keeps a write when its leader is killed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from kazoo.client import KazooClient

from elect_cluster.endpoints import Endpoints
from elect_cluster.local import LocalCluster
from elect_cluster.zookeeper import mode

pytestmark = pytest.mark.infra


@contextmanager
def _kazoo(hosts: tuple[str, ...]) -> Iterator[KazooClient]:
    client = KazooClient(hosts=",".join(hosts), timeout=5.0)
    client.start(timeout=30.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def test_create_and_get(infra: Endpoints) -> None:
    host, port = infra.zookeeper[0].rsplit(":", 1)
    assert mode(host, int(port)) == "standalone"
    path = f"/test/{uuid.uuid4().hex}"
    with _kazoo(infra.zookeeper) as zk:
        zk.create(path, b"v1", makepath=True)
        assert zk.get(path)[0] == b"v1"


def test_write_survives_killing_the_leader(zookeeper_ensemble3: LocalCluster) -> None:
    cluster = zookeeper_ensemble3
    hosts = cluster.endpoints.zookeeper
    leader = cluster.wait_for_leader("zookeeper", 30.0)
    path = f"/test/{uuid.uuid4().hex}"
    with _kazoo(hosts) as zk:
        zk.create(path, b"before", makepath=True)
    killed_at = time.monotonic()
    try:
        assert cluster.kill("zookeeper", leader)
        successor = cluster.wait_for_leader("zookeeper", 30.0, other_than=leader)
        print(f"zookeeper: new leader {successor} after {time.monotonic() - killed_at:.2f} s")
        survivors = tuple(h for i, h in enumerate(hosts) if i != leader)
        with _kazoo(survivors) as zk:
            assert zk.get(path)[0] == b"before"
            zk.set(path, b"after")
    finally:
        cluster.start_member("zookeeper", leader, timeout=60.0)
    cluster.wait_healthy(60.0)
    with _kazoo((hosts[leader],)) as zk:  # the restarted node rejoined with its data
        zk.sync(path)
        assert zk.get(path)[0] == b"after"
