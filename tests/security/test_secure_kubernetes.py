"""kubernetes:// on a secured cluster: kube-apiserver keeps its objects in an etcd that speaks TLS only, requires
client certificates and has authentication on (it shows its own certificate, whose common name is its etcd user)."""

from __future__ import annotations

import time

import pytest

import elect
from elect_cluster.local import LocalCluster
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def test_a_member_leads_through_an_api_server_on_a_secured_etcd(secure_kubernetes: LocalCluster) -> None:
    url = secure_kubernetes.endpoints.urls(f"sec-{time.monotonic_ns()}")["kubernetes"]
    assert secure_kubernetes.endpoints.security  # the etcd beside it is the secured one
    elector = elect.connect(url, ["r0"], member="a")
    elector.start()
    try:
        wait_until(lambda: elector.is_leader("r0"), 20.0, what="the lone member leading r0")
    finally:
        elector.stop()
