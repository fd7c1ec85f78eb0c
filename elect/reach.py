"""Whether anything listens at a method's endpoints: a refused connection is an answer that waiting will not change.

The clients elect drives retry a refused connection until their connect timeout (kazoo, librdkafka, the HTTP
clients), so a wrong port or a store that is not running took the whole `connect_timeout` to report. A member
asks first, with one TCP connect per endpoint, and says at once when every endpoint refused (`require_listening`).
An endpoint that does not answer at all (a frozen host, a filtered port) is left to the client's own timeout: it
may still answer.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from elect.errors import InfrastructureUnavailable


def split_endpoint(endpoint: str, default_port: int | None = None) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) as (host, port)."""
    host, sep, port = endpoint.rpartition(":")
    if not sep or "]" in port:
        if default_port is None:
            raise ValueError(f"{endpoint!r} has no port")
        return endpoint.strip("[]"), default_port
    return host.strip("[]"), int(port)


def refused(endpoint: str, timeout: float = 1.0) -> bool:
    """True only if a TCP connection to `endpoint` was refused (nothing listens there); a time-out or any other
    failure, and a connection made, are False."""
    try:
        host, port = split_endpoint(endpoint)
        with socket.create_connection((host, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


def require_listening(what: str, endpoints: Iterable[str], timeout: float = 1.0) -> None:
    """Raise InfrastructureUnavailable at once if every one of `endpoints` refused the connection."""
    listed = list(endpoints)
    if listed and all(refused(e, timeout) for e in listed):
        raise InfrastructureUnavailable(f"{what} at {','.join(listed)} refused the connection: is it running, and is "
                                        "this its port?")
