"""ZooKeeper's client requests: length-prefixed frames."""

from __future__ import annotations

from elect_bench.relays.framer import LengthPrefixed


class ZooKeeperFramer(LengthPrefixed):
    """ZooKeeper: every frame is one request (the connect request, pings and closeSession included)."""

    protocol = "zookeeper"
    min_payload = 8  # a request header is xid + type; the connect request is longer still


