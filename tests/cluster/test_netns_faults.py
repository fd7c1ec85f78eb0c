"""The lesser network faults on network-namespace hosts, shown with real traffic between two hosts: a one-way
cut in each direction (UDP, as TCP needs both ways), random loss, a slow link, and the heal of each."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from elect_cluster import netns
from elect_cluster.netns import Hosts, NetnsError, leftovers

# Counts datagrams until one says "end" (sent over loopback by the test: no fault touches it).
RECEIVE = r"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 1 << 22)  # SO_RCVBUFFORCE (root): no drop for want of room
s.bind(("0.0.0.0", 0))
print(s.getsockname()[1], flush=True)
count = 0
while s.recv(2048) != b"end":
    count += 1
print(count, flush=True)
"""

# Sends argv[3] datagrams of argv[4]; a drop on the sender's own host fails the send (EPERM): carry on.
SEND = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[3])):
    try:
        s.sendto(sys.argv[4].encode(), (sys.argv[1], int(sys.argv[2])))
    except OSError:
        pass
"""

# Takes one connection, reads it to the end, answers one byte.
SINK = r"""
import socket
server = socket.create_server(("0.0.0.0", 0))
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
while conn.recv(65536):
    pass
conn.sendall(b"k")
conn.close()
"""

# Seconds to connect, send argv[3] bytes and hear they all arrived.
BULK = r"""
import socket, sys, time
began = time.monotonic()
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=120)
s.sendall(b"x" * int(sys.argv[3]))
s.shutdown(socket.SHUT_WR)
assert s.recv(1) == b"k"
print(time.monotonic() - began)
"""

N = 200


@pytest.fixture
def lan() -> Iterator[Hosts]:
    with Hosts(["a", "b"]) as hosts:
        yield hosts
    assert not leftovers(mine=True)


def _python(hosts: Hosts, host: str, script: str, *args: object) -> list[str]:
    return [*hosts.exec_prefix(host), sys.executable, "-c", script, *(str(a) for a in args)]


def _listening(hosts: Hosts, host: str, script: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(_python(hosts, host, script), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        return proc, int(proc.stdout.readline())
    except BaseException:
        _end(proc)
        raise


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def datagrams(hosts: Hosts, sender: str, receiver: str, n: int = N) -> int:
    """How many of `n` datagrams `sender` sends reach `receiver`."""
    proc, port = _listening(hosts, receiver, RECEIVE)
    try:
        subprocess.run(_python(hosts, sender, SEND, hosts.address(receiver), port, n, "data"), check=True,
                       timeout=60)
        subprocess.run(_python(hosts, receiver, SEND, "127.0.0.1", port, 1, "end"), check=True, timeout=60)
        out, _ = proc.communicate(timeout=60)
        return int(out)
    finally:
        _end(proc)


def transfer(hosts: Hosts, sender: str, receiver: str, size: int) -> float:
    """Seconds for `sender` to move `size` bytes to `receiver` over TCP."""
    proc, port = _listening(hosts, receiver, SINK)
    try:
        done = subprocess.run(_python(hosts, sender, BULK, hosts.address(receiver), port, size), check=True,
                              capture_output=True, text=True, timeout=180)
        return float(done.stdout)
    finally:
        _end(proc)


def test_cut_out_silences_a_host_that_still_hears(lan: Hosts) -> None:
    assert datagrams(lan, "a", "b") == N
    lan.block("a", "out")
    assert datagrams(lan, "a", "b") == 0
    assert datagrams(lan, "b", "a") == N  # a still hears b
    assert datagrams(lan, "a", "a") == N  # and its own loopback
    lan.heal("a")
    assert datagrams(lan, "a", "b") == N


def test_cut_in_deafens_a_host_that_is_still_heard(lan: Hosts) -> None:
    lan.block("a", "in")
    assert datagrams(lan, "b", "a") == 0
    assert datagrams(lan, "a", "b") == N  # b still hears a
    lan.clear("a")
    assert datagrams(lan, "b", "a") == N


def test_a_lossy_link_drops_a_share_both_ways(lan: Hosts) -> None:
    lan.lossy("a", 0.3)
    n = 2 * N
    for sender, receiver in (("a", "b"), ("b", "a")):
        got = datagrams(lan, sender, receiver, n)
        assert 0.45 * n < got < 0.9 * n, f"{sender} -> {receiver}: {got} of {n} with 30% loss"
    lan.heal("a")
    assert datagrams(lan, "a", "b") == N and datagrams(lan, "b", "a") == N
    with pytest.raises(ValueError, match="loss probability"):
        lan.lossy("a", 1.5)


def test_a_slow_link_slows_a_bulk_transfer_both_ways(lan: Hosts) -> None:
    size = 16 * 1024
    at_rate = size * 8 / 64_000  # seconds the bytes take at the slow link's rate
    fast = max(transfer(lan, "a", "b", size), transfer(lan, "b", "a", size))
    lan.slow("a")
    for sender, receiver in (("a", "b"), ("b", "a")):
        slow = transfer(lan, sender, receiver, size)
        assert slow > at_rate / 3 and slow > 3 * fast, f"{sender} -> {receiver}: {slow:.2f} s, unshaped {fast:.3f} s"
    lan.heal("a")
    assert transfer(lan, "a", "b", size) < at_rate / 3


def _rules(hosts: Hosts, host: str) -> list[str]:
    out = subprocess.run([*hosts.exec_prefix(host), netns.iptables(), "-S"], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line.startswith("-A")]


def _qdiscs(*where: str) -> str:
    return subprocess.run(["tc", *where, "qdisc", "show"], capture_output=True, text=True, check=True).stdout


def test_clear_removes_every_rule_and_qdisc_and_is_idempotent(lan: Hosts) -> None:
    inside = ["-n", lan.namespace("a")]
    lan.block("a", "out")
    lan.block("a", "in")
    lan.lossy("a", 0.5)
    lan.slow("a")
    lan.slow("a")  # twice: replaced, not stacked
    assert len(_rules(lan, "a")) == 4
    assert "tbf" in _qdiscs(*inside) and f"dev {lan._veth('a')} " in _qdiscs()
    lan.clear("a")
    lan.clear("a")
    lan.heal("a")
    assert _rules(lan, "a") == [] and "tbf" not in _qdiscs(*inside)
    assert not [line for line in _qdiscs().splitlines() if "tbf" in line and f"dev {lan._veth('a')} " in line]
    assert _rules(lan, "b") == []
    lan.lossy("b", 0.1)  # left for down() to remove with everything else (checked by the fixture)
    lan.slow("b")


def test_a_missing_iptables_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda _name: None)
    with pytest.raises(NetnsError, match="Debian package iptables"):
        netns.iptables()
