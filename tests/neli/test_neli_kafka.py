"""The kafka:// elector against the real broker, in this process: topic rules, errors, shared topics."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import elect
from elect.config import spec_from_url
from elect.errors import ConfigError, InfrastructureUnavailable
from elect.metrics import RENEWAL
from elect_bench.members import InProcessMember
from elect_cluster.endpoints import Endpoints
from elect_cluster.ports import free_port
from elect_cluster.waiting import wait_until
from neli.options import KafkaOptions
from neli.topic import TOPIC_CONFIG, WARM_PADDING, admin_client, end_offsets, ensure_topic, parking_topic

pytestmark = pytest.mark.infra


@pytest.fixture
def started() -> Iterator[list[InProcessMember]]:
    members: list[InProcessMember] = []
    try:
        yield members
    finally:
        for m in members:
            m.stop(20)


def fresh() -> str:
    return f"neli-{uuid.uuid4().hex[:8]}"


def test_topic_is_created_with_M_partitions_then_reused(infra: Endpoints, started: list[InProcessMember]) -> None:
    topic = fresh()
    url = f"kafka://{infra.kafka[0]}/{topic}?partitions=5"
    for member in ("a", "b"):  # the second finds the topic the first created
        m = InProcessMember(elect.connect(url, [0], member=member))
        m.start()
        started.append(m)
    metadata = AdminClient({"bootstrap.servers": infra.kafka[0]}).list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 5
    wait_until(lambda: sum("0" in m.log.leading() for m in started) == 1, 30, what="one leader of role 0")


def test_a_created_topic_keeps_an_hour_and_is_past_its_first_index_entries_before_anyone_leads(
        infra: Endpoints) -> None:
    """The creator warms the topic (neli/topic.py says why); a member finding it made writes nothing to it."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import ConfigResource

    topic = fresh()
    spec = spec_from_url(f"kafka://{infra.kafka[0]}/{topic}?partitions=4", [0], member="a")
    assert isinstance(spec.options, KafkaOptions)
    assert ensure_topic(spec.options) == 4
    assert ensure_topic(spec.options) == 4  # found, not created: not warmed again
    admin = AdminClient({"bootstrap.servers": infra.kafka[0]})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert {name: configs[name].value for name in TOPIC_CONFIG} == TOPIC_CONFIG
    reader = Consumer({"bootstrap.servers": infra.kafka[0], "group.id": fresh(), "enable.auto.commit": False})
    try:
        ends = [reader.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(4)]
        assert ends == [2, 2, 2, 2]  # the padding, then the record that makes the broker write the first entries
        reader.assign([TopicPartition(topic, p, 0) for p in range(4)])
        values: list[bytes] = []
        wait_until(lambda: values.extend(m.value() or b"" for m in reader.consume(8, 0.2) if m.error() is None)
                   or len(values) == 8, 30, what="the warm-up records")
        assert sorted(len(v) for v in values) == [0] * 4 + [WARM_PADDING] * 4
    finally:
        reader.close()


def test_existing_topic_with_another_partition_count_is_refused(infra: Endpoints) -> None:
    topic = fresh()
    admin = AdminClient({"bootstrap.servers": infra.kafka[0]})  # kept alive until its future resolves
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    elector = elect.connect(f"kafka://{infra.kafka[0]}/{topic}?partitions=4", [0], member="a")
    with pytest.raises(ConfigError) as caught:
        elector.start()
    assert caught.value.parameter == "partitions" and "partitions=3" in str(caught.value)


def test_a_closed_broker_port_is_reported_at_once() -> None:
    """Nothing listens there: the connection is refused, which waiting out connect_timeout would not change."""
    port = free_port()
    elector = elect.connect(f"kafka://127.0.0.1:{port}/t?connect_timeout=600", [0], member="a")
    with pytest.raises(InfrastructureUnavailable, match="refused the connection: is it running"):
        elector.start()


def test_two_groups_share_one_topic_and_each_leads_every_role(infra: Endpoints,
                                                               started: list[InProcessMember]) -> None:
    topic = fresh()
    roles = [0, 1, 2, "x"]
    for group in ("p1", "p2"):  # the paper's continuously available setup: two disjoint groups
        for member in ("a", "b"):
            url = f"kafka://{infra.kafka[0]}/{topic}?group={group}&partitions=4"
            m = InProcessMember(elect.connect(url, roles, member=f"{group}-{member}"))
            m.start()
            started.append(m)
    for group in ("p1", "p2"):
        mine = [m for m in started if m.member_id.startswith(group)]
        wait_until(lambda mine=mine: all(sum(str(r) in m.log.leading() for m in mine) == 1 for r in roles), 40,
                   what=f"one leader per role in group {group}")


def test_resign_hands_over_and_the_elector_stops_cleanly(infra: Endpoints, started: list[InProcessMember]) -> None:
    url = f"kafka://{infra.kafka[0]}/{fresh()}?partitions=2&rejoin_delay=3"
    a = InProcessMember(elect.connect(url, [0, 1], member="a"))
    a.start()
    started.append(a)
    wait_until(lambda: a.log.leading() == {"0", "1"}, 30, what="a leading both roles")
    b = InProcessMember(elect.connect(url, [0, 1], member="b"))
    b.start()
    started.append(b)
    wait_until(lambda: len(b.log.leading()) == 1, 30, what="the newcomer taking one partition")
    a.resign(int(next(iter(a.log.leading()))))  # event lines carry roles as text
    wait_until(lambda: b.log.leading() == {"0", "1"}, 30, what="b leading everything while a is out")
    wait_until(lambda: len(a.log.leading()) == 1, 30, what="a back in the group with one partition")


@pytest.mark.parametrize("broker", ["tansu", "infra"])
def test_the_parking_topic_is_made_only_where_leaving_the_group_keeps_a_members_partitions(
        broker: str, request: pytest.FixtureRequest, started: list[InProcessMember]) -> None:
    # Tansu keeps a departed member's partitions, so members hand over by parking; Apache Kafka moves them
    # when a member leaves, and would not move partitions dropped by a subscription change.
    servers = request.getfixturevalue(broker).kafka[0]
    topic = fresh()
    m = InProcessMember(elect.connect(f"kafka://{servers}/{topic}?partitions=2", [0], member="a"))
    m.start()
    started.append(m)
    metadata = AdminClient({"bootstrap.servers": servers}).list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 2
    if broker == "tansu":
        assert len(metadata.topics[parking_topic(topic)].partitions) == 1
    else:
        assert parking_topic(topic) not in metadata.topics


def test_owners_resigning_at_once_leave_a_group_that_still_assigns(infra: Endpoints,
                                                                    started: list[InProcessMember]) -> None:
    """Every owner resigns within milliseconds of the others, then every role must find a leader again.

    When resign left the group (LeaveGroup), the broker (Tansu) kept the group's departed leader as
    its leader if it left while the group was already rebalancing after another member's LeaveGroup:
    no member was told to compute the assignment and no partition was assigned again (about half the
    runs). Parked members stay in the group, so the group keeps a leader that answers.
    """
    roles = [0, 1, 2]
    url = f"kafka://{infra.kafka[0]}/{fresh()}?partitions=3"
    members = [InProcessMember(elect.connect(url, roles, member=name)) for name in ("a", "b", "c")]
    for m in members:
        m.start()
        started.append(m)

    def leaders() -> dict[str, list[InProcessMember]]:
        return {str(r): [m for m in members if str(r) in m.log.leading()] for r in roles}

    wait_until(lambda: all(len(held) == 1 for held in leaders().values()), 40, what="one leader per role")
    marks = {m.member_id: len(m.log.lines) for m in members}
    resigned = [(held[0], role) for role, held in leaders().items()]
    for m, role in resigned:
        m.resign(int(role))
    for m, role in resigned:
        m.log.wait_for(lambda line, role=role: line["event"] == "revoked" and line["role"] == role, 10,
                       start=marks[m.member_id], what=f"{m.member_id} revoked {role} after resign")

    def led_again(role: str) -> bool:
        return any(line["event"] == "acquired" and line["role"] == role
                   for m in members for line in m.log.lines[marks[m.member_id]:])

    wait_until(lambda: all(led_again(str(r)) for r in roles), 40, what="every role led again after the resigns")


def test_a_member_times_each_step_of_taking_a_partition_and_of_leaving(infra: Endpoints,
                                                                        started: list[InProcessMember]) -> None:
    url = f"kafka://{infra.kafka[0]}/{fresh()}?partitions=2"
    a = InProcessMember(elect.connect(url, [0, 1], member="a"))
    a.start()
    started.append(a)
    wait_until(lambda: a.log.leading() == {"0", "1"}, 30, what="a leading both roles")
    taking = a.elector.timings()  # type: ignore[attr-defined]
    for step in ("assigned_to_sent", "sent_to_led", "assigned_to_led"):
        assert len(taking[step]) == 2, (step, taking)  # once per partition
    assert all(0 <= s < 30 for s in taking["assigned_to_led"])
    assert max(taking["assigned_to_sent"]) <= max(taking["assigned_to_led"])
    b = InProcessMember(elect.connect(url, [0, 1], member="b"))
    b.start()
    started.append(b)
    wait_until(lambda: len(b.log.leading()) == 1, 30, what="the newcomer taking one partition")
    a.stop(20)
    wait_until(lambda: b.log.leading() == {"0", "1"}, 30, what="b leading both once a left")
    leaving = a.elector.timings()  # type: ignore[attr-defined]
    assert len(leaving["stop_to_revoked"]) == len(leaving["revoked_to_left"]) == 1, leaving
    assert len(b.elector.timings()["assigned_to_led"]) == 2  # type: ignore[attr-defined]


def test_a_member_reads_its_heartbeats_back_as_they_arrive_not_at_the_end_of_its_poll(
        infra: Endpoints, started: list[InProcessMember]) -> None:
    # a poll interval of 1 s: a loop that returned only when its poll ran out (librdkafka's batch consume) read
    # every heartbeat back up to 1 s late; one that returns at the first record, within milliseconds
    url = (f"kafka://{infra.kafka[0]}/{fresh()}?partitions=1&session_timeout=12&heartbeat_interval=1"
           "&poll_interval=1")
    elector = elect.connect(url, [0], member="a")
    registry = elector.metrics().registry
    a = InProcessMember(elector)
    a.start()
    started.append(a)
    member = {"member": "a"}
    wait_until(lambda: (registry.get_sample_value(RENEWAL + "_count", member) or 0) >= 5, 30,
               what="five heartbeats read back")
    count, total = (registry.get_sample_value(RENEWAL + suffix, member) for suffix in ("_count", "_sum"))
    assert count and total is not None and total / count < 0.5, (count, total)


def test_end_offsets_come_from_the_broker_and_what_it_cannot_answer_is_left_out(infra: Endpoints) -> None:
    topic = fresh()
    options = KafkaOptions(servers=tuple(infra.kafka), topic=topic, partitions=2)
    ensure_topic(options)
    admin = admin_client(options)
    before = end_offsets(admin, topic, [0, 1], 5.0)
    producer = Producer({"bootstrap.servers": infra.kafka[0]})
    for _ in range(3):
        producer.produce(topic, b"x", partition=1)
    assert producer.flush(10) == 0
    after = end_offsets(admin, topic, [0, 1], 5.0)
    assert after == {0: before[0], 1: before[1] + 3}
    assert end_offsets(admin, f"{topic}-absent", [0], 0.5) == {}
    unreachable = admin_client(KafkaOptions(servers=(f"127.0.0.1:{free_port()}",), connect_timeout=1.0))
    began = time.monotonic()
    assert end_offsets(unreachable, topic, [0], 0.3) == {}
    assert time.monotonic() - began < 5


@pytest.mark.parametrize("broker", ["infra", "kafka_defaults"])
def test_a_kip848_member_sets_its_groups_timings_and_an_assignment_without_delay(
        broker: str, request: pytest.FixtureRequest, started: list[InProcessMember]) -> None:
    # a broker at Kafka's defaults waits group.consumer.assignment.interval.ms (1 s) before it moves partitions;
    # the member's own group does not
    from confluent_kafka.admin import ConfigResource

    from neli.group import ASSIGNMENT, HEARTBEAT, SESSION

    servers = request.getfixturevalue(broker).kafka[0]
    admin = AdminClient({"bootstrap.servers": servers})
    (node,) = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()
    assert node.result(30)["group." + ASSIGNMENT].value == ("0" if broker == "infra" else "1000")
    group = fresh()
    url = f"kafka://{servers}/{fresh()}?partitions=2&protocol=consumer&group={group}&session_timeout=1"
    a = InProcessMember(elect.connect(url, [0, 1], member="a"))
    a.start()
    started.append(a)
    wait_until(lambda: a.log.leading() == {"0", "1"}, 30, what="a leading")
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, group)]).values()
    said = {name: entry.value for name, entry in future.result(30).items()}
    assert (said[SESSION], said[HEARTBEAT], said[ASSIGNMENT]) == ("1000", "100", "0"), said
    b = InProcessMember(elect.connect(url, [0, 1], member="b"))
    b.start()
    started.append(b)
    wait_until(lambda: len(b.log.leading()) == 1 and len(a.log.leading()) == 1, 30, what="one partition each")


@pytest.mark.parametrize("broker", ["infra", "kafka_defaults"])
def test_a_classic_member_names_a_broker_setting_that_delays_its_group(
        broker: str, request: pytest.FixtureRequest, started: list[InProcessMember],
        caplog: pytest.LogCaptureFixture) -> None:
    servers = request.getfixturevalue(broker).kafka[0]
    with caplog.at_level(logging.WARNING, logger="neli"):
        a = InProcessMember(elect.connect(f"kafka://{servers}/{fresh()}?partitions=1", [0], member="a"))
        a.start()
        started.append(a)
    named = [r.getMessage() for r in caplog.records if "group.initial.rebalance.delay.ms" in r.getMessage()]
    assert len(named) == (0 if broker == "infra" else 1), named
    if named:
        assert "=3000" in named[0] and "set it to 0" in named[0]
