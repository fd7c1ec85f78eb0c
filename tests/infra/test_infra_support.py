"""The small shared pieces: OS-chosen ports, deadline polling, detached process groups."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from elect_cluster.ports import free_port, free_port_blocks, free_ports
from elect_cluster.process import (
    ProcessId,
    ProcessSpec,
    group_alive,
    group_members,
    is_running,
    signal_group,
    spawn,
    stop_group,
    tail,
)
from elect_cluster.waiting import WaitTimeout, holds_for, wait_until

from _infra_fixtures import process_alive

pytestmark = pytest.mark.infra


def test_free_port_blocks_do_not_overlap_and_stay_below_the_ephemeral_range() -> None:
    bases = free_port_blocks(5, 8)
    blocks = [set(range(b, b + 8)) for b in bases]
    assert len(set().union(*blocks)) == 40 and max(bases) + 8 <= 32768
    assert not set(free_port_blocks(3, 8)) & set(bases)  # never handed out twice by one process
    sockets = []
    try:
        for port in sorted(set().union(*blocks)):
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in sockets:
            sock.close()


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert free_port() not in ports  # never handed out twice by one process
    sockets = []
    try:
        for port in ports:
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in sockets:
            sock.close()


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls = iter([None, 0, (0,)])
    assert wait_until(lambda: next(calls), 5.0, 0.001) == (0,)


def test_wait_until_times_out_naming_what_and_the_last_error() -> None:
    def failing() -> bool:
        raise ConnectionRefusedError("port closed")

    began = time.monotonic()
    with pytest.raises(WaitTimeout, match="the answer: port closed") as info:
        wait_until(failing, 0.2, 0.01, what="the answer", ignore=(OSError,))
    assert time.monotonic() - began < 5.0
    assert isinstance(info.value.last_error, ConnectionRefusedError)
    with pytest.raises(ZeroDivisionError):  # exceptions not ignored propagate at once
        wait_until(lambda: 1 / 0, 5.0, ignore=(OSError,))


def test_holds_for_samples_the_whole_window_and_names_a_break() -> None:
    samples: list[int] = []
    holds_for(lambda: samples.append(1) is None, 0.2, 0.05)
    assert len(samples) >= 3  # the first sample at once, the last at the window's end
    broken = iter([True, True, False])
    with pytest.raises(AssertionError, match=r"the lone leader broke .* into a 5 s window"):
        holds_for(lambda: next(broken), 5.0, 0.01, what="the lone leader")


def test_spawned_process_group_is_detached_and_stopped_whole(tmp_path: Path) -> None:
    # The parent starts a child in its own process group; stopping the group must end both.
    code = ("import subprocess, sys, time; "
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
            "print('child', c.pid, flush=True); time.sleep(120)")
    spec = ProcessSpec(argv=(sys.executable, "-c", code), cwd=str(tmp_path), log=str(tmp_path / "p.log"))
    popen, ident = spawn(spec)
    try:
        child = wait_until(lambda: _child_pid(tmp_path / "p.log"), 30.0, what="the child to start")
        assert is_running(ident) and process_alive(child)
        assert os.getsid(ident.pid) == ident.pid  # its own session: survives its starter, killable as a group
        assert sorted(group_members(ident.pid)) == sorted([ident.pid, child])
        stop_group(ident, grace=5.0, popen=popen)
        assert not process_alive(ident.pid) and not process_alive(child)
        assert not is_running(ident) and popen.returncode is not None
    finally:
        stop_group(ident, popen=popen)


def _child_pid(log: Path) -> int | None:
    for line in log.read_text().splitlines():
        if line.startswith("child "):
            return int(line.split()[1])
    return None


def test_tail_shows_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    assert tail(log, 3) == "line 97\nline 98\nline 99"
    assert "unreadable" in tail(tmp_path / "missing.log")


def test_a_recycled_pid_is_never_signalled() -> None:
    me = ProcessId(os.getpid(), start_time=1)  # our pid, but not the start time that was recorded
    assert not is_running(me) and not group_alive(me)
    assert not signal_group(me, signal.SIGCONT)
