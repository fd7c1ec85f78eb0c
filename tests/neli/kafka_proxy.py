"""A TCP proxy in front of a Kafka-protocol broker that can cut one client off while others carry on.

A broker tells clients where to connect (its advertised listener), so the test broker advertises this
proxy's port and every connection passes through it. The proxy learns which member a connection
belongs to from the client id in the first Kafka request header, and `cut(client_id)` stops
forwarding that member's traffic in both directions without closing anything: to the member and to
the broker it looks like a network partition, not a crash.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class KafkaProxy:
    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream
        self._server = socket.create_server((host, port))
        self.address = self._server.getsockname()[:2]
        self._cond = threading.Condition()
        self._cut: set[str] = set()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True, name="kafka-proxy")
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.address[1])

    def cut(self, client_id: str) -> None:
        with self._cond:
            self._cut.add(client_id)

    def heal(self, client_id: str) -> None:
        with self._cond:
            self._cut.discard(client_id)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cut.clear()
            self._cond.notify_all()
            sockets = list(self._sockets)
        for s in [self._server, *sockets]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        with self._cond:
            self._sockets += [client, upstream]
        try:
            first = _read_frame(client)
        except OSError:
            first = None
        if first is None:
            client.close()
            upstream.close()
            return
        client_id = _client_id(first)
        threading.Thread(target=self._pump, args=(client, upstream, client_id, first), daemon=True).start()
        self._pump(upstream, client, client_id, b"")

    def _pump(self, src: socket.socket, dst: socket.socket, client_id: str, pending: bytes) -> None:
        data = pending
        while True:
            if data:
                with self._cond:  # a cut member's bytes wait here: nothing is lost, nothing passes
                    while client_id in self._cut and not self._closed:
                        self._cond.wait()
                try:
                    dst.sendall(data)
                except OSError:
                    break
            try:
                data = src.recv(65536)
            except OSError:
                break
            if not data:
                break
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _client_id(frame: bytes) -> str:
    """Request header: size, api_key, api_version, correlation_id, then client_id as an int16-prefixed string."""
    (length,) = struct.unpack_from(">h", frame, 12)
    return frame[14:14 + length].decode(errors="replace") if length > 0 else ""
