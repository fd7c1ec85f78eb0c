"""A few Kafka requests spoken directly over a socket, with the standard library only.

What confluent-kafka does not expose: which APIs a broker offers (ApiVersions: does it speak KIP-848's
ConsumerGroupHeartbeat?), the brokers it advertises (Metadata) and a group's coordinator
(FindCoordinator). The elector asks before joining; `elect_cluster` uses the same requests to probe the
brokers it starts. With a TLS context the socket speaks TLS first; ApiVersions is answered before any SASL
authentication (the broker must say which SASL handshake versions it takes), so it needs no password.
"""

from __future__ import annotations

import socket
import ssl
import struct

API_VERSIONS = 18
METADATA = 3
FIND_COORDINATOR = 10
CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848


class KafkaWireError(Exception):
    """The broker answered, but not as the protocol says; or nothing answered (from OSError)."""


def _request(sock: socket.socket, api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    client = b"elect-probe"
    header = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _read(sock, 4))[0]
    payload = _read(sock, size)
    if struct.unpack(">i", payload[:4])[0] != correlation:
        raise KafkaWireError("Kafka response carries the wrong correlation id")
    return payload[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise KafkaWireError("broker closed the connection mid-response")
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


def _call(host: str, port: int, timeout: float, api_key: int, version: int, body: bytes,
          tls: ssl.SSLContext | None = None) -> _Reader:
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            sock = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
            return _Reader(_request(sock, api_key, version, 1, body))
    except OSError as exc:
        raise KafkaWireError(f"no Kafka broker at {host}:{port}: {exc}") from exc
    except struct.error as exc:
        raise KafkaWireError(f"malformed answer from {host}:{port}: {exc}") from exc


def api_versions(host: str, port: int, timeout: float = 2.0,
                 tls: ssl.SSLContext | None = None) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: the broker's supported (min, max) version per API key."""
    r = _call(host, port, timeout, API_VERSIONS, 0, b"", tls)
    error = r.take(">h")
    if error != 0:
        raise KafkaWireError(f"ApiVersions returned error code {error}")
    return {r.take(">h"): (r.take(">h"), r.take(">h")) for _ in range(r.take(">i"))}


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Metadata v1 for no topics: the brokers (node id, host, port) the broker advertises."""
    r = _call(host, port, timeout, METADATA, 1, struct.pack(">i", 0))
    brokers = []
    for _ in range(r.take(">i")):
        node, bhost, bport = r.take(">i"), r.string(), r.take(">i")
        r.string()  # rack (nullable)
        brokers.append((node, bhost, bport))
    return brokers


def find_coordinator(host: str, port: int, group: str, timeout: float = 2.0) -> int | None:
    """FindCoordinator v0: the node id of `group`'s coordinator, or None while there is none."""
    key = group.encode()
    r = _call(host, port, timeout, FIND_COORDINATOR, 0, struct.pack(">h", len(key)) + key)
    error, node = r.take(">h"), r.take(">i")
    return None if error else node
