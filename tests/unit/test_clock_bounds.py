"""Each method's stated clock-rate tolerance (`Characteristics.max_drift`), as derived from its settings
(docs/clocks.md), read off an elector built from its URL and never started."""

from __future__ import annotations

import math

import pytest

import elect


@pytest.mark.parametrize(("url", "expected"), [
    # the lease methods: ttl / renew_deadline - 1 (renew_deadline defaults to 3/4 of the TTL)
    ("etcd://127.0.0.1:2379/p?ttl=1", 1 / 0.75 - 1),
    ("etcd://127.0.0.1:2379/p?ttl=2&renew_deadline=1.8", 2 / 1.8 - 1),
    ("zookeeper://127.0.0.1:2181/p?session_timeout=2", 1 / 0.75 - 1),
    ("kubernetes://127.0.0.1:6443/default?ttl=1&renew_deadline=0.5", 1.0),
    # kafka fast: session / (heartbeat_timeout + group heartbeat interval) - 1 = 1 / (0.75 + 0.1) - 1
    ("kafka://127.0.0.1:9092/t?mode=fast", 1 / 0.85 - 1),
    # raft: what the leader's lease was shortened for (default 0.1)
    ("raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003", 0.1),
    ("raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003&max_drift=0.25", 0.25),
    ("memory://g", math.inf),
])
def test_each_exclusive_method_states_the_rates_it_tolerates(url: str, expected: float) -> None:
    assert elect.connect(url, member="a").characteristics.max_drift == pytest.approx(expected)


@pytest.mark.parametrize("url", [
    "kafka://127.0.0.1:9092/t?mode=full",  # dates others' records by their wall clocks: offsets matter too
    "raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003&check_quorum=off",  # no lease at all
])
def test_methods_whose_promise_rests_on_more_than_rates_state_no_bound(url: str) -> None:
    assert elect.connect(url, member="a").characteristics.max_drift is None


def test_a_configuration_that_does_not_tolerate_the_drift_asked_for_is_refused_at_connect() -> None:
    url = "raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003"
    elect.connect(url, member="a", require={"max_drift": 0.1})
    with pytest.raises(elect.UnsatisfiedRequirement, match=r"clock rates that differ by up to 0\.2"):
        elect.connect(url, member="a", require={"max_drift": 0.2})
    elect.connect(url + "&max_drift=0.2", member="a", require={"max_drift": 0.2})
    with pytest.raises(elect.ConfigError, match="max_drift"):
        elect.connect(url + "&max_drift=2", member="a")
