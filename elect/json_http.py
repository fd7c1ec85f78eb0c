"""JSON over HTTP as the etcd gateway and the Kubernetes API speak it: a body read as one object, and a streamed
answer (a watch) read as one object per line. Shared by `etcd_gateway` and `kube_api`."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

JSON = dict[str, Any]


def parse_object(raw: bytes, error_key: str) -> JSON:
    """`raw` as a JSON object; anything else (HTML from a proxy, a list, garbage) as {error_key: what it said}."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        return {error_key: raw[:200].decode(errors="replace")}
    return data if isinstance(data, dict) else {error_key: str(data)[:200]}


def json_lines(conn: http.client.HTTPConnection, response: http.client.HTTPResponse, read_timeout: float,
               error_key: str) -> Iterator[JSON]:
    """The objects of a streamed answer, one per line, until the server ends it. Reads wait at most
    `read_timeout` each: a stream gone silent (a frozen server) ends in an error rather than a hang."""
    if conn.sock is not None:
        conn.sock.settimeout(read_timeout)
    while True:
        line = response.readline()
        if not line:
            return
        yield parse_object(line, error_key)


def shut(conn: http.client.HTTPConnection | None) -> None:
    """End a stream from another thread: its reader gets an error or the end of the stream."""
    if conn is not None and conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_RDWR)
