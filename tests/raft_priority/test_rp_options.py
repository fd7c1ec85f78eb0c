"""raft:// options: the cluster identity that keeps stray processes of another cluster from voting."""

from __future__ import annotations

from raft_priority.options import RaftOptions


def test_cluster_identity_follows_addresses_unless_the_cluster_is_named() -> None:
    # a sees b at 10.0.0.2; c sees b through a proxy at 10.0.0.9: unnamed, they disagree (their batches
    # would be dropped); named, the identity is the name and the ids, the same on every node.
    a = RaftOptions(listen="10.0.0.1:7000", peers=("b@10.0.0.2:7000", "c@10.0.0.3:7000"))
    c = RaftOptions(listen="10.0.0.3:7000", peers=("a@10.0.0.1:7000", "b@10.0.0.9:7000"))
    assert a.cluster_id("a") != c.cluster_id("c")
    a_named = RaftOptions(listen="10.0.0.1:7000", peers=("b@10.0.0.2:7000", "c@10.0.0.3:7000"), cluster="x")
    c_named = RaftOptions(listen="10.0.0.3:7000", peers=("a@10.0.0.1:7000", "b@10.0.0.9:7000"), cluster="x")
    assert a_named.cluster_id("a") == c_named.cluster_id("c")
    other = RaftOptions(listen="10.0.0.1:7000", peers=("b@10.0.0.2:7000", "c@10.0.0.3:7000"), cluster="y")
    assert other.cluster_id("a") != a_named.cluster_id("a")
    # with correct addresses everywhere the default identity agrees across nodes
    b = RaftOptions(listen="10.0.0.2:7000", peers=("a@10.0.0.1:7000", "c@10.0.0.3:7000"))
    assert a.cluster_id("a") == b.cluster_id("b")
