"""The compose cluster on this machine's container engine (Podman or Docker): up, wait until it serves, faults on
its containers, down.

The engine's own command line does the faults (kill, pause, start); a network cut is iptables run in the
container's network namespace (`nsenter -t PID -n`), because disconnecting a container from its network and
connecting it again gives it a new address that its name no longer resolves to. docker-compose reaches Podman
through Podman's Docker-API service, which `ComposeCluster` starts when none answers and stops again.

Clock: containers on one kernel share CLOCK_MONOTONIC (no engine here puts them in time namespaces), so the
`mono` of every member's event line compares directly with the harness's own `time.monotonic()`, as for
processes on one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from . import compose
from .errors import ClusterError, MissingBinary, NotReady
from .images import PODMAN_FIX, engine
from .netns import iptables
from .waiting import WaitTimeout, wait_until

PODMAN_SOCKET = Path("/run/podman/podman.sock")
#: compose service names per service of the harness
SERVICES = {"kafka": ("kafka1", "kafka2", "kafka3"), "etcd": ("etcd1", "etcd2", "etcd3"),
            "zookeeper": ("zk1", "zk2", "zk3")}


class Engine:
    """One container engine's command line (`podman` or `docker`, which take the same words for all used here).

    With `url` it drives another host's engine (`docker -H URL`, `podman --remote --url URL`); network faults are
    then iptables in a helper container that joins the target's network namespace (`--network container:NAME`,
    NET_ADMIN, the `helper` image's iptables), since that host's pids are not this machine's to nsenter.
    """

    def __init__(self, tool: str | None = None, url: str | None = None, helper: str = "elect-member:local") -> None:
        self.tool = tool or engine()
        self.podman = Path(self.tool).name == "podman"
        self.url = url
        self.helper = helper

    @property
    def command(self) -> list[str]:
        if self.url is None:
            return [self.tool]
        return [self.tool, "--remote", "--url", self.url] if self.podman else [self.tool, "-H", self.url]

    def run(self, *args: str, timeout: float = 60.0, check: bool = True) -> str:
        done = subprocess.run([*self.command, *args], capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise ClusterError(f"{Path(self.tool).name} {' '.join(args)}: {done.stderr.strip()[-1500:]}")
        return done.stdout

    def pid(self, container: str) -> int:
        """The pid of the container's first process on its host (0 when it is not running)."""
        return int(self.run("inspect", "--format", "{{.State.Pid}}", container).strip() or 0)

    def in_netns(self, container: str, *argv: str) -> None:
        """Run iptables in the container's network namespace: this machine's, or a helper container's."""
        if self.url is not None:
            self.run("run", "--rm", "--network", f"container:{container}", "--cap-add", "NET_ADMIN",
                     "--entrypoint", "", self.helper, *argv)
            return
        pid = self.pid(container)
        if pid <= 0:
            raise ClusterError(f"{container} is not running")
        done = subprocess.run(["nsenter", "-t", str(pid), "-n", *argv], capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise ClusterError(f"in {container}'s network namespace, {' '.join(argv)}: {done.stderr.strip()}")

    def _iptables(self) -> str:
        return iptables() if self.url is None else "iptables"

    def cut(self, container: str, direction: str = "both") -> None:
        """Drop what the container receives ("in"), sends ("out"), or both, on its eth0 (loopback untouched)."""
        ipt = self._iptables()
        if direction in ("in", "both"):
            self.in_netns(container, ipt, "-A", "INPUT", "-i", "eth0", "-j", "DROP")
        if direction in ("out", "both"):
            self.in_netns(container, ipt, "-A", "OUTPUT", "-o", "eth0", "-j", "DROP")

    def lossy(self, container: str, probability: float) -> None:
        ipt = self._iptables()
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self.in_netns(container, ipt, "-A", chain, flag, "eth0", "-m", "statistic", "--mode", "random",
                          "--probability", f"{probability:g}", "-j", "DROP")

    def heal(self, container: str) -> None:
        """Remove every rule a cut or loss added (a container that is gone has none)."""
        if self.pid(container) <= 0:
            return
        for chain in ("INPUT", "OUTPUT"):
            self.in_netns(container, self._iptables(), "-F", chain)

    def containers(self, project: str, service: str | None = None) -> list[str]:
        """Ids of the compose project's containers (of one service), running or not."""
        filters = ["--filter", f"label=com.docker.compose.project={project}"]
        if service is not None:
            filters += ["--filter", f"label=com.docker.compose.service={service}"]
        return self.run("ps", "-a", "-q", *filters).split()

    def remove(self, *containers: str) -> None:
        """Remove the containers, running or not; one call each (Podman 4.3 removes none of a list that names
        one it does not have, and says nothing)."""
        for container in containers:
            self.run("rm", "-f", container, timeout=120, check=False)


def _answers(path: Path) -> bool:
    """Whether a Docker-API server answers /_ping on the unix socket."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2.0)
            s.connect(str(path))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: d\r\n\r\n")
            return b" 200 " in s.recv(256)
    except OSError:
        return False


def compose_command() -> list[str]:
    """docker-compose (Debian's, v1), else the `docker compose` plugin."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    raise MissingBinary(f"neither docker-compose nor `docker compose` is installed. Fix: {PODMAN_FIX}")


class ComposeCluster:
    """The compose project (cluster/docker-compose.yml, with the local images' override when `local`, then any
    `overrides`, e.g. cluster/docker-compose.swarm.yml)."""

    def __init__(self, *, local: bool = True, project: str = compose.PROJECT, tool: str | None = None,
                 overrides: Sequence[Path] = ()) -> None:
        self.engine = Engine(tool)
        self.project = project
        self.files = [compose.COMPOSE_FILE, *([compose.LOCAL_FILE] if local else []), *overrides]
        self.local = local
        self._service: subprocess.Popen[bytes] | None = None
        self._own_network = False
        self._composed = False  # compose made containers and a network: `compose down` removes them

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.engine.podman and "DOCKER_HOST" not in env:
            env["DOCKER_HOST"] = f"unix://{PODMAN_SOCKET}"
        return env

    def api(self, timeout: float = 30.0) -> None:
        """Make sure docker-compose can reach the engine: with Podman, start its API service if none answers."""
        if not self.engine.podman or "DOCKER_HOST" in os.environ or _answers(PODMAN_SOCKET):
            return
        PODMAN_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        self._service = subprocess.Popen([self.engine.tool, "system", "service", "--time=0",
                                          f"unix://{PODMAN_SOCKET}"], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: _answers(PODMAN_SOCKET), timeout, 0.1, what="Podman's Docker-API service")

    def compose(self, *args: str, timeout: float = 600.0) -> str:
        argv = [*compose_command(), "-p", self.project, *(w for f in self.files for w in ("-f", str(f))), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._env())
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(argv)}:\n{(done.stdout + done.stderr).strip()[-3000:]}")
        return done.stdout

    def up(self, services: Sequence[str] = tuple(SERVICES), timeout: float = 180.0) -> None:
        """Start the services' containers (etcd1..3 for "etcd", ...) and wait until each serves as a group."""
        names = [n for s in services for n in SERVICES[s]]
        if not names:  # members only (Raft): the network alone, made by the engine (compose would start all)
            if self.engine.run("network", "ls", "-q", "--filter", f"name=^{compose.NETWORK}$").strip() == "":
                self.engine.run("network", "create", compose.NETWORK)
                self._own_network = True
            return
        self.api()
        self._composed = True
        self.compose("up", "-d", "--no-build", *names)
        self.probe(services, timeout)

    def probe(self, services: Sequence[str], timeout: float) -> None:
        """Wait, from a container on the compose network, until every service answers as a whole group."""
        image = "elect-member:local" if self.local else "elect-member:latest"
        argv = [self.engine.tool, "run", "--rm", "--network", compose.NETWORK, "--entrypoint", "python3", image,
                "-m", "elect_cluster.containers", "probe", ",".join(services), "--timeout", str(timeout)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60)
        if done.returncode != 0:
            raise ClusterError(f"the compose cluster did not come up ({', '.join(services)}):\n"
                               f"{(done.stdout + done.stderr).strip()[-2000:]}")

    def container(self, service: str) -> str:
        """The id of a compose service's container (etcd1, zk2, ...)."""
        found = self.engine.containers(self.project, service)
        if not found:
            raise ClusterError(f"the compose project {self.project} has no {service} container")
        return found[0]

    def down(self) -> None:
        """Remove the project's containers and network; stop the API service if this object started it."""
        try:
            if self._composed:
                with contextlib.suppress(ClusterError):
                    self.compose("down", "-v", "--remove-orphans", "-t", "5", timeout=300)
                self._composed = False
            self.engine.remove(*self.engine.containers(self.project))
            if self._own_network:
                self.engine.run("network", "rm", compose.NETWORK, check=False)
                self._own_network = False
        finally:
            if self._service is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._service.pid, signal.SIGTERM)
                try:
                    self._service.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(self._service.pid, signal.SIGKILL)
                    self._service.wait()
                self._service = None


# --- run inside a container on the compose network ---------------------------------------------------------

def _probe(services: Sequence[str], timeout: float) -> None:
    from .apache_kafka import ApacheKafkaService
    from .etcd import EtcdService
    from .process import ProcessSpec
    from .service import Member, Service
    from .zookeeper import ZooKeeperService

    kinds: dict[str, tuple[Service, int]] = {"etcd": (EtcdService(), 2379), "zookeeper": (ZooKeeperService(), 2181),
                                             "kafka": (ApacheKafkaService(), 9092)}
    nothing = ProcessSpec(argv=("-",), cwd="/", log="/dev/null")  # the members run elsewhere: never started here

    def serves(kind: Service, members: list[Member]) -> bool:
        for m in members:
            kind.probe(m, 2.0)
        kind.probe_group(members, 2.0)
        return True

    for service in services:
        kind, port = kinds[service]
        members = [Member(service, i, host, {"client": port, "listen": port}, nothing)
                   for i, host in enumerate(SERVICES[service])]
        try:
            wait_until(functools.partial(serves, kind, members), timeout, 0.5,
                       what=f"{service} ({', '.join(SERVICES[service])})", ignore=(NotReady, OSError))
        except WaitTimeout as exc:
            raise SystemExit(str(exc)) from exc
        print(f"{service}: serving", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elect_cluster.containers")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe", help="wait until the named services serve (run on the compose network)")
    probe.add_argument("services", help="comma-separated: kafka,etcd,zookeeper")
    probe.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    _probe([s for s in args.services.split(",") if s], args.timeout)
    print(json.dumps({"serving": args.services}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
