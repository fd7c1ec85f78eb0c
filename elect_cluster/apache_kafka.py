"""Apache Kafka in KRaft mode, from the Maven Central jars: one node, or a three-node quorum.

The jars are resolved by Maven from ``cluster/kafka/pom.xml`` (pinned version) into a cache directory
outside the repository, once (``./setup`` does it; ``elect cluster up`` does it when they are missing and
Maven is there). Every node is broker and controller; one node formats its storage ``--standalone``,
three nodes name each other in ``controller.quorum.voters``.

Settings chosen for fast consumer groups, so a group's handover is bounded by the session timeout the
elector asks for and not by broker defaults:

- ``group.initial.rebalance.delay.ms=0``: a new group forms at once (classic protocol);
- ``group.min.session.timeout.ms`` / ``group.consumer.min.session.timeout.ms`` /
  ``group.consumer.min.heartbeat.interval.ms`` lowered (100 ms / 100 ms / 10 ms), so a session of 100 ms, the
  smallest detection budget elect is measured at, is allowed with its heartbeat of a tenth of it;
- ``group.consumer.assignment.interval.ms=0``: the KIP-848 coordinator assigns without batching delay;
- ``offsets.topic.num.partitions=1``: one coordinator for every group (coordinator start is fast, and
  `leader()` names the broker an infrastructure fault should hit);
- ``broker.session.timeout.ms`` lowered so a dead broker's partitions move within seconds.

``tuned=False`` (the ``apache-defaults`` broker of ``elect cluster up --broker`` and the scenarios) keeps only the
lowered minimums, which a detection budget below Kafka's defaults needs (the elector's refusal names them), and
leaves the two group settings users rarely change at Kafka's defaults: ``group.initial.rebalance.delay.ms``
(3 s) and ``group.consumer.assignment.interval.ms`` (1 s, Kafka 4.3+). That is a broker as users configure it,
to measure what those defaults cost (a KIP-848 member sets its own group's assignment interval to 0:
neli/group.py).

The JVM runs with Kafka's own collector settings (kafka-run-class.sh: G1, 20 ms pause target) and C1 only (the
broker's work here is light and starts in ~3 s). The serial collector it ran with before paused the broker for up
to 56 ms (GC log of a 60 s run at D = 100 ms), most of a 100 ms budget's heartbeat timeout; G1 stayed under 20 ms.

Secured (``security``, one node): clients reach the broker only through a SASL_SSL listener (the server
certificate in PEM; PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled). PLAIN users are listed in the listener's
JAAS configuration, SCRAM credentials are written into the KRaft metadata when the storage is formatted
(``--add-scram``); both for the user ``elect``. The controller listener stays plaintext on the loopback host
(docs/architecture.md, Threat model). The probe asks ApiVersions over TLS (answered before authentication);
``configure`` waits until the user can log in with SCRAM and read the metadata.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from elect.kafka_wire import METADATA, KafkaWireError, api_versions, find_coordinator, metadata_brokers

from .errors import ClusterError, MissingBinary, NotReady
from .kafka_broker import probe_broker
from .ports import free_ports
from .process import ProcessSpec
from .security import ADMIN, SCRAM, Security, context_of
from .service import Member, find_program
from .state import cache_dir
from .waiting import WaitTimeout, wait_until

_FIX = "apt-get install -y openjdk-17-jre-headless maven (then ./setup resolves the jars)"
JVM_OPTS = ("-Xms64m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")


def pom() -> Path:
    """The pom that pins Apache Kafka's version (shipped as data of `elect_cluster.files`)."""
    return Path(str(resources.files("elect_cluster.files").joinpath("kafka", "pom.xml")))


def kafka_version() -> str:
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom().read_text())
    if not found:
        raise ClusterError(f"{pom()} does not pin <kafka.version>")
    return found.group(1)


def libs_dir() -> Path:
    """Where the jars live: ``$ELECT_KAFKA_LIBS``, else a cache directory per Kafka version."""
    override = os.environ.get("ELECT_KAFKA_LIBS")
    if override:
        return Path(override)
    return cache_dir() / f"kafka-{kafka_version()}" / "libs"


def has_jars(libs: Path) -> bool:
    return libs.is_dir() and any(libs.glob("kafka_2.13-*.jar"))


def ensure_jars(timeout: float = 600.0) -> Path:
    """The jars' directory, resolving them with Maven first if they are missing."""
    libs = libs_dir()
    if has_jars(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MissingBinary(f"Apache Kafka's jars are not in {libs} and Maven is not installed. Fix: {_FIX}")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    try:
        done = subprocess.run([mvn, "-q", "-B", "-f", str(pom()), "dependency:copy-dependencies",
                               f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or not has_jars(staging):
            raise ClusterError(f"Maven could not resolve Apache Kafka {kafka_version()} from {pom()}:\n"
                               f"{(done.stdout + done.stderr)[-2000:]}")
        staging.rename(libs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class ApacheKafkaService:
    """Apache Kafka brokers (each also a KRaft controller) on free loopback ports.

    With `advertised_port` (one node only) the broker tells clients to connect there, where the caller
    puts a relay (the harness counts each member's requests), as the light broker does.
    """

    name = "kafka"
    max_members = 3

    def __init__(self, advertised_port: int | None = None, security: Security | None = None,
                 tuned: bool = True) -> None:
        self.advertised_port = advertised_port
        self.security = security
        self.tuned = tuned  # False: group settings at Kafka's defaults but the minimums (module docstring)

    def preflight(self) -> None:
        find_program("java", "ELECT_JAVA", _FIX, "/usr/bin/java")
        ensure_jars()

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        if count not in (1, 3):
            raise ClusterError("Apache Kafka runs here as 1 or 3 nodes (a KRaft quorum needs a majority)")
        if self.advertised_port is not None and count != 1:
            raise ClusterError("an advertised relay port is supported for a single broker only")
        if self.security is not None and count != 1:
            raise ClusterError("a secured Apache Kafka runs here as one node")
        java, libs = find_program("java", "ELECT_JAVA", _FIX, "/usr/bin/java"), ensure_jars()
        ports = free_ports(2 * count, host)
        clients, controllers = ports[:count], ports[count:]
        voters = ",".join(f"{i + 1}@{host}:{controllers[i]}" for i in range(count))
        ident = cluster_id()
        members: list[Member] = []
        formats: list[tuple[Member, tuple[str, ...]]] = []
        for i in range(count):
            node = root / f"kafka-{i}"
            shutil.rmtree(node, ignore_errors=True)
            node.mkdir(parents=True)
            advertised = self.advertised_port or clients[i]
            config = node / "server.properties"
            settings = _properties(i + 1, host, clients[i], advertised, controllers[i], voters, count, node / "data",
                                   self.tuned)
            if self.security is not None:
                settings = {**settings, **_secured(self.security, host, clients[i], advertised, controllers[i])}
            config.touch(mode=0o600)  # secured, it lists passwords
            config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            cmd = (java, *JVM_OPTS, "-cp", f"{libs}/*")
            spec = ProcessSpec(argv=(*cmd, "kafka.Kafka", str(config)), cwd=str(node), log=str(node / "kafka.log"),
                               env={"KAFKA_HEAP_OPTS": ""}, drop_env=("KAFKA_", "CLASSPATH", "JAVA_TOOL_OPTIONS"))
            ports_of = {"client": advertised, "listen": clients[i], "controller": controllers[i]}
            extra = {"security": str(self.security.root)} if self.security is not None else {}
            members.append(Member("kafka", i, host, ports_of, spec, extra=extra))
            scram: tuple[str, ...] = () if self.security is None else tuple(
                word for mechanism in (SCRAM, "SCRAM-SHA-512") for word in
                ("--add-scram", f"{mechanism}=[name={self.security.user},password={self.security.password()}]"))
            formats.append((members[-1], (*cmd, "kafka.tools.StorageTool", "format", "-t", ident, "-c", str(config),
                                          *(("--standalone",) if count == 1 else ()), *scram)))
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda job: _format(*job), formats))
        return members

    def probe(self, member: Member, timeout: float) -> str:
        context = context_of(member.extra)
        if context is None:
            return probe_broker(member, timeout)
        try:  # before authentication a broker answers ApiVersions only: the rest waits for `configure`
            if METADATA not in api_versions(member.host, member.ports["listen"], timeout, context):
                raise NotReady("broker does not offer the Metadata API")
        except KafkaWireError as exc:
            raise NotReady(str(exc)) from exc
        return "broker"

    def configure(self, members: list[Member], timeout: float) -> None:
        """Secured: wait until the user logs in with SCRAM and reads the metadata (the SCRAM credentials are in
        the metadata log, which the broker has read once this works)."""
        sec = self.security
        if sec is None:
            return
        from confluent_kafka.admin import AdminClient

        servers = ",".join(m.address for m in members)
        admin = AdminClient({"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
                             "ssl.ca.location": str(sec.ca), "sasl.mechanism": SCRAM, "sasl.username": sec.user,
                             "sasl.password": sec.password(), "log_level": 3})

        def listed() -> bool:
            try:
                admin.list_topics(timeout=2.0)
            except Exception:
                return False
            return True

        try:
            wait_until(listed, timeout, 0.2, what=f"user {sec.user!r} logging in to Kafka with {SCRAM}")
        except WaitTimeout as exc:
            raise ClusterError(f"the secured Kafka broker did not let {sec.user!r} in: {exc}") from None

    def probe_group(self, members: list[Member], timeout: float) -> None:
        if len(members) < 2:
            return
        try:
            seen = metadata_brokers(members[0].host, members[0].ports["listen"], timeout)
        except KafkaWireError as exc:
            raise NotReady(str(exc)) from exc
        if len(seen) < len(members):
            raise NotReady(f"{len(seen)} of {len(members)} brokers registered with the quorum")

    def leader(self, members: list[Member], timeout: float) -> int | None:
        """The broker that coordinates every group (one offsets partition), as the fault to hit."""
        if self.security is not None:  # one node, and FindCoordinator would need a login
            return members[0].index if members else None
        for m in members:
            try:
                node = find_coordinator(m.host, m.ports["listen"], "elect", timeout)
            except KafkaWireError:
                continue
            if node is not None:
                return node - 1
        return None


def _format(member: Member, argv: tuple[str, ...]) -> None:
    """Write the node's KRaft metadata (cluster id, voters) before its first start."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=member.spec.cwd)
    if done.returncode != 0:
        raise ClusterError(f"formatting {member.label}'s KRaft storage failed:\n{(done.stdout + done.stderr)[-2000:]}")


def _secured(sec: Security, host: str, port: int, advertised: int, controller: int) -> dict[str, object]:
    """The settings that put clients behind SASL_SSL (the broker logs in to itself with PLAIN as `admin`). The key
    store is given inline (PEM in the properties, newlines escaped): a PEM key store *file* needs an encrypted
    key and its password, inline PEM takes the unencrypted key `elect certs make` writes."""
    admin, user = sec.admin_password(), sec.password()
    plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
             f'username="{ADMIN}" password="{admin}" user_{ADMIN}="{admin}" user_{sec.user}="{user}";')
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{host}:{controller}",
        "advertised.listeners": f"SASL_SSL://{host}:{advertised}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": f"PLAIN,{SCRAM},SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": _inline(sec.server_key.read_text()),
        "ssl.keystore.certificate.chain": _inline(sec.server_cert.read_text()),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": sec.ca,
        "ssl.client.auth": "none",  # SASL authenticates the client; a client certificate is not asked for
    }


def _inline(pem: str) -> str:
    """PEM text as one line of a Java properties file (`\\n` is read back as a newline)."""
    return pem.strip().replace("\n", "\\n")


UNTUNED = ("group.initial.rebalance.delay.ms", "group.consumer.assignment.interval.ms")
"""The settings an untuned broker (``tuned=False``) leaves at Kafka's defaults."""


def _properties(node_id: int, host: str, port: int, advertised: int, controller: int, voters: str, count: int,
                data: Path, tuned: bool = True) -> dict[str, object]:
    replicas = min(count, 3)
    settings = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters" if count > 1 else "controller.quorum.bootstrap.servers":
            voters if count > 1 else f"{host}:{controller}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller}",
        "advertised.listeners": f"PLAINTEXT://{host}:{advertised}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": data,
        "num.partitions": 1,
        "auto.create.topics.enable": "false",
        # topics created without a replication factor (the elector's default) are replicated on 3 brokers, and
        # a write is acknowledged by 2 of them, so losing one broker loses no heartbeat (and no token)
        "default.replication.factor": replicas,
        "min.insync.replicas": min(replicas, 2),
        "offsets.topic.num.partitions": 1,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min(replicas, 2),
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min(replicas, 2),
        "group.initial.rebalance.delay.ms": 0,
        "group.min.session.timeout.ms": 100,
        "group.consumer.min.session.timeout.ms": 100,
        "group.consumer.min.heartbeat.interval.ms": 10,
        "group.consumer.assignment.interval.ms": 0,
        "broker.heartbeat.interval.ms": 500,
        "broker.session.timeout.ms": 3000,
    }
    if not tuned:
        for default in UNTUNED:
            del settings[default]
    return settings
