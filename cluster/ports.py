"""Free TCP ports chosen by the OS, so tests and clusters never collide on hard-coded numbers."""

from __future__ import annotations

import socket
import threading

# Ports already handed out by this process: the OS may offer a port again as soon as its probe socket is
# closed, before the service meant to use it has bound it, so we never give the same number twice.
_given: set[int] = set()
_lock = threading.Lock()


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``count`` distinct ports that were free on ``host`` a moment ago.

    All probe sockets stay bound until every port is chosen, so one call cannot return duplicates.
    A small race remains by nature (another program may take a port before the service binds it).
    """
    if count < 0:
        raise ValueError("count must be >= 0")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    held: list[socket.socket] = []
    chosen: list[int] = []
    try:
        with _lock:
            while len(chosen) < count:
                sock = socket.socket(family, socket.SOCK_STREAM)
                held.append(sock)
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
                if port not in _given:
                    chosen.append(port)
            _given.update(chosen)
    finally:
        for sock in held:
            sock.close()
    return chosen


def free_port(host: str = "127.0.0.1") -> int:
    """Return one free port on ``host``."""
    return free_ports(1, host)[0]
