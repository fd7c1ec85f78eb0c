"""The framer of each wire protocol a relay can count, by the name relays are given."""

from __future__ import annotations

from elect_bench.relays.framer import Framer
from elect_bench.relays.grpc import GrpcFramer
from elect_bench.relays.http import HttpFramer
from elect_bench.relays.kafka import KafkaFramer
from elect_bench.relays.zookeeper import ZooKeeperFramer

FRAMERS: dict[str, type[Framer]] = {
    f.protocol: f for f in (KafkaFramer, ZooKeeperFramer, HttpFramer, GrpcFramer)
}


def framer_for(protocol: str) -> Framer:
    """A new framer for one connection speaking `protocol` (one of ``FRAMERS``)."""
    try:
        return FRAMERS[protocol]()
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(sorted(FRAMERS))}") from None
