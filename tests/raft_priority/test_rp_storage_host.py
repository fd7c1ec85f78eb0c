"""Durable hard state (one log per node, fsynced) and the multi-group host's single lazy timer heap."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from elect.core import Revoke
from elect_cluster.waiting import wait_until
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.host import NodeHost
from raft_priority.messages import HardState, Heartbeat, VoteRequest, VoteResponse
from raft_priority.storage import HardStateLog

P3 = {"a": 3, "b": 2, "c": 1}


def test_vote_survives_a_crash_through_the_store(tmp_path: Path) -> None:
    store = HardStateLog(tmp_path, "b")
    g = RaftGroup(GroupSpec(0, P3), "b", RaftConfig.zep006(), random.Random(0), 0.0)
    g.step(VoteRequest(0, "a", "b", 3, 0, 0), 2.0)
    store.save(g.ready().persist)  # the driver persists before it sends the grant
    store.close()  # the crash; the restarted node reads the log afresh
    back = HardStateLog(tmp_path, "b").load(0)
    g2 = RaftGroup(GroupSpec(0, P3), "b", RaftConfig.zep006(), random.Random(0), 9.0, back)
    g2.step(VoteRequest(0, "c", "b", 3, 0, 0), 10.0)
    assert [m.granted for m in g2.ready().messages] == [False]  # type: ignore[attr-defined]


def test_host_routes_by_group_and_keeps_one_lazy_timer_per_group() -> None:
    cfg = RaftConfig.zep006()
    host = NodeHost("b", cfg, random.Random(0))
    n = 1000
    for gid in range(n):
        host.add_group(GroupSpec(gid, P3), 0.0)
    ticks = 0
    original = RaftGroup.tick

    def counting(self: RaftGroup, now: float) -> None:
        nonlocal ticks
        ticks += 1
        original(self, now)

    RaftGroup.tick = counting  # type: ignore[method-assign]
    try:
        t = 0.5
        while t < 10.0:  # a leader "a" heartbeats every group every 0.1 s
            host.step_all([Heartbeat(gid, "a", "b", 1, t) for gid in range(n)], t)
            if host.next_wakeup() <= t:
                host.tick(t)
            host.ready()
            t = round(t + 0.1, 6)
    finally:
        RaftGroup.tick = original  # type: ignore[method-assign]
    assert all(g.leader == "a" and g.state is RaftState.FOLLOWER for g in host.groups.values())
    assert ticks <= n * 11  # about one wake-up per group per election timeout, not per heartbeat
    assert len(host._heap) <= 2 * n
    # the wake-up may be early (lazy), never late; an early tick just re-arms at the true deadline
    assert host.next_wakeup() <= min(g.next_tick for g in host.groups.values())
    host.tick(host.next_wakeup())
    assert host.next_wakeup() == pytest.approx(9.9 + 1.0)
    host.step(Heartbeat(12345, "a", "b", 1, 0.0), 10.0)  # unknown group: ignored


def test_host_ticks_only_due_groups_and_a_lone_member_leads() -> None:
    host = NodeHost("a", RaftConfig.zep006(), random.Random(0))
    host.add_group(GroupSpec(0, {"a": 1}), 0.0)
    host.add_group(GroupSpec(1, P3), 0.0)
    host.tick(0.5)
    assert not host.ready()
    host.tick(1.0)
    out = host.ready()
    assert host.leading(1.0) == [0] and len([m for m in out.messages if m.group == 1]) == 2  # pre-votes
    host.remove_group(0, 2.0)
    assert host.ready().changes == [Revoke(0, "resign")]


def test_hard_state_log_survives_torn_lines_and_compaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    log = HardStateLog(tmp_path, "b", compact_after=300)
    assert log.load_all() == {}
    log.save({g: HardState(1, "a") for g in range(20)})
    assert len(synced) == 2  # the append, then the directory for the new file
    log.save({3: HardState(2, "c")})
    assert len(synced) == 3  # one fsync per save, however many groups
    log.close()
    with open(tmp_path / "b" / "hardstate.log", "ab") as f:
        f.write(b'{"3": [9, "x"')  # a crash in the middle of an append
    back = HardStateLog(tmp_path, "b", compact_after=300)
    state = back.load_all()
    assert state[3] == HardState(2, "c") and state[7] == HardState(1, "a") and len(state) == 20
    for term in range(3, 40):  # grows past compact_after: rewritten as one line, atomically
        back.save({5: HardState(term, None)})
    assert (tmp_path / "b" / "hardstate.log").stat().st_size < 600
    assert HardStateLog(tmp_path, "b").load_all()[5] == HardState(39, None)
    assert HardStateLog(tmp_path, "b").load(3) == HardState(2, "c")
    with pytest.raises(ValueError, match="unusable node id"):
        HardStateLog(tmp_path, "../x")


def test_damage_a_crash_cannot_leave_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    from elect.errors import StateUnreadable
    path = tmp_path / "b" / "hardstate.log"
    path.parent.mkdir()
    for damaged, where in ((b'{"1":[3,"a"]}\nnot json\n{"1":[4,"c"]}\n', "line 2 of 3"),
                           (b'{"1":[3,"a"]}\n{"1":[4,"c"\n', "line 2 of 2"),  # cut, then a newline: not a crash
                           (b'[1, 2]\n', "line 1 of 1"),
                           (b'{"1":[-1,"a"]}\n', "line 1 of 1"),
                           (b'{"1":[3, 7]}\n', "line 1 of 1")):
        path.write_bytes(damaged)
        with pytest.raises(StateUnreadable, match=f"{path} is damaged at {where}"):
            HardStateLog(tmp_path, "b").load_all()


def test_a_save_after_a_torn_line_or_a_failed_append_rewrites_the_log(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Appending after a torn line would glue the new line to it, and a later load would lose that vote."""
    path = tmp_path / "b" / "hardstate.log"
    log = HardStateLog(tmp_path, "b")
    log.save({1: HardState(3, "a")})
    log.close()
    with open(path, "ab") as f:
        f.write(b'{"1":[4,')  # a crash in the middle of an append
    back = HardStateLog(tmp_path, "b")
    assert back.load_all() == {1: HardState(3, "a")}
    back.save({1: HardState(5, "c")})
    assert path.read_bytes() == b'{"1":[5,"c"]}\n'  # rewritten whole, not appended to the torn line
    real = os.write
    calls = iter([True])

    def full(fd: int, data: bytes) -> int:
        if next(calls, False):
            real(fd, data[:4])  # part of the line reaches the file, then the disk is full
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError):
        back.save({2: HardState(6, "a")})
    back.save({2: HardState(7, "b")})
    assert HardStateLog(tmp_path, "b").load_all() == {1: HardState(5, "c"), 2: HardState(7, "b")}


def test_a_driver_that_cannot_persist_a_vote_sends_nothing_and_stops(tmp_path: Path) -> None:
    """The vote a full disk refused must never leave: the driver halts (as etcd stops when its log cannot be
    written) and says so to its IO, which ends the node's leaderships."""
    from elect.core import Ready
    from elect.driver import Driver
    from elect.roles import Role
    from raft_priority.messages import Message
    class FullDisk(HardStateLog):
        def save(self, states: object) -> None:
            raise OSError(28, "No space left on device")

    class NodeIO:
        def __init__(self) -> None:
            self.halts: list[Exception] = []
            self.sent: list[Message] = []
            self.disk = FullDisk(tmp_path, "b")

        def persist(self, states: dict[Role, HardState]) -> None:
            self.disk.save(states)

        def apply(self, ready: Ready[Message, HardState], now: float) -> None:
            pass

        def send(self, messages: list[Message], now: float) -> None:
            self.sent.extend(messages)

        def idle(self, now: float) -> float:
            return float("inf")

        def halted(self, error: Exception) -> None:
            self.halts.append(error)

        def ended(self) -> None:
            pass

    host = NodeHost("b", RaftConfig.zep006(), random.Random(0))
    host.add_group(GroupSpec(0, P3), 0.0)
    io = NodeIO()
    driver: Driver[Message, Message, HardState] = Driver(host, io, name="raft-driver-b", granularity=0.01)
    driver.start()
    try:
        driver.receive([VoteRequest(0, "a", "b", 3, 0, 0)])
        wait_until(lambda: driver.halted is not None, 10.0, what="the driver halting")
    finally:
        driver.stop()
    assert [m for m in io.sent if isinstance(m, VoteResponse)] == []  # the grant never left (pre-votes persist
    # nothing: those may have)
    assert len(io.halts) == 1 and "No space left on device" in str(io.halts[0])


def test_a_member_whose_disk_refuses_its_vote_exits_4_saying_why(tmp_path: Path) -> None:
    """A node that cannot persist a vote halts (above); `elect member` must not then run on leading nothing, unseen
    by its supervisor: it reports the elector's failure and exits 4. The disk is made to refuse every write by a file
    size limit of 0 on the member's process (Python ignores SIGXFSZ, so a write fails with EFBIG), and the other
    node, whose disk is fine, is what makes an election (and so a vote to persist) happen."""
    import resource
    import subprocess
    import sys

    from elect.member_reports import FAILED, reports
    from elect_cluster.ports import free_ports

    pa, pb, pc = free_ports(3)
    peers = {"a": pa, "b": pb, "c": pc}

    def url(me: str) -> str:
        others = ",".join(f"{n}@127.0.0.1:{p}" for n, p in peers.items() if n != me)
        return (f"raft://{me}@127.0.0.1:{peers[me]}?peers={others}&election_timeout=0.3"
                f"&data_dir={tmp_path / me}")

    def no_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    command = [sys.executable, "-m", "elect", "member"]
    b = subprocess.Popen([*command, url("b"), "--roles", "x"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    a = subprocess.Popen([*command, url("a"), "--roles", "x"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=no_disk)
    try:
        out, err = a.communicate(timeout=60)
    finally:
        for process in (a, b):
            process.kill()
            process.wait(10)
        if b.stderr is not None:
            b.stderr.close()
    assert a.returncode == 4, err
    failed = reports(err, "a", FAILED)
    assert len(failed) == 1 and "File too large" in failed[0]["error"], err
    assert str(tmp_path / "a") in failed[0]["error"]
    assert "Traceback" not in err, err
    assert '"acquired"' not in out  # nothing was led on a vote the disk did not keep
