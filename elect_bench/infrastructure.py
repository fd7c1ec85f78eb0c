"""How the harness's infrastructure faults reach the infrastructure itself: `infra` kills one member of
a service (the broker, an etcd member, a ZooKeeper node) and later starts it again; `infra-pause`
freezes it (SIGSTOP / container pause) and later lets it go on, its state intact.

The victim is the member the service's own protocol names as leader (etcd's status, ZooKeeper's
`srvr`), because losing the leader is the case that costs an election inside the store; with one
member (the local Kafka-protocol broker) that member is the whole service. The trial logic is the
same for local processes and for containers; only these two operations differ.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from elect_cluster.local import LocalCluster

Runner = Callable[[Sequence[str]], None]


@dataclass(frozen=True)
class Victim:
    service: str
    index: int

    @property
    def label(self) -> str:
        return f"{self.service}[{self.index}]"


class InfraFaults(Protocol):
    def members(self, service: str) -> int:
        """How many members the service has (1 means a kill is a whole outage)."""
        ...

    def kill(self, service: str) -> Victim:
        """SIGKILL the service's leader member (or its only one) and say which it was."""
        ...

    def restart(self, victim: Victim, timeout: float) -> None:
        """Start the killed member again with its ports and data (locally: and wait until it serves)."""
        ...

    def pause(self, service: str) -> Victim:
        """Freeze the service's leader member (or its only one): sockets open, nothing answers."""
        ...

    def resume(self, victim: Victim) -> None:
        ...


class LocalInfra:
    """Faults on the LocalCluster this run started."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def members(self, service: str) -> int:
        return self.cluster.counts.get(service, 0)

    def kill(self, service: str) -> Victim:
        victim = self._leader(service)
        self.cluster.kill(service, victim.index)
        return victim

    def restart(self, victim: Victim, timeout: float) -> None:
        self.cluster.start_member(victim.service, victim.index, timeout=timeout)

    def pause(self, service: str) -> Victim:
        victim = self._leader(service)
        self.cluster.pause_member(service, victim.index)
        return victim

    def resume(self, victim: Victim) -> None:
        self.cluster.resume_member(victim.service, victim.index)

    def _leader(self, service: str) -> Victim:
        if service not in self.cluster.counts:
            raise ValueError(f"this run has no {service}")
        index = self.cluster.leader_index(service)
        return Victim(service, 0 if index is None else index)


def _run(argv: Sequence[str]) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=60)


class DockerInfra:
    """Faults on the compose project's infrastructure containers (kafka1..3, etcd1..3, zk1..3).

    The victim is the first member of the service: asking each store for its leader from outside the
    compose network is not always possible, and with three members any one costs the same quorum.
    """

    SERVICES: ClassVar[dict[str, str]] = {"kafka": "kafka", "etcd": "etcd", "zookeeper": "zk"}

    def __init__(self, project: str = "elect", runner: Runner = _run) -> None:
        self.project = project
        self.run = runner

    def container(self, victim: Victim) -> str:
        return f"{self.project}-{self.SERVICES[victim.service]}{victim.index + 1}-1"

    def members(self, service: str) -> int:
        return 3 if service in self.SERVICES else 0

    def kill(self, service: str) -> Victim:
        victim = self._first(service)
        self.run(["docker", "kill", "--signal", "KILL", self.container(victim)])
        return victim

    def restart(self, victim: Victim, timeout: float) -> None:
        self.run(["docker", "start", self.container(victim)])

    def pause(self, service: str) -> Victim:
        victim = self._first(service)
        self.run(["docker", "pause", self.container(victim)])
        return victim

    def resume(self, victim: Victim) -> None:
        self.run(["docker", "unpause", self.container(victim)])

    def _first(self, service: str) -> Victim:
        if service not in self.SERVICES:
            raise ValueError(f"the compose project has no {service}")
        return Victim(service, 0)
