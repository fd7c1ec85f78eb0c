"""The local Kafka brokers (Apache Kafka, and the light Tansu) answer a real Kafka client."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from elect.kafka_wire import CONSUMER_GROUP_HEARTBEAT, METADATA, api_versions
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


@pytest.fixture(params=["apache", "tansu"])
def broker(request: pytest.FixtureRequest) -> Endpoints:
    return request.getfixturevalue("infra" if request.param == "apache" else "tansu")  # type: ignore[no-any-return]


def test_broker_speaks_the_kafka_wire_protocol(broker: Endpoints) -> None:
    host, port = broker.kafka[0].rsplit(":", 1)
    assert METADATA in api_versions(host, int(port))


def test_apache_kafka_is_named_and_speaks_the_consumer_group_protocol(infra: Endpoints, tansu: Endpoints) -> None:
    assert infra.kafka_broker.startswith("Apache Kafka 4.") and "Tansu" in tansu.kafka_broker
    host, port = infra.kafka[0].rsplit(":", 1)
    assert CONSUMER_GROUP_HEARTBEAT in api_versions(host, int(port))


def test_create_topic_produce_and_consume_one_message(broker: Endpoints) -> None:
    servers = ",".join(broker.kafka)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)

    producer = Producer({"bootstrap.servers": servers})
    producer.produce(topic, key=b"k", value=b"hello")
    assert producer.flush(30) == 0

    # Tansu holds a new group's first join for about the session timeout (the 45 s default means ~23 s).
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"g-{topic}", "session.timeout.ms": 3000,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])

        def received() -> bytes | None:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                return None
            value = msg.value()
            return value if isinstance(value, bytes) else None

        assert wait_until(received, 60.0, 0.0, what="the message to be consumed") == b"hello"
    finally:
        consumer.close()
