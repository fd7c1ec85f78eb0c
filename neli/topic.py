"""The leader topic: reach the broker (bounded), then create the topic or check the one that exists.

M cannot change while a group runs (every member maps roles by `j mod M`), so an existing topic with a
different partition count is an error that says which count to use, never a silent resize.

A topic the elector creates gets the configs in `TOPIC_CONFIG` (heartbeats are read live, so an hour of them
is kept), and is warmed (`_warm`) before anyone leads on it: Kafka writes a partition's first index entries into
fresh, sparse, memory-mapped index files, and on an ordinary disk that first write took ~2.5 ms per file here,
while the broker's request thread appending a produce request for every partition waits. Members in fast mode
write every partition alike, so every partition reached its first entry (after `index.interval.bytes`, 4 KB by
default) in the same request: at 60 partitions the broker took the heartbeats ~1.4 s late, and every member
fenced every role about 3 s after the group first led (docs/neli-broker.md). Warming writes a padding record a
little over 4 KB and then a small one to every partition, so those first entries are written while nobody leads.
Segments roll at different times for the same reason (`segment.jitter.ms`).

Beside it, the parking topic (`TOPIC.parked`, one partition, never written): a member that resigns
(for `rejoin_delay`) or stops subscribes to it instead of the leader topic, so it hands its partitions
over through an ordinary rebalance and stays in the group (neli/elector.py says why not LeaveGroup).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from elect.errors import AccessRefused, ConfigError, InfrastructureUnavailable
from neli.kafka_errors import refusal
from neli.options import DEFAULT_PARTITIONS, KafkaOptions

log = logging.getLogger("neli")


class Refusals:
    """An admin client's error callback that keeps what the brokers refused (authentication, TLS), so a wait on
    the client ends with that instead of a time-out."""

    def __init__(self, options: KafkaOptions) -> None:
        self.options = options
        self.refused: AccessRefused | None = None

    def __call__(self, err: KafkaError) -> None:
        self.refused = refusal(err, self.options) or self.refused

    def check(self) -> None:
        if self.refused is not None:
            raise self.refused


def admin_client(options: KafkaOptions) -> AdminClient:
    timeout_ms = int(options.connect_timeout * 1000)
    refusals = Refusals(options)
    config: dict[str, Any] = {"bootstrap.servers": options.bootstrap, "socket.connection.setup.timeout.ms": timeout_ms,
                              "reconnect.backoff.max.ms": 500, "log_level": 3, "error_cb": refusals,
                              **options.client_security()}
    admin = AdminClient(config)
    admin.elect_refusals = refusals  # type: ignore[attr-defined]  # read by `refused`
    return admin


def refused(admin: AdminClient) -> None:
    """Raise what the brokers refused `admin` (AccessRefused), if they refused it anything."""
    found = getattr(admin, "elect_refusals", None)
    if isinstance(found, Refusals):
        found.check()


def end_offsets(admin: AdminClient, topic: str, partitions: list[int], timeout: float) -> dict[int, int]:
    """The end offset (the next record's) of each of `partitions` that the broker gives within `timeout` seconds;
    partitions it did not answer for in time are left out (the caller falls back on a lookup of its own)."""
    if not partitions:
        return {}
    deadline = time.monotonic() + timeout
    found: dict[int, int] = {}
    try:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({TopicPartition(topic, p): latest for p in partitions},
                                     request_timeout=timeout)
        for tp, future in futures.items():
            found[tp.partition] = future.result(timeout=max(0.0, deadline - time.monotonic())).offset
    except Exception as exc:  # KafkaException, a time-out, a client closing: the lookup is an optimisation
        log.debug("neli: end offsets of %s %s not known within %g s: %s", topic, partitions, timeout, exc)
    return found


PARKING_SUFFIX = ".parked"
_MAX_TOPIC = 249


def parking_topic(topic: str) -> str:
    """The parking topic of leader topic `topic` (a valid topic name whatever the length of `topic`)."""
    return topic[:_MAX_TOPIC - len(PARKING_SUFFIX)] + PARKING_SUFFIX


def partition_count(admin: AdminClient, options: KafkaOptions, deadline: float, topic: str | None = None) -> int | None:
    """Partitions of `topic` (default: the leader topic), or None if it does not exist;
    InfrastructureUnavailable by `deadline`."""
    topic = options.topic if topic is None else topic
    while True:  # in slices, so that a refusal (a wrong password, TLS) ends the wait at once
        remaining = max(0.1, deadline - time.monotonic())
        try:
            metadata: Any = admin.list_topics(timeout=min(remaining, 0.5))  # all topics: naming one may create it
            break
        except KafkaException as exc:
            admin.poll(0)  # error callbacks are served only by poll
            refused(admin)
            if time.monotonic() + 0.01 >= deadline:
                raise InfrastructureUnavailable(
                    f"no Kafka broker answered at {options.bootstrap} within {options.connect_timeout:g} s "
                    f"(connect_timeout): {_words(exc)}") from None
    found = metadata.topics.get(topic)
    if found is None or (found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    return len(found.partitions)


def ensure_topic(options: KafkaOptions) -> int:
    """Create the leader topic with M partitions if missing; return M (checked against `partitions`)."""
    admin = admin_client(options)
    deadline = time.monotonic() + options.connect_timeout
    count = partition_count(admin, options, deadline)
    if count is None:
        count = _create(admin, options, options.topic, options.partitions or DEFAULT_PARTITIONS, deadline,
                        TOPIC_CONFIG)
    if options.partitions is not None and count != options.partitions:
        raise ConfigError(f"topic {options.topic!r} exists with {count} partitions, not {options.partitions}; "
                          f"M cannot change while a group uses the topic: use partitions={count}, or another topic",
                          parameter="partitions")
    return count


def ensure_parking_topic(options: KafkaOptions) -> str:
    """Create the parking topic (one partition) if missing; return its name."""
    topic = parking_topic(options.topic)
    admin = admin_client(options)
    deadline = time.monotonic() + options.connect_timeout
    if partition_count(admin, options, deadline, topic) is None:
        _create(admin, options, topic, 1, deadline)
    return topic


_HOUR_MS = 3_600_000
TOPIC_CONFIG = {"retention.ms": str(_HOUR_MS), "segment.ms": str(_HOUR_MS), "segment.jitter.ms": str(_HOUR_MS // 2)}
"""Configs of a leader topic the elector creates: heartbeats older than a session are never read again, so an
hour is kept (a topic kept 7 days, Kafka's default, grows by GBs a day at 60 roles), in segments of an hour that
roll at different times per partition (a roll makes fresh index files: see the module's docstring)."""
WARM_PADDING = 4096 + 128
"""Bytes of the padding record that takes a fresh partition past Kafka's default `index.interval.bytes`."""
WARM_CHUNK = 4
"""Partitions whose first index entries one produce request makes the broker write: members that found the topic
made may lead already, and their heartbeats wait behind a request that writes many (~5 ms a partition here)."""


def _create(admin: AdminClient, options: KafkaOptions, topic: str, wanted: int, deadline: float,
            config: dict[str, str] | None = None) -> int:
    """Create `topic` with `wanted` partitions and `config` (a peer may create it first); return its partition
    count. Only the member that created the topic warms it (`_warm`)."""
    future = admin.create_topics([NewTopic(topic, num_partitions=wanted, replication_factor=options.replication,
                                           config=config or {})],
                                 request_timeout=max(0.1, deadline - time.monotonic()))[topic]
    created = False
    try:
        future.result(timeout=max(0.1, deadline - time.monotonic()))
        created = True
    except KafkaException as exc:
        code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
        if code != KafkaError.TOPIC_ALREADY_EXISTS:  # a peer created it first: fine, check it below
            raise InfrastructureUnavailable(f"could not create topic {topic!r} with {wanted} "
                                            f"partitions on {options.bootstrap}: {_words(exc)}") from None
    except TimeoutError:
        raise InfrastructureUnavailable(f"creating topic {topic!r} on {options.bootstrap} did not "
                                        f"finish within connect_timeout ({options.connect_timeout:g} s)") from None
    count = _await_count(admin, options, deadline, topic)
    if created and config is not None:
        _warm(options, topic, count, deadline)
    return count


def _warm(options: KafkaOptions, topic: str, partitions: int, deadline: float) -> None:
    """Write every partition of the new `topic` past its first index entry (the module's docstring says why):
    a padding record of `WARM_PADDING` bytes to each, then an empty one to each, `WARM_CHUNK` partitions a request,
    each request acknowledged before the next. Readers skip both (`Heartbeat.decode`). Best effort: a warm-up the
    broker does not finish by `deadline` is logged and left, since it costs time only, never safety."""
    producer = Producer({"bootstrap.servers": options.bootstrap, "linger.ms": 0, "acks": 1,
                         "enable.idempotence": False, "allow.auto.create.topics": False,
                         "socket.connection.setup.timeout.ms": int(options.connect_timeout * 1000),
                         "log_level": 3, **options.client_security()})
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(err.str())

    rounds = [(bytes(WARM_PADDING), range(partitions))]  # cheap: a plain append to each partition's log
    rounds += [(b"", range(start, min(partitions, start + WARM_CHUNK))) for start in range(0, partitions, WARM_CHUNK)]
    for value, chunk in rounds:
        for partition in chunk:
            producer.produce(topic, value=value, partition=partition, on_delivery=delivered)
        left = producer.flush(max(0.1, deadline - time.monotonic()))
        if left or failed:
            log.info("neli: topic %s was created but not warmed (%s); the broker writes its first index "
                     "entries while members lead", topic, failed[0] if failed else f"{left} records unsent")
            return


def _await_count(admin: AdminClient, options: KafkaOptions, deadline: float, topic: str) -> int:
    """A created topic shows up in metadata a moment later."""
    while True:
        count = partition_count(admin, options, deadline, topic)
        if count:
            return count
        if time.monotonic() >= deadline:
            raise InfrastructureUnavailable(f"topic {topic!r} was created but does not show in the "
                                            f"metadata of {options.bootstrap} within {options.connect_timeout:g} s")
        time.sleep(0.05)


def _words(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else str(exc)
