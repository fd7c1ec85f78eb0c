"""The container driver issues the right engine commands (no engine runs here: tests/cluster/test_podman.py runs
them for real; the trial logic that calls these is the same one the local runs exercise)."""

from __future__ import annotations

from pathlib import Path

from elect_bench.infrastructure import DockerInfra
from elect_bench.members import MemberProcess
from elect_bench.placement import DockerPlacement
from elect_cluster.containers import Engine
from elect_cluster.netns import iptables


class Recording(Engine):
    """An engine that records what it is asked to do; every container is running as pid 4242."""

    def __init__(self) -> None:
        super().__init__("docker")
        self.issued: list[list[str]] = []

    def run(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        self.issued.append(["docker", *args])
        if args[:1] == ("inspect",):
            return "4242\n"
        if args[:1] == ("ps",):
            return "c0ffee\n"
        return ""

    def in_netns(self, container: str, *argv: str) -> None:
        self.issued.append(["nsenter", "-t", str(self.pid(container)), "-n", *argv])


def test_docker_placement_commands(tmp_path: Path) -> None:
    engine = Recording()
    docker = DockerPlacement(str(tmp_path), engine=engine)
    proc = MemberProcess("etcd://etcd1:2379/x", "m1", [0], log_dir=tmp_path, prefix=docker.prefix("m1"),
                         python=docker.python)
    assert proc._argv[:6] == ["docker", "run", "--rm", "-i", "--init", "--name"]
    assert proc._argv[proc._argv.index("--network") + 1] == "elect_net"
    assert f"{tmp_path}:{tmp_path}" in proc._argv  # state on disk is where the harness put it
    start = proc._argv.index("elect-member:local") + 1
    assert proc._argv[start:start + 5] == ["python3", "-m", "elect", "member", "etcd://etcd1:2379/x"]
    engine.issued.clear()
    docker.kill(proc)
    docker.pause(proc)
    docker.resume(proc)
    docker.stop(proc)
    docker.cut("m1")
    docker.heal("m1")
    ipt = iptables()
    assert engine.issued == [
        ["docker", "kill", "--signal", "KILL", "elect-member-m1"],
        ["docker", "pause", "elect-member-m1"],
        ["docker", "unpause", "elect-member-m1"],
        ["docker", "kill", "--signal", "TERM", "elect-member-m1"],
        ["docker", "inspect", "--format", "{{.State.Pid}}", "elect-member-m1"],
        ["nsenter", "-t", "4242", "-n", ipt, "-A", "INPUT", "-i", "eth0", "-j", "DROP"],
        ["docker", "inspect", "--format", "{{.State.Pid}}", "elect-member-m1"],
        ["nsenter", "-t", "4242", "-n", ipt, "-A", "OUTPUT", "-o", "eth0", "-j", "DROP"],
        ["docker", "inspect", "--format", "{{.State.Pid}}", "elect-member-m1"],
        ["docker", "inspect", "--format", "{{.State.Pid}}", "elect-member-m1"],
        ["nsenter", "-t", "4242", "-n", ipt, "-F", "INPUT"],
        ["docker", "inspect", "--format", "{{.State.Pid}}", "elect-member-m1"],
        ["nsenter", "-t", "4242", "-n", ipt, "-F", "OUTPUT"],
    ]
    assert docker.address("m1") == "elect-member-m1"


def test_docker_infrastructure_fault_commands() -> None:
    engine = Recording()
    infra = DockerInfra(engine=engine)
    victim = infra.kill("etcd")
    infra.restart(victim, timeout=10)
    frozen = infra.pause("zookeeper")
    infra.resume(frozen)
    assert (victim.label, frozen.label, infra.members("kafka")) == ("etcd[0]", "zookeeper[0]", 3)
    by_label = ["--filter", "label=com.docker.compose.project=elect", "--filter"]
    assert engine.issued == [
        ["docker", "ps", "-a", "-q", *by_label, "label=com.docker.compose.service=etcd1"],
        ["docker", "kill", "--signal", "KILL", "c0ffee"],
        ["docker", "ps", "-a", "-q", *by_label, "label=com.docker.compose.service=etcd1"],
        ["docker", "start", "c0ffee"],
        ["docker", "ps", "-a", "-q", *by_label, "label=com.docker.compose.service=zk1"],
        ["docker", "pause", "c0ffee"],
        ["docker", "ps", "-a", "-q", *by_label, "label=com.docker.compose.service=zk1"],
        ["docker", "unpause", "c0ffee"],
    ]
