"""Killing the store's own leader (3-member etcd, 3-node ZooKeeper) costs at most TTL + its election."""

from __future__ import annotations

import time

import pytest
from lease_helpers import Spawn, longest_gap, settled, unique

from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra

TTL = 1.0
ROLES = [str(r) for r in range(6)]


def _survive_store_leader_death(cluster: LocalCluster, service: str, url: str, spawn: Spawn) -> None:
    members = [spawn(url, name, ROLES) for name in "abc"]
    wait_until(lambda: settled(members, ROLES, per_member=2), 30.0, what="2 roles per member")
    leader = cluster.wait_for_leader(service, 30.0)
    killed = time.monotonic()
    cluster.kill(service, leader)
    try:
        cluster.wait_for_leader(service, 30.0, other_than=leader)
        election = time.monotonic() - killed
        wait_until(lambda: settled(members, ROLES), 30.0, what="every role led again")
        began = time.monotonic()
        wait_until(lambda: time.monotonic() - began > 2 * TTL, 10.0, what="two TTLs of steady state")
        end = time.monotonic()
        gaps = {role: longest_gap(members, role, killed, end) for role in ROLES}
        bound = TTL + election + 1.0  # slack: a loaded 2-core machine, the election measured by polling
        print(f"{service}: store election {election:.2f} s, leaderless gaps {gaps}")
        assert max(gaps.values()) <= bound, (gaps, election)
        assert settled(members, ROLES)
    finally:
        cluster.start_member(service, leader, timeout=60.0)
    wait_until(lambda: settled(members, ROLES, per_member=2), 30.0, what="2 roles per member after the restart")


def test_etcd_leader_killed(etcd_cluster3: LocalCluster, spawn: Spawn) -> None:
    endpoints = ",".join(etcd_cluster3.endpoints.etcd)
    url = f"etcd://{endpoints}/{unique('etcd-leader')}?ttl={TTL}"
    _survive_store_leader_death(etcd_cluster3, "etcd", url, spawn)


def test_zookeeper_leader_killed(zookeeper_ensemble3: LocalCluster, spawn: Spawn) -> None:
    hosts = ",".join(zookeeper_ensemble3.endpoints.zookeeper)
    url = f"zookeeper://{hosts}/{unique('zk-leader')}?session_timeout={TTL}"
    _survive_store_leader_death(zookeeper_ensemble3, "zookeeper", url, spawn)
