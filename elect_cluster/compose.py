"""The many-hosts setup in cluster/docker-compose.yml, as the harness sees it: endpoints by service name.

`LOCAL_FILE` is the override that swaps the official images for those `elect cluster images` builds here.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .endpoints import Endpoints


def _files() -> Path:
    """`cluster/` of the checkout this package runs from, else the installed `elect_cluster.files` (an editable
    install of another checkout would otherwise hand out that checkout's files)."""
    here = Path(__file__).resolve().parent.parent / "cluster"
    if (here / "docker-compose.yml").is_file():
        return here
    return Path(str(resources.files("elect_cluster.files")))


FILES = _files()
COMPOSE_FILE = FILES / "docker-compose.yml"
LOCAL_FILE = FILES / "docker-compose.local.yml"
PROJECT = "elect"
NETWORK = "elect_net"


def endpoints() -> Endpoints:
    """Where members inside the compose network reach the infrastructure."""
    return Endpoints(kafka=("kafka1:9092", "kafka2:9092", "kafka3:9092"),
                     etcd=("etcd1:2379", "etcd2:2379", "etcd3:2379"),
                     zookeeper=("zk1:2181", "zk2:2181", "zk3:2181"))
