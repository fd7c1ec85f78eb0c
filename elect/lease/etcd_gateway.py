"""A small client of etcd's v3 JSON gateway (`/v3/...`): requests with a time budget, endpoint failover,
and the watch stream.

Standard library only: one keep-alive HTTP connection at a time, moved to the next endpoint when a
request fails or the member has no leader, so a killed or isolated etcd member costs one attempt.
The watch is a long POST answered with one JSON object per line.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

JSON = dict[str, Any]

#: gRPC codes after which another member may answer: Unavailable, DeadlineExceeded, Unknown, Aborted.
_RETRY_CODES = {14, 4, 2, 10}
_NOT_FOUND = 5


class Unreachable(Exception):
    """No endpoint answered within the budget."""


class GatewayError(Exception):
    """etcd refused the request (the message is etcd's)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.code == _NOT_FOUND


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def range_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with `prefix`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def revision(data: JSON) -> int:
    return int(data.get("header", {}).get("revision", 0))


def _attempt_budget(remaining: float, attempt: int, endpoints: int) -> float:
    """One attempt's share of a request's budget: on the first round, the rest split among the endpoints not
    yet tried (but at least half a second, where that much is left), so a member that accepts connections and
    does not answer (restarting, or without a leader) cannot spend the whole budget; on the second round, all
    that is left."""
    untried = endpoints - attempt
    if untried <= 1:
        return remaining
    return max(remaining / untried, min(remaining, 0.5))


def _split(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


class Gateway:
    """Requests to whichever endpoint answers; `requests` counts what was sent."""

    def __init__(self, endpoints: tuple[str, ...]) -> None:
        self.endpoints = tuple(_split(e) for e in endpoints)
        self._index = 0
        self._conn: http.client.HTTPConnection | None = None
        self.requests = 0

    @property
    def current(self) -> int:
        return self._index

    def call(self, path: str, body: JSON, timeout: float) -> JSON:
        """POST `body` to `/v3/<path>`; tries each endpoint at most twice within `timeout` seconds, each attempt
        within its share (`_attempt_budget`)."""
        deadline = time.monotonic() + timeout
        payload = json.dumps(body).encode()
        errors: list[str] = []
        for attempt in range(2 * len(self.endpoints)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            host, port = self.endpoints[self._index]
            try:
                status, raw = self._post(path, payload, _attempt_budget(remaining, attempt, len(self.endpoints)))
            except (OSError, http.client.HTTPException) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                self._next()
                continue
            data = _parse(raw)
            if status == 200:
                return data
            code, message = int(data.get("code", -1)), str(data.get("error") or data.get("message") or raw[:200])
            if code in _RETRY_CODES or "leader" in message:
                errors.append(f"{host}:{port}: {message}")
                self._next()
                continue
            raise GatewayError(code, message)
        raise Unreachable("; ".join(errors) or f"no answer within {timeout:g} s")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, path: str, payload: bytes, timeout: float) -> tuple[int, bytes]:
        if self._conn is None:
            host, port = self.endpoints[self._index]
            self._conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn = self._conn
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        else:
            conn.timeout = timeout
        self.requests += 1
        conn.request("POST", "/v3/" + path, body=payload, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()

    def _next(self) -> None:
        self.close()
        self._index = (self._index + 1) % len(self.endpoints)


def _parse(raw: bytes) -> JSON:
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {"error": raw[:200].decode(errors="replace")}
    return data if isinstance(data, dict) else {"error": str(data)[:200]}


class WatchStream:
    """One watch of a key range on one endpoint: iterate it for the `result` objects etcd sends."""

    def __init__(self, endpoint: tuple[str, int], key: str, start_revision: int, connect_timeout: float,
                 read_timeout: float) -> None:
        self._endpoint = endpoint
        request: JSON = {"key": b64(key), "range_end": b64(range_end(key))}
        if start_revision > 0:
            request["start_revision"] = start_revision
        self._body = json.dumps({"create_request": request}).encode()
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._conn: http.client.HTTPConnection | None = None

    def results(self) -> Iterator[JSON]:
        host, port = self._endpoint
        self._conn = conn = http.client.HTTPConnection(host, port, timeout=self._connect_timeout)
        conn.request("POST", "/v3/watch", body=self._body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise OSError(f"watch refused: HTTP {response.status} {response.read()[:200]!r}")
        if conn.sock is not None:
            conn.sock.settimeout(self._read_timeout)
        while True:
            line = response.readline()
            if not line:
                return
            message = _parse(line)
            if "error" in message:
                raise OSError(f"watch ended: {message['error']}")
            yield message.get("result", {})

    def close(self) -> None:
        """Stop the stream from another thread (its reader gets an error or end of stream)."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
