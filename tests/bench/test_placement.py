"""The container driver issues the right engine commands (no engine runs here; the trial logic that
calls these is the same one the local runs exercise)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from elect_bench.infrastructure import DockerInfra
from elect_bench.members import MemberProcess
from elect_bench.placement import DockerPlacement


def test_docker_placement_commands(tmp_path: Path) -> None:
    issued: list[list[str]] = []

    def record(argv: Sequence[str]) -> None:
        issued.append(list(argv))

    docker = DockerPlacement("cluster/docker-compose.yml", runner=record)
    proc = MemberProcess("etcd://etcd1:2379/x", "m1", [0], log_dir=tmp_path, prefix=docker.prefix("m1"),
                         python=docker.python)
    assert proc._argv[:14] == ["docker", "compose", "-f", "cluster/docker-compose.yml", "-p", "elect", "run", "--rm",
                               "-T", "--name", "elect-member-m1", "--entrypoint", "", "member"]
    assert proc._argv[14:19] == ["python3", "-m", "elect", "member", "etcd://etcd1:2379/x"]
    docker.kill(proc)
    docker.pause(proc)
    docker.resume(proc)
    docker.stop(proc)
    docker.cut("m1")
    docker.heal("m1")
    assert issued == [
        ["docker", "kill", "--signal", "KILL", "elect-member-m1"],
        ["docker", "pause", "elect-member-m1"],
        ["docker", "unpause", "elect-member-m1"],
        ["docker", "kill", "--signal", "TERM", "elect-member-m1"],
        ["docker", "network", "disconnect", "--force", "elect_net", "elect-member-m1"],
        ["docker", "network", "connect", "elect_net", "elect-member-m1"],
    ]
    assert docker.address("m1") == "elect-member-m1"


def test_docker_infrastructure_fault_commands() -> None:
    issued: list[list[str]] = []
    infra = DockerInfra(runner=lambda argv: issued.append(list(argv)))
    victim = infra.kill("etcd")
    infra.restart(victim, timeout=10)
    frozen = infra.pause("zookeeper")
    infra.resume(frozen)
    assert (victim.label, frozen.label, infra.members("kafka")) == ("etcd[0]", "zookeeper[0]", 3)
    assert issued == [
        ["docker", "kill", "--signal", "KILL", "elect-etcd1-1"],
        ["docker", "start", "elect-etcd1-1"],
        ["docker", "pause", "elect-zk1-1"],
        ["docker", "unpause", "elect-zk1-1"],
    ]
