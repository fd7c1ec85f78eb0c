"""Hosts on one machine: a network namespace per member, joined by a bridge, with real network cuts.

Each host gets its own namespace, a veth pair whose outer end hangs on a bridge in the root namespace,
and an address on a private /24 that exists only inside this machine. The bridge's own address is where
the root namespace (the infrastructure: broker, etcd, ZooKeeper) is reached from the hosts. A cut takes
a host's veth down, so it loses the other hosts *and* the infrastructure at once — the fault a
partitioned machine sees — and a heal brings the link back. Everything carries a name prefix, so
`cleanup_stale()` can remove what a crashed run left behind. Needs root and iproute2.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from types import TracebackType
from typing import Self

PREFIX = "el"  # interface and namespace names start with this (Linux allows 15 characters)


class NetnsError(RuntimeError):
    """An `ip` command failed; the message carries its stderr."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def _used_subnets() -> set[int]:
    out = _ip("-o", "-4", "addr", "show").stdout
    return {int(m.group(1)) for m in re.finditer(r"inet 10\.213\.(\d+)\.", out)}


class Hosts:
    """A virtual LAN of named hosts; use as a context manager so it is torn down even on failure."""

    def __init__(self, names: Sequence[str]) -> None:
        if len(set(names)) != len(names) or not names:
            raise ValueError(f"host names must be distinct and at least one: {names}")
        self.names = list(names)
        self.subnet: int | None = None
        self._created: list[tuple[str, str]] = []  # ("netns"|"link", name), for teardown

    # -- naming
    @property
    def _tag(self) -> str:
        assert self.subnet is not None, "hosts are not up"
        return f"{PREFIX}{self.subnet}"

    @property
    def bridge(self) -> str:
        return f"{self._tag}br"

    @property
    def gateway(self) -> str:
        """The root namespace's address on the LAN: where hosts reach the infrastructure."""
        return f"10.213.{self.subnet}.1"

    def namespace(self, name: str) -> str:
        return f"{self._tag}-{name}"

    def _veth(self, name: str) -> str:
        return f"{self._tag}v{self.names.index(name)}"

    def address(self, name: str) -> str:
        return f"10.213.{self.subnet}.{self.names.index(name) + 2}"

    def exec_prefix(self, name: str) -> list[str]:
        """Prepend to a command to run it on host `name`."""
        return ["ip", "netns", "exec", self.namespace(name)]

    # -- lifecycle
    def up(self) -> Self:
        used = _used_subnets()
        self.subnet = next(n for n in range(10, 250) if n not in used)
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._created.append(("link", self.bridge))
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for name in self.names:
                ns, veth = self.namespace(name), self._veth(name)
                _ip("netns", "add", ns)
                self._created.append(("netns", ns))
                _ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
                self._created.append(("link", veth))
                _ip("link", "set", f"{veth}p", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", f"{veth}p", "name", "eth0")
                _ip("-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "route", "add", "default", "via", self.gateway)
        except BaseException:
            self.down()
            raise
        return self

    def cut(self, name: str) -> None:
        """Isolate host `name` from every other host and from the infrastructure."""
        _ip("link", "set", self._veth(name), "down")

    def heal(self, name: str) -> None:
        _ip("link", "set", self._veth(name), "up")

    def sent(self, name: str) -> tuple[int, int]:
        """(packets, bytes) host `name` has sent on its link so far: the harness's own count of its load."""
        stats = json.loads(_ip("-n", self.namespace(name), "-s", "-j", "link", "show", "eth0").stdout)[0]
        tx = stats["stats64"]["tx"]
        return int(tx["packets"]), int(tx["bytes"])

    def down(self) -> None:
        """Remove everything this LAN created (idempotent; deleting a veth end deletes its peer)."""
        for kind, name in reversed(self._created):
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        self._created.clear()

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()


def leftovers() -> list[str]:
    """Namespaces and links with this module's prefix that still exist."""
    names = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", _ip("-o", "link", "show").stdout, flags=re.M)
    pattern = re.compile(rf"^{PREFIX}\d+(-|br$|v\d+$)")
    return [n for n in names + links if pattern.match(n)]


def cleanup_stale() -> list[str]:
    """Delete what a crashed run left behind; returns the names removed."""
    removed = []
    for name in leftovers():
        if _ip("netns", "del", name, check=False).returncode == 0 or \
                _ip("link", "del", name, check=False).returncode == 0:
            removed.append(name)
    return removed
