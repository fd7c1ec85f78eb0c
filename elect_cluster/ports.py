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


def free_port_blocks(count: int, size: int, host: str = "127.0.0.1") -> list[int]:
    """Return the first ports of ``count`` non-overlapping blocks of ``size`` consecutive ports that were
    all free a moment ago (for servers that listen on PORT + k, like one PySyncObj per partition).

    Blocks come from below Linux's ephemeral range (32768+), where the OS never picks ports for
    outgoing connections by itself, so a block cannot be taken piecemeal by some client socket.
    """
    import random

    if count < 0 or size < 1:
        raise ValueError("count must be >= 0 and size >= 1")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    rng = random.Random()
    bases: list[int] = []
    with _lock:
        for _ in range(200 * max(1, count)):
            if len(bases) == count:
                break
            base = rng.randrange(20000, 32768 - size)
            block = set(range(base, base + size))
            if block & _given:
                continue
            socks: list[socket.socket] = []
            try:
                for port in sorted(block):
                    sock = socket.socket(family, socket.SOCK_STREAM)
                    socks.append(sock)
                    sock.bind((host, port))
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
            bases.append(base)
            _given.update(block)
    if len(bases) < count:
        raise RuntimeError(f"no {count} blocks of {size} free ports found on {host}")
    return bases
