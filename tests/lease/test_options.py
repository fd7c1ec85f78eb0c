"""URLs and options of etcd:// and zookeeper://, how roles and records are written into a store, and how role actions
are batched for it."""

from __future__ import annotations

import pytest

import elect
from cas_lease.driver import chunk_size
from cas_lease.model import MemberRecord
from cas_lease.names import decode_holder, decode_record, encode_holder, encode_record, role_name, role_of
from cas_lease.options import EtcdOptions, ZooKeeperOptions
from elect.config import spec_from_url
from elect.errors import ConfigError


def test_etcd_url_fills_endpoints_prefix_and_derived_timing() -> None:
    spec = spec_from_url("etcd://127.0.0.1:2379,127.0.0.1:2479/jobs?ttl=2", ["a"], member="m")
    options = spec.options
    assert isinstance(options, EtcdOptions)
    assert options.endpoints == ("127.0.0.1:2379", "127.0.0.1:2479")
    assert options.key_prefix == "/jobs/"
    assert (options.interval, options.deadline, options.lease_seconds) == (0.5, 1.5, 4)
    timing = options.timing(silence_takeover=True)
    assert timing.fair_delay == 0.5 and timing.resign_backoff == 2.0


def test_zookeeper_url_fills_hosts_and_path() -> None:
    spec = spec_from_url("zookeeper://h1:2181,h2:2181/svc/leaders?session_timeout=500ms&fair=off", member="m")
    options = spec.options
    assert isinstance(options, ZooKeeperOptions)
    assert options.hosts == ("h1:2181", "h2:2181") and options.root == "/svc/leaders"
    assert options.session_timeout == 0.5 and not options.fair


@pytest.mark.parametrize(("url", "parameter"), [
    ("etcd://127.0.0.1:2379/p?ttl=1&renew_deadline=1.2", "renew_deadline"),
    ("etcd://127.0.0.1:2379/p?ttl=1&renew_interval=0.8", "renew_deadline"),
    ("etcd://127.0.0.1:2379/p?renew_interval=0", "renew_interval"),
    ("zookeeper://127.0.0.1:2181/p?session_timeout=1&renew_deadline=1", "renew_deadline"),
    ("etcd://127.0.0.1/p", "endpoints"),
    ("etcd://127.0.0.1:2379/p?lease_ttl=0", "lease_ttl"),
    ("etcd://127.0.0.1:2379/p?fair_delay=-1", "fair_delay"),
    ("etcd://127.0.0.1:2379/p?weight=0", "weight"),
    ("zookeeper://127.0.0.1:2181/p?weight=-2", "weight"),
    ("etcd://127.0.0.1:2379/p?weight=heavy", "weight"),
    ("etcd://127.0.0.1:2379/p?max_roles=0", "max_roles"),
    ("zookeeper://127.0.0.1:2181/p?max_roles=1.5", "max_roles"),
    ("etcd://127.0.0.1:2379/p?fair=off&weight=2", "weight"),
    ("zookeeper://127.0.0.1:2181/p?fair=off&max_roles=2", "max_roles"),
])
def test_bad_options_name_the_parameter(url: str, parameter: str) -> None:
    with pytest.raises(ConfigError) as info:
        spec_from_url(url, member="m")
    assert info.value.parameter == parameter


def test_timing_rule_message_says_why() -> None:
    with pytest.raises(ConfigError, match="must be shorter than session_timeout"):
        spec_from_url("zookeeper://127.0.0.1:2181/p?session_timeout=1&renew_deadline=1.5", member="m")


def test_characteristics_are_declared_before_start() -> None:
    e = elect.connect("etcd://127.0.0.1:1/p?ttl=1", ["x"], member="m", require={"exclusive": True,
                                                                                "max_overlap": 0})
    c = e.characteristics
    assert c.exclusive and c.max_overlap == 0 and c.graceful_handover and c.max_failover == 1.25
    with pytest.raises(elect.UnsatisfiedRequirement):
        elect.connect("zookeeper://127.0.0.1:1/p", ["x"], member="m", require={"max_failover": 0.5})


@pytest.mark.parametrize("role", ["prices.EURUSD", 7, 0, "7", "a/b", "..", ".", "~x", "é ü", "%41"])
def test_role_names_round_trip_and_stay_one_segment(role: str | int) -> None:
    name = role_name(role)
    assert "/" not in name and name not in (".", "..")
    assert role_of(name) == role and type(role_of(name)) is type(role)


def test_values_round_trip_and_tolerate_garbage() -> None:
    holder = decode_holder(encode_holder("a", "s1"), 42)
    assert (holder.member, holder.session, holder.token) == ("a", "s1", 42)
    assert decode_holder(b"not json", 5, "lease7").session == "lease7"
    record = MemberRecord("a", frozenset({1, "x"}))
    assert decode_record(encode_record(record)) == record
    assert decode_record(b"{}").roles is None and decode_record(b"\xff").member == "?"


def test_weight_and_max_roles_from_url_and_yaml() -> None:
    options = spec_from_url("etcd://127.0.0.1:2379/p?weight=2.5&max_roles=3", member="m").options
    assert isinstance(options, EtcdOptions) and (options.weight, options.max_roles) == (2.5, 3)
    spec = elect.spec_from_config({"elector": "zookeeper", "hosts": ["h:2181"], "path": "p", "member": "m",
                                   "weight": 2, "max_roles": 4})
    assert isinstance(spec.options, ZooKeeperOptions) and (spec.options.weight, spec.options.max_roles) == (2.0, 4)


def test_records_carry_weight_and_cap_and_old_records_read_as_defaults() -> None:
    record = MemberRecord("a", frozenset({1}), weight=2.5, max_roles=3)
    assert decode_record(encode_record(record)) == record
    assert b"weight" not in encode_record(MemberRecord("a", frozenset({1})))  # defaults stay out: old readers
    old = decode_record(b'{"member":"a","roles":[1]}')  # written before weights existed
    assert (old.weight, old.max_roles) == (1.0, None)
    for junk in (b'"weight":0', b'"weight":-1', b'"weight":"2"', b'"weight":true', b'"weight":1e999',
                 b'"weight":' + b"9" * 400, b'"max_roles":0', b'"max_roles":2.5', b'"max_roles":"3"'):
        odd = decode_record(b'{"member":"a","roles":[1],' + junk + b"}")
        assert (odd.member, odd.roles, odd.weight, odd.max_roles) == ("a", frozenset({1}), 1.0, None), junk


def test_a_small_batch_of_role_actions_is_spread_over_the_lanes() -> None:
    """Ten takeovers on four lanes go as chunks of three (three round trips, not ten); a large batch keeps the store's
    own limit per request."""
    assert chunk_size(10, 16, 4) == 3
    assert chunk_size(2000, 16, 4) == 16
    assert chunk_size(1, 126, 2) == 1
    assert chunk_size(0, 16, 4) == 1
    assert chunk_size(10, 16, 0) == 10
