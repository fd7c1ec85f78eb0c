"""raft:// membership on real `elect member` processes over gRPC: join=, --leave, `elect raft members|add|remove`,
and first members whose peers disagree (elect_bench.membership.Cluster runs them)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from elect_bench import membership
from elect_bench.membership import ROLES, Cluster
from elect_cluster.waiting import wait_until


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with membership.cluster(tmp_path) as c:
        yield c


def raft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elect", "raft", *args], capture_output=True, text=True, timeout=90)


def voters(c: Cluster, via: str) -> list[str]:
    done = raft("members", c.address(via))
    assert done.returncode == 0, done.stderr
    conf = json.loads(done.stdout)
    assert conf["committed"] and "static" not in conf
    return sorted(m["id"] for m in conf["members"] if m["voter"])


def test_a_node_joins_takes_its_share_and_a_member_leaves_with_leave(cluster: Cluster) -> None:
    c = cluster
    c.first()
    c.settled("abc", timeout=90)
    c.join("d", "b")
    c.settled("abcd", timeout=90)
    assert voters(c, "a") == voters(c, "d") == ["a", "b", "c", "d"]
    assert c.counts()["d"] == ROLES // 4
    c.leave("a", timeout=60)  # SIGTERM: drained, removed, exit 0
    left = c.procs["a"].reports("left")
    assert left and left[-1]["left"] is True
    assert voters(c, "b") == ["b", "c", "d"]
    c.settled("bcd", timeout=90)


def test_a_dead_member_is_removed_with_elect_raft_remove(cluster: Cluster) -> None:
    c = cluster
    c.first()
    c.settled("abc", timeout=90)
    c.kill("c")
    done = raft("remove", c.address("a"), "c", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert sorted(m["id"] for m in json.loads(done.stdout)["members"]) == ["a", "b"]
    c.settled("ab", timeout=90)
    bad = raft("add", c.address("a"), "not an address")
    assert bad.returncode == 2 and "ID@HOST:PORT" in bad.stderr


def test_first_members_whose_peers_disagree_refuse_naming_both(cluster: Cluster) -> None:
    c = cluster
    for n in "ab":
        c.start(n, c.url(n, peers=[m for m in "abc" if m != n]))
    wait_until(lambda: all(c.procs[n].started() for n in "ab") or None, 60, what="a and b started")
    odd = c.start("c", c.url("c", peers=["a", "b", "d"]))
    wait_until(lambda: not odd.alive or None, 60, what="c refusing to start")
    assert odd.returncode == 2
    said = odd.stderr_path.read_text()
    assert "disagree" in said and "d@" in said and "c@" in said, said


def test_a_cluster_restarted_at_new_addresses_elects_again(cluster: Cluster) -> None:
    """Every first member back with its state but at a new port (the addresses their URLs give win over the ones the
    configuration kept): found when a test's cluster name, and so its state, was reused by the next run."""
    from elect_cluster.ports import free_ports

    c = cluster
    c.first()
    c.settled("abc", timeout=90)
    for n in "abc":
        c.kill(n)
    c.ports.update(zip("abc", free_ports(3), strict=True))
    c.first()
    c.settled("abc", timeout=90)
    assert voters(c, "a") == ["a", "b", "c"]
