"""Counting TCP relays: what each member sends to its infrastructure (or its Raft peers), counted.

The benchmark compares the load each election method puts on the services it uses. Counters inside the
client libraries (kazoo, confluent-kafka, grpc, the etcd gateway) would need a hook in each and would
miss what those libraries send on their own (pings, metadata refreshes, retries, reconnects); a relay in
the path sees every byte. A relay parses only the client->server direction, just far enough to find
message boundaries, and forwards every chunk the moment it arrives: parsing never delays or alters the
traffic, and a stream it cannot parse is still relayed (the connection is then reported as unparsed).

Each protocol has a small pure incremental framer (``feed(data) -> messages finished``), so the counting
is unit-testable with any chunking. ``Meter`` serves any number of relays from one asyncio loop in a
daemon thread, so a synchronous harness can start, read and close it.
"""

from elect_bench.relays.framer import MAX_MESSAGE, Framer
from elect_bench.relays.grpc import GrpcFramer
from elect_bench.relays.http import HttpFramer
from elect_bench.relays.kafka import KafkaFramer
from elect_bench.relays.protocols import FRAMERS, framer_for
from elect_bench.relays.relay import Counts, Meter
from elect_bench.relays.zookeeper import ZooKeeperFramer

__all__ = [
    "FRAMERS",
    "MAX_MESSAGE",
    "Counts",
    "Framer",
    "GrpcFramer",
    "HttpFramer",
    "KafkaFramer",
    "Meter",
    "ZooKeeperFramer",
    "framer_for",
]
