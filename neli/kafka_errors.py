"""Kafka errors a user can fix, said in plain words with the parameter and the fix.

The broker, not the client, decides some rules (its allowed session timeouts, whether all members of a
group use the same assignor), so those surface as errors from the group protocol; this module turns
them into `ConfigError`s instead of librdkafka codes.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from elect.errors import ConfigError
from neli.options import KafkaOptions


def config_error(err: KafkaError, options: KafkaOptions) -> ConfigError | None:
    """The configuration mistake `err` reveals, or None if it is not one."""
    code = err.code()
    if code == KafkaError.INVALID_SESSION_TIMEOUT:
        return ConfigError(
            f"the broker refused session_timeout={options.session_timeout:g} s: it must lie between the broker's "
            "group.min.session.timeout.ms and group.max.session.timeout.ms (Apache Kafka's defaults: 6 s and "
            "30 min). Lower group.min.session.timeout.ms on the broker (the NELI paper suggests 100 ms) or raise "
            f"session_timeout. Broker said: {err.str()}", parameter="session_timeout")
    if code == KafkaError.INCONSISTENT_GROUP_PROTOCOL:
        return ConfigError(
            f"other members of group {options.group_id!r} use a different assignment strategy than "
            f"{options.assignment!r}; every member of a group must use the same one. Broker said: {err.str()}",
            parameter="assignment")
    if code == KafkaError.INVALID_GROUP_ID:
        return ConfigError(f"the broker refused group {options.group_id!r}: {err.str()}", parameter="group")
    if code in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return ConfigError(f"not authorized on {options.bootstrap}: {err.str()}", parameter="servers")
    if code == KafkaError.FENCED_INSTANCE_ID:
        return ConfigError(f"another process joined group {options.group_id!r} with the same member id; with "
                           "static_membership every member needs its own id", parameter="member")
    return None
