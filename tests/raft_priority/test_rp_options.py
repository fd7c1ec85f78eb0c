"""raft:// options: the cluster identity that keeps stray processes of another cluster from voting; weights and caps."""

from __future__ import annotations

import pytest

import elect
from elect.config import spec_from_url
from elect.errors import ConfigError
from raft_priority.elector import RaftElector
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


PEERS = "peers=b@127.0.0.1:7002,c@127.0.0.1:7003"


def _elector(query: str, member: str = "a") -> RaftElector:
    spec = spec_from_url(f"raft://{member}@127.0.0.1:7001?{PEERS}&partitions=16&{query}")
    elector = spec.create()
    assert isinstance(elector, RaftElector)
    return elector


def test_weights_shape_the_table_and_the_wire_identity_but_not_the_state() -> None:
    plain, weighted = _elector(""), _elector("weights=a:2")
    assert sum(1 for prios in weighted.assignment if max(prios, key=lambda n: prios[n]) == "a") == 8
    assert weighted.assignment != plain.assignment
    options = weighted.options
    assert isinstance(options, RaftOptions) and options.weight_map() == {"a": 2.0}
    assert weighted.cluster != plain.cluster  # nodes given other weights do not talk to these
    assert options.state_dir("a") == plain.options.state_dir("a")  # terms and votes stay where they were
    # equal weights are no weights; every node given the same weights agrees on the identity
    assert _elector("weights=a:3,b:3,c:3").cluster == plain.cluster
    same = spec_from_url("raft://b@127.0.0.1:7002?peers=a@127.0.0.1:7001,c@127.0.0.1:7003&partitions=16"
                         "&weights=a:2").options
    assert isinstance(same, RaftOptions) and same.wire_id("b") == weighted.cluster
    assert _elector("weights=a:2&weight=2").characteristics.weights
    assert not _elector("priority=zeebe").characteristics.weights
    yaml_form = elect.spec_from_config({"elector": "raft", "member": "a", "listen": "127.0.0.1:7001",
                                        "peers": ["b@127.0.0.1:7002", "c@127.0.0.1:7003"],
                                        "weights": ["a:2", "b:0.5"], "max_roles": 3}).options
    assert isinstance(yaml_form, RaftOptions)
    assert yaml_form.weight_map() == {"a": 2.0, "b": 0.5} and yaml_form.max_roles == 3


@pytest.mark.parametrize(("query", "parameter", "words"), [
    ("weights=a", "weights", "ID:WEIGHT"),
    ("weights=a:0", "weights", "ID:WEIGHT"),
    ("weights=a:-1", "weights", "ID:WEIGHT"),
    ("weights=a:heavy", "weights", "ID:WEIGHT"),
    ("weights=a:2,a:3", "weights", "twice"),
    ("weights=d:2", "weights", "not a node of this cluster"),
    ("weights=a:2&priority=zeebe", "weights", "priority=balanced"),
    ("weights=a:2&priority=off", "weights", "priority=balanced"),
    ("weight=2", "weight", "weighs nodes cluster-wide"),
    ("weights=a:2&weight=3", "weight", "not what weights says"),
    ("weight=0", "weight", "> 0"),
    ("max_roles=0", "max_roles", ">= 1"),
])
def test_bad_weights_and_caps_name_the_parameter(query: str, parameter: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        _elector(query)
    assert info.value.parameter == parameter and words in str(info.value), info.value
