"""Where member processes run, and how faults reach them.

The trial logic is the same everywhere; only these few operations differ:
- `LocalPlacement`: processes on this machine; faults are signals.
- `NetnsPlacement`: each member on its own network-namespace host; network faults act on its link (a cut,
  a one-way cut, loss, a slow link).
- `DockerPlacement`: each member in a container of cluster/docker-compose.yml; faults go through the
  container engine (`docker kill`, `docker pause`, `docker network disconnect`); the lesser network
  faults and restarts are not done there.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from elect_cluster.netns import Direction, Hosts

Runner = Callable[[Sequence[str]], None]


class Signalled(Protocol):
    """A process faults reach: an `elect member` process (elect_bench.members), or any that runs like one."""

    member_id: str

    def kill(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def signal(self, signum: int) -> None: ...


@runtime_checkable
class Restartable(Signalled, Protocol):
    """A process that can be started again as a new one with the same command line (and so the same state on
    disk): `elect_bench.members.MemberProcess`."""

    @property
    def alive(self) -> bool: ...
    def restart(self) -> None: ...


def _run(argv: Sequence[str]) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=60)


class Placement(Protocol):
    can_cut: bool
    python: str  # the interpreter that runs `-m elect member` where the member runs

    def prefix(self, member: str) -> list[str]: ...
    def address(self, member: str) -> str: ...
    def kill(self, proc: Signalled) -> None: ...
    def pause(self, proc: Signalled) -> None: ...
    def resume(self, proc: Signalled) -> None: ...
    def stop(self, proc: Signalled) -> None: ...
    def cut(self, member: str) -> None: ...
    def heal(self, member: str) -> None:
        """Undo every network fault to the member's host (a cut, a one-way cut, loss, a slow link)."""
        ...
    def block(self, member: str, direction: Direction) -> None: ...
    def lossy(self, member: str, probability: float) -> None: ...
    def slow(self, member: str) -> None: ...
    def restart(self, proc: Signalled) -> None:
        """Start the process again if it is not running (a no-op for a live one); TypeError if it cannot be."""
        ...
    def sent(self, member: str) -> tuple[int, int] | None:
        """(packets, bytes) the member's host has sent so far, or None where it cannot be counted."""
        ...


class LocalPlacement:
    """Members as plain local processes; no network cuts."""

    can_cut = False
    python = sys.executable

    def prefix(self, member: str) -> list[str]:
        return []

    def address(self, member: str) -> str:
        return "127.0.0.1"

    def kill(self, proc: Signalled) -> None:
        proc.kill()

    def pause(self, proc: Signalled) -> None:
        proc.pause()

    def resume(self, proc: Signalled) -> None:
        proc.resume()

    def stop(self, proc: Signalled) -> None:
        proc.signal(signal.SIGTERM)

    def restart(self, proc: Signalled) -> None:
        if not isinstance(proc, Restartable):
            raise TypeError(f"{proc.member_id} cannot be started again")
        if not proc.alive:
            proc.restart()

    def cut(self, member: str) -> None:
        raise RuntimeError("network faults (cut, cut-in, cut-out, lossy, slow) need members on network-namespace "
                           "hosts (run as root; the harness sets them up when a scenario has such a fault)")

    heal = cut

    def block(self, member: str, direction: Direction) -> None:
        self.cut(member)

    def lossy(self, member: str, probability: float) -> None:
        self.cut(member)

    def slow(self, member: str) -> None:
        self.cut(member)

    def sent(self, member: str) -> tuple[int, int] | None:
        return None


class NetnsPlacement(LocalPlacement):
    """Members on their own network-namespace hosts; cut/heal act on the host's link."""

    can_cut = True

    def __init__(self, hosts: Hosts) -> None:
        self.hosts = hosts

    def prefix(self, member: str) -> list[str]:
        return self.hosts.exec_prefix(member)

    def address(self, member: str) -> str:
        return self.hosts.address(member)

    def cut(self, member: str) -> None:
        self.hosts.cut(member)

    def heal(self, member: str) -> None:
        self.hosts.heal(member)

    def block(self, member: str, direction: Direction) -> None:
        self.hosts.block(member, direction)

    def lossy(self, member: str, probability: float) -> None:
        self.hosts.lossy(member, probability)

    def slow(self, member: str) -> None:
        self.hosts.slow(member)

    def sent(self, member: str) -> tuple[int, int] | None:
        return self.hosts.sent(member)


class DockerPlacement:
    """Members in containers of a compose project; the local process is the `docker compose run` client."""

    can_cut = True
    python = "python3"

    def __init__(self, compose_file: str, project: str = "elect", network: str = "elect_net",
                 runner: Runner = _run) -> None:
        self.compose = ["docker", "compose", "-f", compose_file, "-p", project]
        self.project = project
        self.network = network
        self.run = runner

    def container(self, member: str) -> str:
        return f"{self.project}-member-{member}"

    def prefix(self, member: str) -> list[str]:
        return [*self.compose, "run", "--rm", "-T", "--name", self.container(member), "--entrypoint", "", "member"]

    def address(self, member: str) -> str:
        return self.container(member)  # container names resolve on the compose network

    def kill(self, proc: Signalled) -> None:
        self.run(["docker", "kill", "--signal", "KILL", self.container(proc.member_id)])

    def pause(self, proc: Signalled) -> None:
        self.run(["docker", "pause", self.container(proc.member_id)])

    def resume(self, proc: Signalled) -> None:
        self.run(["docker", "unpause", self.container(proc.member_id)])

    def stop(self, proc: Signalled) -> None:
        self.run(["docker", "kill", "--signal", "TERM", self.container(proc.member_id)])

    def cut(self, member: str) -> None:
        self.run(["docker", "network", "disconnect", "--force", self.network, self.container(member)])

    def heal(self, member: str) -> None:
        self.run(["docker", "network", "connect", self.network, self.container(member)])

    def block(self, member: str, direction: Direction) -> None:
        raise NotImplementedError("one-way cuts are not done with containers (they would need iptables and "
                                  "NET_ADMIN in each member's container): use the local placement")

    def lossy(self, member: str, probability: float) -> None:
        raise NotImplementedError("packet loss is not done with containers (it would need iptables and NET_ADMIN "
                                  "in each member's container): use the local placement")

    def slow(self, member: str) -> None:
        raise NotImplementedError("a slow link is not done with containers (it would need tc and NET_ADMIN in each "
                                  "member's container): use the local placement")

    def restart(self, proc: Signalled) -> None:
        raise NotImplementedError("restarting a member is not done with containers (`docker compose run --rm` "
                                  "would have to wait for the killed one's removal): use the local placement")

    def sent(self, member: str) -> tuple[int, int] | None:
        return None
