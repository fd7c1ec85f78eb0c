"""Counting each member's load (docs/architecture.md: requests or messages per second a member sends to the
infrastructure, or to its peers for Raft) with counting relays between members and what they dial.

Every member dials the infrastructure and its peers through a relay of its own (`Router`), so what a
relay counts is that member's traffic, parsed per wire protocol (elect_bench.relays). A Kafka broker
tells clients where to reconnect, so the local broker advertises one shared relay and the requests
are attributed by the client id each member sends (NELI's client.id is the member id).
"""

from __future__ import annotations

from collections.abc import Iterable

from elect_bench.relays import Meter


class Router:
    """`bench.methods.Via` for a group whose traffic is counted; relays are reused across trials."""

    def __init__(self, meter: Meter, host: str) -> None:
        self.meter = meter
        self.host = host
        self._relays: dict[tuple[str, str, str], str] = {}

    def __call__(self, member: str, address: str, protocol: str) -> str:
        if protocol == "kafka":
            return address  # the broker's advertised address is the shared relay already (front_kafka)
        key = (member, address, protocol)
        if key not in self._relays:
            self._relays[key] = self.meter.relay(member, address, protocol, host=self.host)
        return self._relays[key]

    def front_kafka(self, broker: str, advertised_port: int, members: Iterable[str]) -> None:
        """Listen where the broker told clients to connect; count each request for the member named by its
        client id (anything else counts under "unattributed")."""
        known = frozenset(members)
        self.meter.relay("unattributed", broker, "kafka", host=self.host, port=advertised_port,
                         identify=lambda client_id: client_id if client_id in known else None)

    def messages(self) -> dict[str, int]:
        """Messages each member has sent so far, through all its relays."""
        return {owner: c.messages for owner, c in self.meter.counts().items()}
