"""Network-namespace hosts: they reach the infrastructure, a cut isolates them, teardown leaves nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from elect_cluster.netns import Hosts, leftovers

PROBE = "import socket,sys; s=socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1); print(s.recv(2))"


def serve(host: str) -> tuple[socket.socket, int]:
    server = socket.create_server((host, 0))
    server.settimeout(30)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"ok")
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return server, server.getsockname()[1]


def reach(hosts: Hosts, name: str, address: str, port: int) -> bool:
    result = subprocess.run([*hosts.exec_prefix(name), sys.executable, "-c", PROBE, address, str(port)],
                            capture_output=True, text=True, timeout=30)
    return result.returncode == 0 and "ok" in result.stdout


def test_hosts_reach_the_infrastructure_and_a_cut_isolates_one() -> None:
    with Hosts(["a", "b"]) as hosts:
        server, port = serve(hosts.gateway)
        try:
            assert reach(hosts, "a", hosts.gateway, port) and reach(hosts, "b", hosts.gateway, port)
            hosts.cut("a")
            assert not reach(hosts, "a", hosts.gateway, port)
            assert reach(hosts, "b", hosts.gateway, port)
            hosts.heal("a")
            assert reach(hosts, "a", hosts.gateway, port)
        finally:
            server.close()
    assert not leftovers(mine=True)


def test_teardown_happens_even_when_the_run_fails() -> None:
    with pytest.raises(RuntimeError, match="boom"), Hosts(["x"]) as hosts:
        assert hosts.namespace("x") in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                      text=True).stdout
        raise RuntimeError("boom")
    assert not leftovers(mine=True)
