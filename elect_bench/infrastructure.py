"""How the harness's infrastructure faults reach the infrastructure itself: `infra` kills one member of
a service (the broker, an etcd member, a ZooKeeper node) and later starts it again; `infra-pause`
freezes it (SIGSTOP / container pause) and later lets it go on, its state intact.

The victim is the member the service's own protocol names as leader (etcd's status, ZooKeeper's
`srvr`), because losing the leader is the case that costs an election inside the store; with one
member (the local Kafka-protocol broker) that member is the whole service. The trial logic is the
same for local processes and for containers; only these two operations differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from elect_cluster.local import LocalCluster

if TYPE_CHECKING:
    from elect_cluster.containers import Engine


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


class DockerInfra:
    """Faults on the compose project's infrastructure containers (kafka1..3, etcd1..3, zk1..3), through the
    container engine; a container is found by its compose labels (project, service), which both engines and
    both compose versions set, whatever they name it.

    The victim is the first member of the service: asking each store for its leader from outside the
    compose network is not always possible, and with three members any one costs the same quorum.
    """

    SERVICES: ClassVar[dict[str, str]] = {"kafka": "kafka", "etcd": "etcd", "zookeeper": "zk"}

    def __init__(self, project: str = "elect", engine: Engine | None = None) -> None:
        from elect_cluster.containers import Engine as _Engine

        self.project = project
        self.engine = engine or _Engine()

    def container(self, victim: Victim) -> str:
        service = f"{self.SERVICES[victim.service]}{victim.index + 1}"
        found = self.engine.containers(self.project, service)
        if not found:
            raise ValueError(f"the compose project {self.project} has no {service} container")
        return found[0]

    def members(self, service: str) -> int:
        return 3 if service in self.SERVICES else 0

    def kill(self, service: str) -> Victim:
        victim = self._first(service)
        self.engine.run("kill", "--signal", "KILL", self.container(victim))
        return victim

    def restart(self, victim: Victim, timeout: float) -> None:
        self.engine.run("start", self.container(victim), timeout=timeout)

    def pause(self, service: str) -> Victim:
        victim = self._first(service)
        self.engine.run("pause", self.container(victim))
        return victim

    def resume(self, victim: Victim) -> None:
        self.engine.run("unpause", self.container(victim))

    def _first(self, service: str) -> Victim:
        if service not in self.SERVICES:
            raise ValueError(f"the compose project has no {service}")
        return Victim(service, 0)
