"""What every local service (Kafka broker, etcd, ZooKeeper) provides, so LocalCluster stays generic."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import MissingBinary
from .process import ProcessId, ProcessSpec


@dataclass
class Member:
    """One process of a service: where it listens, how to start it, and (when running) which pid it has."""

    service: str
    index: int
    host: str
    ports: dict[str, int]  # "client" is the port clients use; others are peer/election ports
    spec: ProcessSpec
    process: ProcessId | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        """``host:port`` for clients."""
        return f"{self.host}:{self.ports['client']}"

    @property
    def label(self) -> str:
        return f"{self.service}[{self.index}]"

    def to_dict(self) -> dict[str, Any]:
        return {"service": self.service, "index": self.index, "host": self.host, "ports": dict(self.ports),
                "spec": self.spec.to_dict(), "extra": dict(self.extra),
                "process": None if self.process is None else
                {"pid": self.process.pid, "start_time": self.process.start_time}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        proc = data.get("process")
        return cls(service=str(data["service"]), index=int(data["index"]), host=str(data["host"]),
                   ports={str(k): int(v) for k, v in data["ports"].items()},
                   spec=ProcessSpec.from_dict(data["spec"]),
                   process=None if proc is None else ProcessId(int(proc["pid"]), int(proc["start_time"])),
                   extra={str(k): str(v) for k, v in data.get("extra", {}).items()})


class Service(Protocol):
    """A kind of infrastructure that LocalCluster can start, probe and ask for its leader."""

    name: str
    max_members: int

    def preflight(self) -> None:
        """Raise MissingBinary (naming the fix) if a needed program is not installed."""

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        """Choose ports, create data dirs and config files under ``root``; start nothing."""

    def probe(self, member: Member, timeout: float) -> str:
        """Speak the wire protocol to one member; return its role if it serves, else raise NotReady."""

    def probe_group(self, members: list[Member], timeout: float) -> None:
        """Raise NotReady unless the members together form one serving cluster (e.g. with one leader)."""

    def leader(self, members: list[Member], timeout: float) -> int | None:
        """Index of the member that leads now according to the service itself, or None."""

    def configure(self, members: list[Member], timeout: float) -> None:
        """Once every member serves: what only a running service can be told (e.g. etcd's users), else nothing."""


def find_program(name: str, env_var: str, fix: str, *candidates: str) -> str:
    """Locate an executable: ``$env_var`` if set, else PATH, else fixed candidates; else MissingBinary."""
    override = os.environ.get(env_var)
    if override:
        if os.access(override, os.X_OK):
            return override
        raise MissingBinary(f"{env_var}={override} is not an executable file. Fix: {fix}")
    found = shutil.which(name)
    if found:
        return found
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    raise MissingBinary(f"{name} not found (looked at ${env_var}, PATH, {', '.join(candidates) or '-'}). "
                        f"Fix: {fix}")
