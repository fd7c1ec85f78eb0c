"""kafka:// URLs: parsing, derived defaults, and every refused combination naming its rule."""

from __future__ import annotations

import pytest

from elect.config import spec_from_url
from elect.errors import ConfigError
from neli.options import KafkaOptions
from neli.topic import parking_topic


def options(url: str) -> KafkaOptions:
    spec = spec_from_url(url, [0], member="a")
    assert isinstance(spec.options, KafkaOptions)
    return spec.options


def test_url_parts_and_defaults() -> None:
    o = options("kafka://h1:9092,h2:9093/leaders?group=g&partitions=6")
    assert o.servers == ("h1:9092", "h2:9093") and o.topic == "leaders" and o.group_id == "g"
    assert o.mode == "fast" and o.assignment == "cooperative-sticky" and o.partitions == 6
    assert (o.interval, o.timeout, o.group_interval) == pytest.approx((0.1, 0.75, 0.1))
    assert o.exclusive


def test_group_defaults_to_the_topic() -> None:
    assert options("kafka://h:1/t").group_id == "t"


def test_full_mode_defaults_to_overlap() -> None:
    o = options("kafka://h:1/t?mode=full&session_timeout=1s")
    assert o.timeout == pytest.approx(2.0) and not o.exclusive


def test_full_mode_below_the_session_timeout_is_exclusive() -> None:
    assert options("kafka://h:1/t?mode=full&heartbeat_timeout=600ms&heartbeat_interval=0.2").exclusive


@pytest.mark.parametrize(("query", "parameter", "words"), [
    ("heartbeat_timeout=0.95", "heartbeat_timeout", "fences itself before the coordinator"),
    ("heartbeat_timeout=0.15&heartbeat_interval=0.1", "heartbeat_timeout", "2 x heartbeat_interval"),
    ("group_heartbeat_interval=1.0", "group_heartbeat_interval", "below session_timeout"),
    ("poll_interval=0.5", "poll_interval", "heartbeat_interval"),
    ("session_timeout=0.0005", "session_timeout", "whole milliseconds"),
    ("session_timeout=0", "session_timeout", "> 0"),
    ("partitions=0", "partitions", "1..10000"),
    ("mode=slow", "mode", "fast, full"),
    ("assignment=sticky", "assignment", "cooperative-sticky"),
    ("static_membership=true&rejoin_delay=0.5", "rejoin_delay", "static_membership"),
    ("replication=0", "replication", "-1"),
    ("colour=red", "colour", "unknown parameter"),
    ("weight=2", "weight", "kafka:// cannot weigh members: NELI leads what the consumer group assigns"),
    ("max_roles=3", "max_roles", "confluent-kafka cannot plug in an assignor"),
])
def test_forbidden_combinations_are_refused_with_the_rule(query: str, parameter: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        options(f"kafka://h:1/t?{query}")
    assert caught.value.parameter == parameter
    assert words in str(caught.value)


def test_bad_topic_and_servers() -> None:
    with pytest.raises(ConfigError, match="topic"):
        options("kafka://h:1/bad topic")
    with pytest.raises(ConfigError, match="servers"):
        options("kafka://nohostport/t")


def test_characteristics_follow_the_mode() -> None:
    from neli.elector import KafkaElector

    fast = KafkaElector(options("kafka://h:1/t"), "a", (0,)).characteristics
    full = KafkaElector(options("kafka://h:1/t?mode=full"), "a", (0,)).characteristics
    assert fast.exclusive and fast.graceful_handover and fast.max_overlap == 0
    # T = 2 s plus one heartbeat interval (0.2 s): the dropped owner reads its successor's token one beat later
    assert not full.exclusive and not full.graceful_handover and full.max_overlap == pytest.approx(2.2)


def test_a_broker_session_timeout_refusal_reads_as_a_config_error() -> None:
    from confluent_kafka import KafkaError

    from neli.kafka_errors import config_error

    problem = config_error(KafkaError(KafkaError.INVALID_SESSION_TIMEOUT), options("kafka://h:1/t"))
    assert problem is not None and problem.parameter == "session_timeout"
    assert "group.min.session.timeout.ms" in str(problem)
    assert config_error(KafkaError(KafkaError._TRANSPORT), options("kafka://h:1/t")) is None


def test_the_parking_topic_name_is_valid_for_any_leader_topic() -> None:
    assert parking_topic("leaders") == "leaders.parked"
    long = parking_topic("t" * 249)
    assert len(long) == 249 and long.endswith(".parked")
    KafkaOptions(topic=long)  # accepted as a topic name


@pytest.mark.parametrize("session,protocol", [(0.1, "consumer"), (0.2, "consumer"), (0.5, "consumer"),
                                              (1.0, "consumer"), (10.0, "consumer"), (1.0, "classic"),
                                              (10.0, "classic")])
def test_every_derived_setting_follows_the_session_timeout_alone(session: float, protocol: str) -> None:
    """A user sets only D and gets a member the rules accept: the poll below the heartbeat interval, the
    heartbeat timeout within the exclusivity bound, the group heartbeat a tenth of the session."""
    o = options(f"kafka://h:9092/t?session_timeout={session}&protocol={protocol}")
    assert o.poll <= o.interval / 2 + 1e-12 and o.poll <= 0.05
    assert o.timeout == pytest.approx(0.75 * session) and o.timeout + o.group_interval < session
    assert o.group_interval == pytest.approx(session / 10) and o.exclusive


@pytest.mark.parametrize("url", ["kafka://h:9092/t?session_timeout=0.5", "kafka://h:9092/t?session_timeout=0.1",
                                 "kafka://h:9092/t?mode=full&session_timeout=0.5&heartbeat_timeout=0.2"])
def test_an_exclusive_member_on_the_classic_protocol_refuses_a_session_the_group_cannot_hold(url: str) -> None:
    """Below 1 s the classic group keeps rebalancing on Apache Kafka here, and an exclusive mode overlapped on it:
    refused, saying why and what to set instead. Full mode that overlaps by design is left to the user."""
    with pytest.raises(ConfigError, match=r"classic group protocol does not hold a group steady.*protocol=consumer"):
        options(url)
    assert not options("kafka://h:9092/t?mode=full&session_timeout=0.5").exclusive  # accepted: not exclusive
