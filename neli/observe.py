"""Observer of a NELI group: which member the consumer group assigned each partition to.

The assignment is what induces leadership; in fast mode the owner leads once its own heartbeats come
back, in full mode others may lead beside it for a while. Roles map onto partitions (j mod M), so the
table is per partition. NELI keeps no token in the group, so none is shown.
"""

from __future__ import annotations

from typing import Any

from elect.errors import InfrastructureUnavailable
from elect.observe import Claim
from elect.reach import require_listening
from neli.options import KafkaOptions


class KafkaObserver:
    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self.where = f"the consumer group {options.group_id!r} (the members' group=, or the topic's default)"
        self._admin: Any = None  # made at the first read, once a broker is known to listen

    def _client(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            # librdkafka retries a refused port until its timeout, logging each try: ask once first
            require_listening("Kafka", self.options.servers)
            o = self.options
            self._admin = AdminClient({"bootstrap.servers": o.bootstrap, "client.id": "elect-watch",
                                       "socket.connection.setup.timeout.ms": int(o.connect_timeout * 1000),
                                       **o.client_security()})
        return self._admin

    def claims(self, timeout: float) -> list[Claim]:
        from confluent_kafka import KafkaException

        group = self.options.group_id
        admin = self._client()
        try:
            futures = admin.describe_consumer_groups([group], request_timeout=timeout)
            description = futures[group].result(timeout=timeout + 1)
        except (KafkaException, TimeoutError) as exc:
            raise InfrastructureUnavailable(f"kafka: cannot describe group {group!r}: {exc}") from None
        if not description.members and str(description.state).endswith("STABLE"):
            raise InfrastructureUnavailable(
                f"kafka: the broker lists no members for the stable group {group!r} (the embedded Tansu broker "
                f"does not report them); watch the members' event lines instead: elect member ... | elect watch -")
        out = []
        for member in description.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            out += [Claim(str(tp.partition), member.client_id) for tp in assignment if tp.topic == self.options.topic]
        return out

    def close(self) -> None:
        return None


def kafka(options: KafkaOptions) -> KafkaObserver:
    return KafkaObserver(options)
