"""Where member processes run, and how faults reach them.

The trial logic is the same everywhere; only these few operations differ:
- `LocalPlacement`: processes on this machine; faults are signals.
- `NetnsPlacement`: each member on its own network-namespace host; network faults act on its link (a cut,
  a one-way cut, loss, a slow link).
- `DockerPlacement`: each member in a container on the compose cluster's network; faults go through the
  container engine (kill, pause) and iptables in the container's network namespace (cuts, loss); a slow
  link and restarts are not done there.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from elect_cluster.netns import Direction, Hosts

if TYPE_CHECKING:
    from elect_cluster.containers import Engine


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


class Placement(Protocol):
    can_cut: bool
    python: str  # the interpreter that runs `-m elect member` where the member runs
    #: members run on other kernels than the harness: their lines' `mono` are carried onto the harness's clock
    #: (elect_bench.members.ClockAlignment); False where one kernel's monotonic clock serves all
    separate_clocks: bool

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
    def process_id(self, proc: Signalled, local_pid: int) -> int:
        """The pid, on this machine, of the member's own process (its CPU and memory are read there), given the
        pid of the process the harness started (the member itself, or the engine's client)."""
        ...


class LocalPlacement:
    """Members as plain local processes; no network cuts."""

    can_cut = False
    python = sys.executable
    separate_clocks = False

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

    def process_id(self, proc: Signalled, local_pid: int) -> int:
        return local_pid


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
    """Members in containers on the compose project's network, one container per member (`podman run -i` or
    `docker run -i`: the local process is the engine's client, whose stdin and stdout are the member's); faults
    go through the engine (kill, pause) and through iptables in the member's network namespace (cut, one-way
    cut, loss). The trial's work folder is mounted at the same path, so a member's state on disk (Raft's term
    and vote) is where the harness put it. A member is reached by its container's name on the network.

    `hosts` puts members on other hosts' engines (member id -> engine URL, e.g. ssh://user@host): there the
    network must span the hosts (an attachable overlay network), the image must be on each host, state on disk
    stays on that host, and the members' clocks are carried onto this machine's (`separate_clocks`).
    """

    can_cut = True
    python = "python3"

    def __init__(self, workdir: str, *, image: str = "elect-member:local", project: str = "elect",
                 network: str = "elect_net", engine: Engine | None = None,
                 hosts: Mapping[str, str] | None = None) -> None:
        from elect_cluster.containers import Engine as _Engine

        self.engine = engine or _Engine()
        self.engines = {m: _Engine(self.engine.tool, url, helper=image) for m, url in (hosts or {}).items()}
        self.separate_clocks = bool(self.engines)  # another host: another kernel, another monotonic clock
        self.workdir = workdir
        self.image = image
        self.project = project
        self.network = network
        self._named: dict[str, Engine] = {}
        self._image_id: str | None = None
        self._dns: dict[int, list[str]] = {}  # per engine (by id): the resolver options its members get

    def container(self, member: str) -> str:
        return f"{self.project}-member-{member}"

    def engine_of(self, member: str) -> Engine:
        return self.engines.get(member, self.engine)

    def prefix(self, member: str) -> list[str]:
        name, engine = self.container(member), self.engine_of(member)
        engine.remove(name)  # a container left by a client that was killed would hold the name
        self._named[name] = engine
        image = self.image
        if engine.url is None:  # pinned for the run: an image built again meanwhile does not change members
            if self._image_id is None:
                found = engine.run("image", "inspect", "--format", "{{.Id}}", self.image, check=False).strip()
                self._image_id = found or self.image
            image = self._image_id
        mount = ["-v", f"{self.workdir}:{self.workdir}"] if engine.url is None else []
        return [*engine.command, "run", "--rm", "-i", "--init", "--name", name, "--hostname", name,
                "--network", self.network, "--label", f"com.docker.compose.project={self.project}",
                "--label", "org.elect.role=member", "-e", "PYTHONUNBUFFERED=1", *self._resolver(engine), *mount,
                "--entrypoint", "", image]

    def _resolver(self, engine: Engine) -> list[str]:
        """On Podman, members find the compose services (brokers, stores) in their /etc/hosts, and ask the
        network's own DNS server alone, again after 1 s rather than 5 s, for the rest (the other members).

        Podman's aardvark-dns (1.4, Debian bookworm) tears its sockets down and up again on every reload, which
        each member container started or removed causes (containers/aardvark-dns#389), and was seen not to
        answer for up to 90 s at a time: a query went unanswered, the container's resolver turned to the next
        nameserver Podman lists (the host's), which answered "no such name" for `kafka2`, and a NELI member
        that had to reach a partition's broker for the first time then failed over 25-90 s late. The services'
        addresses are read once per run: Podman keeps a container's address across stop and start (the
        infrastructure faults), until the container is removed. Docker's embedded DNS needs none of this."""
        if not engine.podman:
            return []
        if id(engine) not in self._dns:
            gateway = engine.run("network", "inspect", "--format", "{{range .Subnets}}{{.Gateway}} {{end}}",
                                 self.network, check=False).split()
            self._dns[id(engine)] = [*self._service_hosts(engine), *(x for g in gateway[:1] for x in ("--dns", g)),
                                     "--dns-option", "timeout:1", "--dns-option", "attempts:5"]
        return self._dns[id(engine)]

    def _service_hosts(self, engine: Engine) -> list[str]:
        """`--add-host SERVICE:ADDRESS` for each running compose service of the project on the member network."""
        ids = engine.run("ps", "-q", "--filter", f"label=com.docker.compose.project={self.project}",
                         check=False).split()
        if not ids:
            return []
        shown = engine.run("inspect", "--format", '{{index .Config.Labels "com.docker.compose.service"}} '
                           "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", *ids, check=False)
        hosts = []
        for line in shown.splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] != "<no":  # members carry no service label
                hosts += ["--add-host", f"{words[0]}:{words[1]}"]
        return hosts

    def address(self, member: str) -> str:
        return self.container(member)  # container names resolve on the compose network

    def kill(self, proc: Signalled) -> None:
        self.engine_of(proc.member_id).run("kill", "--signal", "KILL", self.container(proc.member_id))

    def pause(self, proc: Signalled) -> None:
        self.engine_of(proc.member_id).run("pause", self.container(proc.member_id))

    def resume(self, proc: Signalled) -> None:  # a no-op on a running one
        self.engine_of(proc.member_id).run("unpause", self.container(proc.member_id), check=False)

    def stop(self, proc: Signalled) -> None:
        self.engine_of(proc.member_id).run("kill", "--signal", "TERM", self.container(proc.member_id))

    def cut(self, member: str) -> None:
        self.engine_of(member).cut(self.container(member))

    def heal(self, member: str) -> None:
        self.engine_of(member).heal(self.container(member))

    def block(self, member: str, direction: Direction) -> None:
        self.engine_of(member).cut(self.container(member), direction)

    def lossy(self, member: str, probability: float) -> None:
        self.engine_of(member).lossy(self.container(member), probability)

    def slow(self, member: str) -> None:
        raise NotImplementedError("a slow link is not done with containers (it needs a token bucket on both ends "
                                  "of the member's veth): use the local placement")

    def restart(self, proc: Signalled) -> None:
        raise NotImplementedError("restarting a member is not done with containers (`run --rm` would have to "
                                  "wait for the killed one's removal): use the local placement")

    def sent(self, member: str) -> tuple[int, int] | None:
        return None

    def process_id(self, proc: Signalled, local_pid: int) -> int:
        """The member under the container's init (`--init`), as this machine numbers it; 0 when it is gone or on
        another host."""
        if proc.member_id in self.engines:
            return 0
        try:
            init = self.engine.pid(self.container(proc.member_id))
            children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        except (OSError, ValueError, RuntimeError):
            return 0
        return int(children[0]) if init > 0 and children else 0

    def close(self) -> None:
        """Remove every member container this placement named (a client killed hard leaves its container)."""
        for name, engine in sorted(self._named.items()):
            engine.remove(name)
        self._named.clear()
