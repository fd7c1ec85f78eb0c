"""Kafka errors a user can fix, said in plain words with the parameter and the fix.

The broker, not the client, decides some rules (its allowed session timeouts, whether all members of a
group use the same assignor), so those surface as errors from the group protocol; this module turns
them into `ConfigError`s instead of librdkafka codes.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from elect.errors import AccessRefused, ConfigError
from neli.options import KafkaOptions


def refusal(err: KafkaError, options: KafkaOptions) -> AccessRefused | None:
    """The refusal `err` tells of (SASL authentication, TLS, a security protocol the listener does not speak), said
    with what was refused; None if it tells of none. librdkafka's text names no password."""
    code, said = err.code(), err.str()
    where = f"Kafka at {options.bootstrap}"
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        if options.user:
            return AccessRefused(f"{where} refused the user {options.user!r} ({options.sasl_mechanism}): {said}")
        return AccessRefused(f"{where} requires authentication: give user=, sasl_mechanism= and password_file= "
                             f"(or password_env=) ({said})")
    if code == KafkaError._SSL or "SSL handshake failed" in said:
        return AccessRefused(f"TLS with {where} failed: {said}")
    if "security.protocol" in said:  # librdkafka's guess after a listener hung up on the first request
        return AccessRefused(f"{where} hung up at once ({options.security_protocol}): {said}")
    return None


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
