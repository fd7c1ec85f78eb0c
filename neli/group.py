"""The consumer group's own settings on the broker, for the KIP-848 protocol (`protocol=consumer`), and for the
classic protocol a warning when the broker's own group setting costs NELI time (`warn_of_broker_defaults`).

Under KIP-848 a client may not set its session timeout or heartbeat interval: the coordinator dictates
them, from the group configs `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`
(Apache Kafka 4.0+). The elector sets them before it joins, through IncrementalAlterConfigs on the GROUP
resource, so the failure-detection budget is the one the URL asked for, and the group's assignment interval
(4.3+) to 0, so a broker left at its defaults moves partitions at once. Every member sets the same values (they
come from the same URL), so the order in which members start does not matter.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from elect.errors import ConfigError, InfrastructureUnavailable
from elect.kafka_wire import CONSUMER_GROUP_HEARTBEAT, KafkaWireError, api_versions
from neli.options import KafkaOptions

log = logging.getLogger("neli")

SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
INITIAL_DELAY = "group.initial.rebalance.delay.ms"
"""A broker-wide setting no group can override (classic protocol): how long a group that forms (its first member
joining an empty group) waits for more members before its first assignment; Kafka's default is 3 s."""
ASSIGNMENT = "consumer.assignment.interval.ms"
"""How long the coordinator may wait before it computes a new assignment (Apache Kafka 4.3+; the broker's default,
`group.consumer.assignment.interval.ms`, is 1 s): every failover and handover would wait that long for the
partitions to move, so the elector asks 0 for its group. Brokers before 4.3 have no such wait, nor the config."""


def group_settings(options: KafkaOptions, assignment: bool = True) -> dict[str, str]:
    """What the group's configs must say for `options` (`assignment`: including the assignment interval)."""
    wanted = {SESSION: str(round(options.session_timeout * 1000)),
              HEARTBEAT: str(max(1, round(options.group_interval * 1000)))}
    return wanted | ({ASSIGNMENT: "0"} if assignment else {})


def speaks_consumer_protocol(options: KafkaOptions) -> bool | None:
    """Whether the first broker that answers offers KIP-848's ConsumerGroupHeartbeat (Apache Kafka 4.0+);
    None if none answers."""
    tls = options.ssl_context()  # ApiVersions is answered before SASL: no password needed
    for server in options.servers:
        host, _, port = server.rpartition(":")
        try:
            return CONSUMER_GROUP_HEARTBEAT in api_versions(host.strip("[]"), int(port), options.connect_timeout, tls)
        except KafkaWireError:
            continue
    return None


def require_consumer_protocol(options: KafkaOptions) -> None:
    """ConfigError unless the broker offers KIP-848's ConsumerGroupHeartbeat (librdkafka would otherwise keep
    retrying in silence); InfrastructureUnavailable naming the addresses if no broker answers."""
    speaks = speaks_consumer_protocol(options)
    if speaks is None:
        raise InfrastructureUnavailable(f"no Kafka broker answered at {options.bootstrap} within "
                                        f"{options.connect_timeout:g} s (connect_timeout)")
    if not speaks:
        raise ConfigError(f"the broker at {options.bootstrap} does not speak the KIP-848 consumer group protocol "
                          "(no ConsumerGroupHeartbeat API; Apache Kafka 4.0+ does): use protocol=classic",
                          parameter="protocol")


def configure_group(admin: AdminClient, options: KafkaOptions) -> None:
    """Set the group's session timeout, heartbeat interval and assignment interval on the broker; a refusal says
    what to change. A broker that does not know the assignment interval (before 4.3: it assigns at once) gets the
    first two alone."""
    require_consumer_protocol(options)
    try:
        _alter(admin, options, group_settings(options))
    except KafkaException as exc:
        if ASSIGNMENT not in _said(exc):
            raise _refusal(exc, options, group_settings(options)) from None
        log.info("neli: the broker at %s does not take %s (%s); setting the session and heartbeat alone",
                 options.bootstrap, ASSIGNMENT, _said(exc))
        try:
            _alter(admin, options, group_settings(options, assignment=False))
        except KafkaException as again:
            raise _refusal(again, options, group_settings(options, assignment=False)) from None


def _alter(admin: AdminClient, options: KafkaOptions, wanted: dict[str, str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in wanted.items()]
    resource = ConfigResource(ConfigResource.Type.GROUP, options.group_id, incremental_configs=entries)
    futures: Any = admin.incremental_alter_configs([resource], request_timeout=options.connect_timeout)
    for future in futures.values():
        future.result(timeout=options.connect_timeout)


def _said(exc: KafkaException) -> str:
    err: Any = exc.args[0] if exc.args else None
    return str(err.str()) if err is not None and hasattr(err, "str") else str(exc)


def _refusal(exc: KafkaException, options: KafkaOptions, wanted: dict[str, str]) -> Exception:
    err: Any = exc.args[0] if exc.args else None
    said = _said(exc)
    name = str(err.name()) if err is not None and hasattr(err, "name") else ""
    if name in ("_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN"):
        return InfrastructureUnavailable(f"no Kafka broker answered at {options.bootstrap} within "
                                         f"{options.connect_timeout:g} s (connect_timeout): {said}")
    if name == "INVALID_CONFIG" or "must be" in said:
        return ConfigError(
            f"the broker refused group {options.group_id!r}'s {SESSION}={wanted[SESSION]} / {HEARTBEAT}="
            f"{wanted[HEARTBEAT]} (session_timeout={options.session_timeout:g} s, group_heartbeat_interval="
            f"{options.group_interval:g} s): they must lie within the broker's group.consumer.min/max.session."
            f"timeout.ms and group.consumer.min/max.heartbeat.interval.ms (Apache Kafka's defaults: min 45 s "
            f"and 5 s). Lower those minimums on the broker or raise session_timeout. Broker said: {said}",
            parameter="session_timeout")
    return ConfigError(
        f"the broker at {options.bootstrap} cannot take group configs ({said}): it does not seem to speak the "
        "KIP-848 consumer group protocol (Apache Kafka 4.0+); use protocol=classic", parameter="protocol")


def warn_of_broker_defaults(admin: AdminClient, options: KafkaOptions) -> None:
    """Classic protocol: read, once at start, the broker setting a group cannot set for itself and that costs NELI
    time (`INITIAL_DELAY`), and name it in a warning if it is not 0 (the group works, only slower to form). A broker
    that does not say (no DescribeConfigs, or not allowed to this client) is not warned of."""
    if options.protocol != "classic":
        return
    try:
        brokers = admin.list_topics(timeout=options.connect_timeout).brokers
        node = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
        futures: Any = admin.describe_configs([node], request_timeout=options.connect_timeout)
        said = next(iter(futures.values())).result(timeout=options.connect_timeout)
        entry = said.get(INITIAL_DELAY)
        delay = int(entry.value) if entry is not None and entry.value else 0
    except (KafkaException, ValueError, StopIteration, TimeoutError) as exc:
        log.debug("neli: could not read %s from %s: %s", INITIAL_DELAY, options.bootstrap, exc)
        return
    if delay > 0:
        log.warning("neli: the broker at %s has %s=%d: a group that forms (its first member, or every member "
                    "starting together) waits %g s for more before its first assignment, so a cold start takes that "
                    "much longer; set it to 0 on the broker (a broker-wide setting no group can override)",
                    options.bootstrap, INITIAL_DELAY, delay, delay / 1000)
