"""One connection to the fenced store (elect_bench.fenced.store): a JSON line out, a JSON line back.

Blocking, with a timeout on every call, so a writer thread can bound how long one write takes. After any
error the connection is unusable (a late reply would answer the wrong request): close it and open another.
"""

from __future__ import annotations

import json
import socket
from types import TracebackType
from typing import Any, Self

Address = tuple[str, int]


def parse_address(text: str) -> Address:
    """`HOST:PORT` (an IPv6 host in brackets) as (host, port); ValueError naming what is wrong."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


class StoreError(OSError):
    """The store closed the connection or answered something that is not a JSON object."""


class StoreClient:
    """A connection to the store; `request` sends one object and returns the store's reply."""

    def __init__(self, address: Address, timeout: float = 5.0) -> None:
        self.address = address
        self._sock = socket.create_connection(address, timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self._sock.sendall(json.dumps(message).encode() + b"\n")
        while b"\n" not in self._buffer:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise StoreError(f"the store at {self.address[0]}:{self.address[1]} closed the connection")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError as exc:
            raise StoreError(f"not a JSON reply: {line!r}") from exc
        if not isinstance(reply, dict):
            raise StoreError(f"not a JSON object: {line!r}")
        return reply

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def dump(address: Address, timeout: float = 10.0) -> dict[str, list[dict[str, Any]]]:
    """Every accepted write per role, in the order the store accepted them."""
    with StoreClient(address, timeout) as client:
        reply = client.request({"op": "dump"})
    writes = reply.get("writes")
    if reply.get("ok") is not True or not isinstance(writes, dict):
        raise StoreError(f"the store refused a dump: {reply}")
    return writes
