"""Hosts on one machine: a network namespace per member, joined by a bridge, with real network cuts.

Each host gets its own namespace, a veth pair whose outer end hangs on a bridge in the root namespace,
and an address on a private /24 that exists only inside this machine. The bridge's own address is where
the root namespace (the infrastructure: broker, etcd, ZooKeeper) is reached from the hosts. A cut takes
a host's veth down, so it loses the other hosts *and* the infrastructure at once — the fault a
partitioned machine sees — and a heal brings the link back. Lesser faults to one host's link: a one-way
cut, random loss (iptables rules inside the host's namespace, on `eth0` only, so loopback is untouched),
and a low-bandwidth link (a `tbf` qdisc on both ends of its veth; this kernel has no `netem`, so no
latency injection). A heal removes all of them. Everything carries a name prefix, so `cleanup_stale()`
can remove what a crashed run left behind. Needs root, iproute2 and iptables.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from types import TracebackType
from typing import Literal, Self

PREFIX = "el"  # interface and namespace names start with this (Linux allows 15 characters)

Direction = Literal["in", "out"]

#: A slow link: 64 kbit/s each way, so a few hundred bytes queue for tens of ms; a packet that would wait
#: longer than `latency` in the queue is dropped, as on a congested link.
SLOW = {"rate": "64kbit", "burst": "2kb", "latency": "300ms"}


class NetnsError(RuntimeError):
    """An `ip`, `iptables` or `tc` command failed; the message carries its stderr."""


def iptables() -> str:
    """The iptables command rules are added with: `iptables-legacy` where installed (it needs no nf_tables in
    the kernel), else `iptables`."""
    for name in ("iptables-legacy", "iptables"):
        if found := shutil.which(name):
            return found
    raise NetnsError("iptables is missing: install the Debian package iptables (./setup does)")


def _run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True)
    if check and result.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", *args], check)


#: Namespaces and links made by this process and not yet removed (`leftovers(mine=True)`).
_MADE: set[str] = set()


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
        self._filtered: set[str] = set()  # hosts with iptables rules in their namespace
        self._shaped: set[str] = set()  # hosts with a tbf qdisc on their link

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
        for subnet in (n for n in range(10, 250) if n not in used):
            self.subnet = subnet
            added = _ip("link", "add", self.bridge, "type", "bridge", check=False)
            if added.returncode == 0:
                break
            if "exists" not in added.stderr:  # not a race with another run for this subnet: a real failure
                raise NetnsError(f"ip link add {self.bridge}: {added.stderr.strip()}")
        else:
            raise NetnsError("no free subnet for network-namespace hosts (10.213.10-249.0/24 all in use)")
        self._created.append(("link", self.bridge))
        _MADE.add(self.bridge)
        try:
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for name in self.names:
                ns, veth = self.namespace(name), self._veth(name)
                _ip("netns", "add", ns)
                self._created.append(("netns", ns))
                _MADE.add(ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
                self._created.append(("link", veth))
                _MADE.add(veth)
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

    def block(self, name: str, direction: Direction) -> None:
        """One-way cut: drop what host `name` sends on its link ("out": it hears everyone, nobody hears it)
        or what it receives ("in": it is heard, it hears nobody). Packets a rule drops on the way out
        fail locally (a UDP send gets EPERM; TCP just retransmits), the way in they vanish."""
        chain, flag = {"out": ("OUTPUT", "-o"), "in": ("INPUT", "-i")}[direction]
        self._filter(name, [chain, flag, "eth0", "-j", "DROP"])

    def lossy(self, name: str, probability: float) -> None:
        """Drop each packet host `name` sends or receives on its link with `probability`."""
        if not 0 < probability <= 1:
            raise ValueError(f"a loss probability is in (0, 1], got {probability}")
        for chain, flag in (("INPUT", "-i"), ("OUTPUT", "-o")):
            self._filter(name, [chain, flag, "eth0", "-m", "statistic", "--mode", "random",
                                "--probability", f"{probability:g}", "-j", "DROP"])

    def slow(self, name: str) -> None:
        """Make host `name`'s link a low-bandwidth one (`SLOW`) both ways: a token bucket on its own end
        (what it sends) and on the bridge's end (what it receives)."""
        shape = [word for key, value in SLOW.items() for word in (key, value)]
        self._shaped.add(name)
        for where, dev in self._ends(name):
            _run(["tc", *where, "qdisc", "replace", "dev", dev, "root", "tbf", *shape])

    def clear(self, name: str) -> None:
        """Remove every rule and qdisc `block`, `lossy` and `slow` put on host `name` (idempotent)."""
        if name in self._filtered:
            for chain in ("INPUT", "OUTPUT"):  # the namespace is this LAN's own: every rule in it is ours
                _run([*self.exec_prefix(name), iptables(), "-F", chain])
            self._filtered.discard(name)
        if name in self._shaped:
            for where, dev in self._ends(name):
                _run(["tc", *where, "qdisc", "del", "dev", dev, "root"], check=False)  # gone already: fine
            self._shaped.discard(name)

    def heal(self, name: str) -> None:
        """Undo every fault to host `name`'s link: a cut, a one-way cut, loss, a slow link."""
        _ip("link", "set", self._veth(name), "up")
        self.clear(name)

    def _filter(self, name: str, rule: list[str]) -> None:
        self._filtered.add(name)
        _run([*self.exec_prefix(name), iptables(), "-A", *rule])

    def _ends(self, name: str) -> list[tuple[list[str], str]]:
        """Host `name`'s veth ends as (`tc` arguments for where it lives, device): its own, then the bridge's."""
        return [(["-n", self.namespace(name)], "eth0"), ([], self._veth(name))]

    def sent(self, name: str) -> tuple[int, int]:
        """(packets, bytes) host `name` has sent on its link so far: the harness's own count of its load."""
        stats = json.loads(_ip("-n", self.namespace(name), "-s", "-j", "link", "show", "eth0").stdout)[0]
        tx = stats["stats64"]["tx"]
        return int(tx["packets"]), int(tx["bytes"])

    def down(self) -> None:
        """Remove everything this LAN created (idempotent; deleting a veth end deletes its peer, and a
        namespace's rules and qdiscs go with it: clearing them first only makes that explicit)."""
        for host in sorted(self._filtered | self._shaped):
            with contextlib.suppress(NetnsError):  # the namespace going away removes them anyway
                self.clear(host)
        self._filtered.clear()
        self._shaped.clear()
        for kind, name in reversed(self._created):
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
            _MADE.discard(name)
        self._created.clear()

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()


def leftovers(*, mine: bool = False) -> list[str]:
    """Namespaces and links with this module's prefix that still exist; with `mine`, only those this process
    made (another run on the machine may hold its own meanwhile)."""
    names = [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", _ip("-o", "link", "show").stdout, flags=re.M)
    pattern = re.compile(rf"^{PREFIX}\d+(-|br$|v\d+$)")
    return [n for n in names + links if pattern.match(n) and (not mine or n in _MADE)]


def cleanup_stale() -> list[str]:
    """Delete what a crashed run left behind; returns the names removed."""
    removed = []
    for name in leftovers():
        if _ip("netns", "del", name, check=False).returncode == 0 or \
                _ip("link", "del", name, check=False).returncode == 0:
            removed.append(name)
    return removed
