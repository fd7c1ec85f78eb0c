"""`kafka://` options: what the URL or YAML may say, and every combination that cannot work.

Durations are seconds. Unset timings are derived from `session_timeout`, so one knob (the failure
detection budget shared with the other methods) sets a consistent configuration. Importing this module
must not import confluent_kafka: the registry loads it to validate a URL before the extra is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, TypedDict

from elect.contract import Characteristics
from elect.options import port_number, rule
from elect.secrets import AccessOptions
from elect.shares import refuse_capacity

Mode = Literal["fast", "full"]
Protocol = Literal["classic", "consumer"]
Assignment = Literal["cooperative-sticky", "range", "roundrobin"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

UNWEIGHED = ("NELI leads what the consumer group assigns, and the assignor is librdkafka's (range, roundrobin, "
             "cooperative-sticky: classic protocol) or the broker's (KIP-848), none of which weighs or caps members; "
             "confluent-kafka cannot plug in an assignor of our own")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
CLASSIC_FLOOR = 1.0
"""The shortest session an exclusive member on the classic group protocol accepts (see `KafkaOptions`)."""
DEFAULT_PARTITIONS = 12  # divisible by 1, 2, 3, 4 and 6 members, so small groups share roles evenly


class CoreSettings(TypedDict):
    """The `NeliCore` arguments that follow from a member's options (typed, so `NeliCore(**settings)` is checked)."""

    mode: Mode
    interval: float
    timeout: float
    claim_timeout: float
    overlap: bool
    release_margin: float


@dataclass(frozen=True)
class KafkaOptions(AccessOptions):
    """Options of the NELI elector (see neli/__init__.py for what each mode promises). TLS and credentials:
    `elect.secrets.AccessOptions` (ca, cert, key: TLS to the brokers; user with password_file or password_env: SASL
    with the mechanism below), passed to every client and admin client the elector makes. sasl_mechanism: PLAIN or
    SCRAM-SHA-256/512.

    servers: bootstrap `host:port` list. topic: the leader topic (created with `partitions` partitions
    on first use). group: the consumer group (default: the topic's name); several groups may share a
    topic. mode: `fast` (exclusive, owner heartbeats to itself) or `full` (every member publishes to
    every partition; overlap instead of gaps when `heartbeat_timeout` exceeds the session timeout).
    session_timeout: Kafka's consumer session timeout (failure detection). heartbeat_interval: how
    often NELI heartbeat records are published. heartbeat_timeout: fast mode: how long an owner leads
    without reading back its own heartbeat; full mode: the paper's threshold T. group_heartbeat_interval:
    Kafka's consumer heartbeat to the group coordinator. poll_interval: longest block in one poll
    (default 50 ms, or half the heartbeat interval where that is shorter).
    partitions: M (None: the existing topic's count, else 12). assignment: the partition assignor.
    static_membership: use the member id as `group.instance.id`. connect_timeout: bound on reaching
    the broker at start. revoke_timeout: longest wait for blocking Revoked callbacks. rejoin_delay: how
    long a member stays parked (subscribed to TOPIC.parked, not TOPIC) after `resign` / `remove_roles`
    so that others take over. replication: replication factor when creating the topic (-1: the broker's default).
    protocol: the consumer group protocol: `classic` (JoinGroup / SyncGroup, the client's assignor and
    timeouts) or `consumer` (KIP-848, Apache Kafka 4.0+: the broker assigns, and the group's session timeout
    and heartbeat interval are group configs the elector sets on the broker before joining).
    weight, max_roles: accepted only as 1 and unset (`UNWEIGHED` says why), so a configuration shared with the
    methods that honour them fails here with the reason rather than as an unknown parameter.
    """

    servers: tuple[str, ...] = ("127.0.0.1:9092",)
    topic: str = "elect.neli"
    group: str | None = None
    mode: Mode = "fast"
    session_timeout: float = 1.0
    heartbeat_interval: float | None = None
    heartbeat_timeout: float | None = None
    group_heartbeat_interval: float | None = None
    poll_interval: float | None = None
    partitions: int | None = None
    assignment: Assignment = "cooperative-sticky"
    static_membership: bool = False
    connect_timeout: float = 10.0
    revoke_timeout: float = 30.0
    rejoin_delay: float | None = None
    replication: int = -1
    protocol: Protocol = "classic"
    sasl_mechanism: SaslMechanism | None = None
    weight: float = 1.0
    max_roles: int | None = None

    def __post_init__(self) -> None:
        self._check_access()
        rule(bool(self.user) == bool(self.sasl_mechanism), "sasl_mechanism" if self.user else "user",
             "SASL needs both user and sasl_mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
        refuse_capacity("kafka", self.weight, self.max_roles, UNWEIGHED)
        rule(bool(self.servers) and all(_host_port(s) for s in self.servers), "servers",
             f"expected HOST:PORT[,HOST:PORT...], got {','.join(self.servers) or '(none)'}")
        rule(bool(_TOPIC.match(self.topic)), "topic",
             f"{self.topic!r} is not a valid Kafka topic name (1-249 of letters, digits, '.', '_', '-')")
        rule(self.group is None or bool(self.group.strip()), "group", "cannot be empty")
        for name in ("session_timeout", "connect_timeout", "revoke_timeout"):
            rule(getattr(self, name) > 0, name, "must be > 0")
        for name in ("heartbeat_interval", "heartbeat_timeout", "group_heartbeat_interval", "poll_interval"):
            value = getattr(self, name)
            rule(value is None or value > 0, name, "must be > 0")
        rule(self.rejoin_delay is None or self.rejoin_delay >= 0, "rejoin_delay", "must be >= 0")
        rule(self.partitions is None or 1 <= self.partitions <= 10000, "partitions", "must be 1..10000")
        rule(self.replication == -1 or self.replication >= 1, "replication", "must be -1 (broker default) or >= 1")
        session = self.session_timeout
        rule(session >= 0.001 and abs(session * 1000 - round(session * 1000)) < 1e-6, "session_timeout",
             "Kafka takes whole milliseconds >= 1 ms")

        interval, timeout, group_interval = self.interval, self.timeout, self.group_interval

        rule(group_interval < session, "group_heartbeat_interval",
             f"Kafka requires the consumer heartbeat ({group_interval:g} s) below session_timeout ({session:g} s)")
        rule(timeout >= 2 * interval, "heartbeat_timeout",
             f"must be at least 2 x heartbeat_interval ({timeout:g} s < 2 x {interval:g} s): one late heartbeat "
             "would fence a healthy leader")
        rule(self.poll <= interval, "poll_interval",
             f"must not exceed heartbeat_interval ({self.poll:g} s > {interval:g} s): heartbeats are "
             "published from the poll loop and would go out late")
        if self.mode == "fast":
            rule(timeout + group_interval < session, "heartbeat_timeout",
                 f"fast mode is exclusive only if an owner fences itself before the coordinator can give its "
                 f"partitions away: heartbeat_timeout + group_heartbeat_interval ({timeout:g} + "
                 f"{group_interval:g} s) must be < session_timeout ({session:g} s); use mode=full for "
                 "overlap instead")
        rule(not (self.protocol == "classic" and self.exclusive and session < CLASSIC_FLOOR), "session_timeout",
             f"the classic group protocol does not hold a group steady below a {CLASSIC_FLOOR:g} s session: bare "
             "confluent-kafka consumers of one group at rest on Apache Kafka 4.4 were revoked 207 times a minute at "
             "0.2 s, 111 at 0.5 s, none at 1 s (bench/bare/kafka_group_at_rest.py), and on a group that keeps "
             "rebalancing two owners of one partition overlapped (9 ms at 0.1 s), which an exclusive mode must not; "
             "use protocol=consumer (KIP-848, Apache Kafka 4.0+: held at 0.1 s) or session_timeout >= "
             f"{CLASSIC_FLOOR:g}")
        rule(self.protocol == "classic" or self.assignment == "cooperative-sticky", "assignment",
             "with protocol=consumer the broker assigns partitions (KIP-848); leave assignment unset")
        rule(not self.static_membership or self.rejoin >= session, "rejoin_delay",
             f"with static_membership the coordinator keeps a departed member's partitions for "
             f"session_timeout ({session:g} s), so rejoin_delay ({self.rejoin:g} s) must be at least that")

    # Resolved values: what the elector uses when an option was left unset.
    @property
    def interval(self) -> float:
        return self.heartbeat_interval or self.session_timeout / (10 if self.mode == "fast" else 5)

    @property
    def timeout(self) -> float:
        # fast: 0.75 of the session, within the exclusivity bound (heartbeat_timeout + group_heartbeat_interval <
        # session_timeout) with 0.15 of it to spare; at a 100 ms session, 0.6 left an owner 60 ms to read back a
        # heartbeat sent every 10 ms, which a busy 2-core machine missed about once a minute (3 groups x 60 s at
        # rest: 7, 0, 0 false failovers at 0.6; 0, 0, 0 at 0.75)
        return self.heartbeat_timeout or self.session_timeout * (0.75 if self.mode == "fast" else 2.0)

    @property
    def max_drift(self) -> float | None:
        """The clock-rate difference an exclusive configuration tolerates (`Characteristics.max_drift`): an owner
        fences `timeout` after its last heartbeat and beats the group every `group_interval`, on its clock; the
        coordinator gives its partitions away `session_timeout` after the last beat, on the broker's; in that order
        while neither clock runs (T + g) / S as fast as the other (docs/clocks.md). None: full mode above the
        bound, whose records are dated by wall clocks."""
        return self.session_timeout / (self.timeout + self.group_interval) - 1 if self.exclusive else None

    @property
    def claim_timeout(self) -> float:
        """Fast mode: how long another member's heartbeat holds an owner back, `timeout` stretched by `max_drift`.
        The other member leads until its own record is `timeout` old on its clock, and the owner dates that record
        by the two members' wall clocks: waiting exactly `timeout` left no margin, so a contender whose clock ran
        5 % fast led 28 ms before the other fenced (the kafka-fast-848 drift soak). Stretched, the wait holds for
        rates `1 + max_drift` apart or wall clocks `timeout x max_drift` apart (0.13 s at a 1 s session), the
        same tolerance the coordinator's path has. Full mode: `timeout`."""
        drift = self.max_drift
        return self.timeout * (1 + drift) if self.mode == "fast" and drift is not None else self.timeout

    def core_settings(self) -> CoreSettings:
        """The `NeliCore` settings these options give (the elector and the simulator build the same core)."""
        return {"mode": self.mode, "interval": self.interval, "timeout": self.timeout,
                "claim_timeout": self.claim_timeout, "overlap": not self.exclusive,
                "release_margin": max(2 * self.poll, min(0.1, self.timeout / 4))}

    @property
    def poll(self) -> float:
        """The longest block in one poll: 50 ms, or half the heartbeat interval where that is shorter (a budget
        of 100 ms publishes every 10 ms, from the poll loop)."""
        return self.poll_interval if self.poll_interval is not None else min(0.05, self.interval / 2)

    @property
    def group_interval(self) -> float:
        return self.group_heartbeat_interval or self.session_timeout / 10

    @property
    def group_id(self) -> str:
        return self.group or self.topic

    @property
    def rejoin(self) -> float:
        return 2 * self.session_timeout if self.rejoin_delay is None else self.rejoin_delay

    @property
    def exclusive(self) -> bool:
        """Fast mode always; full mode when T fences a cut-off owner before it can be replaced."""
        return self.mode == "fast" or self.timeout + self.group_interval < self.session_timeout

    def characteristics(self) -> Characteristics:
        """What a `kafka://` member with these options promises (`KafkaElector.characteristics`)."""
        token = "offset of the own heartbeat record that started the leadership"
        notes = ("KIP-848 consumer protocol: the session timeout and heartbeat interval are the group's configs, "
                 "set on the broker by the elector" if self.protocol == "consumer" else
                 "classic group protocol: the client sets the session timeout, heartbeat interval and assignor")
        if self.exclusive:
            return Characteristics(exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=True,
                                   token=token, notes=notes, max_drift=self.max_drift)
        # T, plus one heartbeat interval: an owner the group dropped behind its back extends its leadership on the
        # group's records until it reads its successor's claim. A claim that waited for the successor's next beat
        # made that T + 63-90 ms at an interval of 200 ms (kafka-full seeds 62 and 166 of `elect bench sim-neli`),
        # and a successor paused before that beat made it 2.59 s at T = 2 s (seed 4775); a leadership now publishes
        # its claim as it begins (`NeliCore._announce`), which leaves T plus a network delay, within this bound.
        # no drift bound: a member dates the others' records by their senders' wall clocks, so the overlap bound
        # rests on wall-clock offsets as well as rates (docs/clocks.md)
        return Characteristics(exclusive=False, max_overlap=self.timeout + self.interval, max_failover=None,
                               graceful_handover=False, token=token, notes=notes)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.servers)

    @property
    def security_protocol(self) -> str:
        """Kafka's name for how a client talks to the brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        return ("SASL_" if self.user else "") + ("SSL" if self.uses_tls else "PLAINTEXT")

    def client_security(self) -> dict[str, str]:
        """librdkafka's TLS and SASL settings for every client and admin client (reads the password now: the
        dict is handed to librdkafka and never printed)."""
        config = {"security.protocol": self.security_protocol}
        if self.uses_tls:
            config["ssl.endpoint.identification.algorithm"] = "https"  # the broker's certificate names its host
            if self.ca:
                config["ssl.ca.location"] = self.ca
            if self.cert and self.key:
                config |= {"ssl.certificate.location": self.cert, "ssl.key.location": self.key}
        if self.user and self.sasl_mechanism:
            config |= {"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.user,
                       "sasl.password": self.password() or ""}
        return config


def _host_port(text: str) -> bool:
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port_number(port) is not None)
