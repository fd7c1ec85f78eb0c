"""The many-hosts files are valid compose files with what the benchmark needs (no engine runs here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

from elect_cluster.compose import COMPOSE_FILE, FILES, LOCAL_FILE, endpoints
from elect_cluster.images import IMAGES


def test_compose_file_is_valid_and_complete() -> None:
    validator = shutil.which("docker-compose")
    assert validator, "docker-compose (the validator) is missing: run ./setup"
    result = subprocess.run([validator, "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
    services = config["services"]
    assert {"kafka1", "kafka2", "kafka3", "etcd1", "etcd2", "etcd3", "zk1", "zk2", "zk3", "member"} <= set(services)
    for k in ("kafka1", "kafka2", "kafka3"):
        env = services[k]["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper for Kafka
        assert int(env["KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS"]) <= 100  # the NELI paper's advice
    assert services["member"]["build"]["dockerfile"].endswith("cluster/Dockerfile")
    assert config["networks"]["net"]["name"] == "elect_net"
    # the endpoints the harness hands members are the compose service names
    hosts = {h.split(":")[0] for h in (*endpoints().kafka, *endpoints().etcd, *endpoints().zookeeper)}
    assert hosts <= set(services), json.dumps(sorted(hosts - set(services)))


def test_the_local_override_swaps_every_image_for_one_built_here() -> None:
    validator = shutil.which("docker-compose")
    assert validator, "docker-compose (the validator) is missing: run ./setup"
    result = subprocess.run([validator, "-f", str(COMPOSE_FILE), "-f", str(LOCAL_FILE), "config"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    built_here = {IMAGES[name].ref for name in ("elect-kafka", "elect-etcd", "elect-zookeeper", "elect-member")}
    assert {s["image"] for s in services.values()} == built_here
    for name in built_here:  # each has its container file in cluster/
        image = IMAGES[name.split(":")[0]]
        folder = FILES if image.folder == "." else FILES / str(image.folder)
        assert (folder / Path(image.containerfile).name).is_file(), name
