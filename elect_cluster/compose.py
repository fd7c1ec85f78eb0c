"""The many-hosts setup in cluster/docker-compose.yml, as the harness sees it: endpoints by service name."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .endpoints import Endpoints

COMPOSE_FILE = Path(str(resources.files("elect_cluster.files").joinpath("docker-compose.yml")))


def endpoints() -> Endpoints:
    """Where members inside the compose network reach the infrastructure."""
    return Endpoints(kafka=("kafka1:9092", "kafka2:9092", "kafka3:9092"),
                     etcd=("etcd1:2379", "etcd2:2379", "etcd3:2379"),
                     zookeeper=("zk1:2181", "zk2:2181", "zk3:2181"))
