"""Session fixtures that start real infrastructure with the project's own code (elect_cluster).

- ``infra``: Endpoints of one Apache Kafka broker, one etcd member and one ZooKeeper node.
- ``tansu``: Endpoints of the light in-memory Kafka-protocol broker (Tansu), for what only it shows.
- ``kafka3``: a LocalCluster of three Apache Kafka brokers (replicated leader topics; broker faults).
- ``infra_cluster``: the LocalCluster behind ``infra`` (for status or faults; restore what you break).
- ``etcd_cluster3`` / ``zookeeper_ensemble3``: LocalClusters of three members of only that service,
  for tests that kill a store's leader; such a test must ``start_member`` what it killed afterwards.
- ``kubernetes``: a LocalCluster of kube-apiserver on one etcd member (its endpoints' kubeconfig: a member user).
- ``secure_etcd`` / ``secure_zookeeper`` / ``secure_kafka`` / ``secure_kubernetes``: LocalClusters of one secured
  member of that service (``elect cluster up --secure``: TLS with client certificates, users and passwords;
  elect_cluster.security; kube-apiserver on a secured etcd).

Missing infrastructure makes the tests fail with the reason (never skip): the project promises to run
on real services, so a silent skip would hide that the promise is not being checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elect_cluster.endpoints import Endpoints
from elect_cluster.errors import ClusterError
from elect_cluster.local import LocalCluster

__all__ = ["etcd_cluster3", "infra", "infra_cluster", "kafka3", "kafka_defaults", "kubernetes", "process_alive",
           "secure_etcd", "secure_kafka", "secure_kubernetes", "secure_zookeeper", "tansu", "zookeeper_ensemble3"]

START_TIMEOUT = 120.0  # generous: a busy 2-core machine can start three JVMs slowly


def process_alive(pid: int) -> bool:
    """True if ``pid`` is a live process per /proc (a zombie, already dead but unreaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZXx"


def _started(workdir: Path, **shape: Any) -> Iterator[LocalCluster]:
    cluster = LocalCluster(workdir, **shape)
    try:
        try:
            cluster.up(timeout=START_TIMEOUT)
        except ClusterError as exc:
            pytest.fail(f"real infrastructure did not start in {workdir} (these tests need it and never "
                        f"skip):\n{exc}", pytrace=False)
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def infra_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Kafka + 1 etcd + 1 ZooKeeper for the whole session, always torn down."""
    yield from _started(tmp_path_factory.mktemp("infra"))


@pytest.fixture(scope="session")
def infra(infra_cluster: LocalCluster) -> Endpoints:
    """Endpoints (and ``.urls()``) of the session's Kafka broker, etcd and ZooKeeper."""
    return infra_cluster.endpoints


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    """The light in-memory Kafka-protocol broker, beside the session's Apache Kafka."""
    for cluster in _started(tmp_path_factory.mktemp("tansu"), services=("kafka",), broker="tansu"):
        yield cluster.endpoints


@pytest.fixture(scope="session")
def kafka_defaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    """Apache Kafka as users configure it: its group settings at Kafka's defaults but the session minimums."""
    for cluster in _started(tmp_path_factory.mktemp("kafka-defaults"), services=("kafka",), broker="apache-defaults"):
        yield cluster.endpoints


@pytest.fixture(scope="session")
def kafka3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Three Apache Kafka brokers in one KRaft quorum; a test that kills one must start it again."""
    yield from _started(tmp_path_factory.mktemp("kafka3"), services=("kafka",), kafka_brokers=3)


@pytest.fixture(scope="session")
def etcd_cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A real three-member etcd cluster (election timeout 500 ms, heartbeat 50 ms)."""
    yield from _started(tmp_path_factory.mktemp("etcd3"), services=("etcd",), etcd_members=3)


@pytest.fixture(scope="session")
def zookeeper_ensemble3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A real three-node ZooKeeper ensemble (tickTime 50 ms)."""
    yield from _started(tmp_path_factory.mktemp("zk3"), services=("zookeeper",), zookeeper_nodes=3)


@pytest.fixture(scope="session")
def kubernetes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Kubernetes' own kube-apiserver (built by ./setup) on one etcd member: HTTPS, tokens, RBAC; its endpoints'
    kubeconfig is a member user's with only the lease Role."""
    yield from _started(tmp_path_factory.mktemp("kubernetes"), services=("kubernetes",))


@pytest.fixture(scope="session")
def secure_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One etcd member serving HTTPS only, client certificates required, authentication on (user `elect`)."""
    yield from _started(tmp_path_factory.mktemp("secure-etcd"), services=("etcd",), secure=True)


@pytest.fixture(scope="session")
def secure_kubernetes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """kube-apiserver on a secured etcd member (TLS only, client certificates, authentication on)."""
    yield from _started(tmp_path_factory.mktemp("secure-kubernetes"), services=("kubernetes",), secure=True)


@pytest.fixture(scope="session")
def secure_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One ZooKeeper node serving only its secure client port (TLS, client certificates required)."""
    yield from _started(tmp_path_factory.mktemp("secure-zk"), services=("zookeeper",), secure=True)


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One Apache Kafka broker whose clients' listener is SASL_SSL (PLAIN and SCRAM users `elect`)."""
    yield from _started(tmp_path_factory.mktemp("secure-kafka"), services=("kafka",), secure=True)
