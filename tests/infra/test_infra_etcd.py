"""etcd answers etcd3gw, grants a 1 s lease as asked, and a 3-member cluster survives its leader's death."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest
from etcd3gw.client import Etcd3Client

from elect_cluster.endpoints import Endpoints
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def _client(address: str) -> Etcd3Client:
    host, port = address.rsplit(":", 1)
    return Etcd3Client(host=host, port=int(port), timeout=5)


def test_put_and_get(infra: Endpoints) -> None:
    client = _client(infra.etcd[0])
    key = f"/test/{uuid.uuid4().hex}"
    assert client.put(key, "v1")
    assert client.get(key) == [b"v1"]


def test_one_second_lease_is_granted_as_asked(infra: Endpoints) -> None:
    # Only with --election-timeout 500 does etcd grant a 1 s TTL instead of raising it to 2 s.
    request = urllib.request.Request(f"http://{infra.etcd[0]}/v3/lease/grant", data=b'{"TTL": 1}',
                                     method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        assert int(json.loads(response.read())["TTL"]) == 1


def test_write_survives_killing_the_leader(etcd_cluster3: LocalCluster) -> None:
    cluster = etcd_cluster3
    addresses = cluster.endpoints.etcd
    leader = cluster.wait_for_leader("etcd", 30.0)
    key = f"/test/{uuid.uuid4().hex}"
    assert _client(addresses[leader]).put(key, "before")
    killed_at = time.monotonic()
    try:
        assert cluster.kill("etcd", leader)
        successor = cluster.wait_for_leader("etcd", 30.0, other_than=leader)
        print(f"etcd: new leader {successor} after {time.monotonic() - killed_at:.2f} s")
        survivor = _client(addresses[successor])
        assert survivor.get(key) == [b"before"]
        assert survivor.put(key, "after")
    finally:
        cluster.start_member("etcd", leader, timeout=60.0)
    cluster.wait_healthy(60.0)
    # The restarted member kept its data and caught up with the write made while it was down.
    assert wait_until(lambda: _client(addresses[leader]).get(key) == [b"after"], 30.0,
                      what="the restarted member to catch up", ignore=(Exception,))
