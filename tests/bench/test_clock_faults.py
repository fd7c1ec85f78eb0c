"""Clock faults: a member process under a clock the harness runs at another rate (`elect_bench.fakeclock`:
libfaketime and our shim), the fault kinds that use it, and real trials on etcd inside and outside the rate
bound etcd:// states."""

from __future__ import annotations

import itertools
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from elect.errors import ConfigError
from elect_bench.fakeclock import FakeClock
from elect_bench.faults import FAULTS, MemberFault, fault, kills_process, known
from elect_bench.methods import METHODS
from elect_bench.trial import Environment, TrialSpec, member_process, run_trial
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until

# prints its monotonic time every 0.1 s of its own clock, timed in turn by a sleep, a lock wait (CPython's
# sem_clockwait) and a C11 condition-variable wait (librdkafka's cnd_timedwait, its deadline on the wall clock), so
# every kind of wait is under the faked clock; ctypes.CDLL(None) finds the process's symbols, the shim's first
TICKER = """
import ctypes, threading, time
class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
libc = ctypes.CDLL(None)
cnd, mtx = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
libc.cnd_init(cnd); libc.mtx_init(mtx, 0); libc.mtx_lock(mtx)
gate = threading.Lock(); gate.acquire()
for i in range(400):
    if i % 3 == 0:
        time.sleep(0.05)
    elif i % 3 == 1:
        gate.acquire(timeout=0.05)
    else:
        at = time.time() + 0.05
        libc.cnd_timedwait(cnd, mtx, ctypes.byref(timespec(int(at), int(at % 1 * 1e9))))
    print(time.monotonic(), flush=True)
"""

class Child:
    """A Python child under a fake clock, its lines read back as they arrive (a reader thread, so a wait that
    never ends fails the test at a deadline instead of hanging it)."""

    def __init__(self, clock: FakeClock) -> None:
        clock.starting()
        self.proc = subprocess.Popen([sys.executable, "-c", TICKER], stdout=subprocess.PIPE, text=True,
                                     env={**clock.env(), "PATH": "/usr/bin:/bin"})
        self.clock = clock
        self.lines: list[tuple[float, float, float]] = []  # (arrival, its own clock, carried back to real time)
        self._arrived: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for text in self.proc.stdout:
            self._arrived.put((time.monotonic(), text))

    def read(self, count: int) -> list[tuple[float, float, float]]:
        got: list[tuple[float, float, float]] = []
        for _ in range(count):
            try:
                arrived, text = self._arrived.get(timeout=10.0)
            except queue.Empty:
                raise AssertionError(f"no line from the child in 10 s after {len(self.lines + got)}") from None
            faked = float(text)
            got.append((arrived, faked, self.clock.to_real({"mono": faked})["mono"]))
        self.lines += got
        return got

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def rate(lines: list[tuple[float, float, float]]) -> float:
    """Its clock's seconds per real second over the lines given (a busy machine delays both alike)."""
    return (lines[-1][1] - lines[0][1]) / (lines[-1][0] - lines[0][0])


def test_a_faked_clock_runs_at_the_rate_set_and_its_times_read_back_as_real(tmp_path: Path) -> None:
    child = Child(FakeClock(tmp_path / "m0.spec"))
    try:
        wait_until(lambda: (tmp_path / "m0.spec.start").exists(), 10, what="the shim to load")
        steady = child.read(10)
        child.clock.set_rate(2.0)
        child.read(2)  # the waits under way when the rate changed
        fast = child.read(30)
        child.clock.set_rate(0.5)
        child.read(2)
        slow = child.read(8)
    finally:
        child.stop()
    assert rate(steady) == pytest.approx(1.0, rel=0.1)
    assert rate(fast) == pytest.approx(2.0, rel=0.1)
    assert rate(slow) == pytest.approx(0.5, rel=0.1)
    # its waits (a lock's timeout, a sleep) ran on its clock: about 0.05 s of it per line, at every rate
    gaps = sorted(b[1] - a[1] for a, b in itertools.pairwise(fast))
    assert 0.045 < gaps[len(gaps) // 2] < 0.1
    # its own times, carried back, are when it printed: before each line arrived, never after
    assert all(-0.005 < arrived - real < 0.5 for arrived, _, real in child.lines)


def test_waits_last_their_time_with_the_faked_clock_behind_or_ahead_of_the_real_one(tmp_path: Path) -> None:
    # After a slow spell the member's clock is behind the real one, after a fast one ahead, both at rate 1 again (a
    # soak's victim after its drift). A wait whose deadline went to the kernel as the faked time (librdkafka's, before
    # the shim wrapped cnd_timedwait) ended at once behind (its threads spun at 130 % CPU) and lasted the difference
    # longer ahead (its group heartbeats went out late): each must last its 0.05 s of real time either way.
    child = Child(FakeClock(tmp_path / "m0.spec"))
    try:
        wait_until(lambda: (tmp_path / "m0.spec.start").exists(), 10, what="the shim to load")
        for spell in (0.25, 4.0):
            child.clock.set_rate(spell)
            child.read(12)
            child.clock.set_rate(1.0)
            child.read(2)  # the waits under way when the rate changed
            steady = child.read(15)
            gaps = [b[0] - a[0] for a, b in itertools.pairwise(steady)]
            assert min(gaps) > 0.03, (spell, gaps)  # none ended at once (the machine may delay, never hurry, one)
            assert sorted(gaps)[len(gaps) // 2] < 0.2, (spell, gaps)
    finally:
        child.stop()


# reads its monotonic clock in three threads at once for 8 s and prints the largest step any thread saw between two
# of its reads, forwards or backwards
READERS = """
import threading, time
def read(steps):
    prev = time.monotonic(); end = prev + 8; forward = backward = 0.0
    while prev < end:
        now = time.monotonic()
        forward, backward = max(forward, now - prev), max(backward, prev - now)
        prev = now
    steps.append((forward, backward))
steps = []
threads = [threading.Thread(target=read, args=(steps,)) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
print(max(f for f, _ in steps), max(b for _, b in steps), flush=True)
"""


def test_a_rate_change_never_makes_a_thread_clock_jump(tmp_path: Path) -> None:
    # libfaketime re-reads the spec into process-wide variables, offset and rate one after the other: a thread that
    # read the clock meanwhile computed with the new rate and the old offset, a jump of the rate change times the
    # time since load (6.4 s here before the shim locked its clock reads; a soak's member got 36.7 s at 1.05)
    clock = FakeClock(tmp_path / "m0.spec")
    clock.starting()
    child = subprocess.Popen([sys.executable, "-c", READERS], stdout=subprocess.PIPE, text=True,
                             env={**clock.env(), "PATH": "/usr/bin:/bin"})
    try:
        wait_until(lambda: (tmp_path / "m0.spec.start").exists(), 10, what="the shim to load")
        began = time.monotonic()
        wait_until(lambda: time.monotonic() > began + 4, 10, interval=0.1, what="time since load")  # a tear: >= 4 s
        for i in range(100):
            clock.set_rate(2.0 if i % 2 == 0 else 1.0)
            time.sleep(0.01)  # the harness's pace of rate changes, not a wait for a condition
        assert child.stdout is not None
        forward, backward = (float(x) for x in child.stdout.readline().split())
    finally:
        child.kill()
        child.wait()
    assert forward < 2.0  # a thread descheduled on a busy machine, at rate 2; a tear is twice that
    assert backward < 0.01  # a rate change may meet a read in flight by a few microseconds of rate difference


def test_a_new_life_starts_at_the_real_rate(tmp_path: Path) -> None:
    clock = FakeClock(tmp_path / "m0.spec")
    child = Child(clock)
    try:
        wait_until(lambda: (tmp_path / "m0.spec.start").exists(), 10, what="the shim to load")
        clock.set_rate(3.0)
        assert clock.rate == 3.0
    finally:
        child.stop()
    again = Child(clock)
    try:
        assert clock.rate == 1.0
        arrived, _, real = again.read(3)[-1]
        assert -0.005 < arrived - real < 0.5
    finally:
        again.stop()


def test_skewed_kinds_are_named_by_their_fault_whose_clocks_and_the_rate() -> None:
    chosen = fault("pause@leader:0.8")
    assert isinstance(chosen, MemberFault) and chosen.name == "pause@leader:0.8" and chosen.fakes_clock
    assert (chosen.healed_as, chosen.fails_over, chosen.kills_process) == ("resume", True, False)
    assert chosen.clocks("m1", ["m0", "m2"]) == {"m1": 0.8}
    others = fault("cut@others:1.25")
    assert others.needs_hosts and others.clocks("m1", ["m0", "m2"]) == {"m0": 1.25, "m2": 1.25}
    assert fault("pause@leader:0.8") == chosen and chosen != fault("pause@leader:0.9") and chosen != fault("pause")
    assert "pause@leader:0.8" not in FAULTS and known("pause@leader:0.8") is type(chosen)
    assert not kills_process("pause@leader:0.8") and known("resume") is None
    assert fault("drift").clocks("m1", ["m0"]) == {"m1": 0.95}


@pytest.mark.parametrize(("name", "error"), [
    ("kill@leader:0.5", "a killed process has no clock left"),
    ("infra@leader:0.5", "not a fault to a member"),
    ("drift@others:2", "not a fault to a member"),
    ("pause@leader:0", "a clock rate from 0.05 to 20"),
    ("pause@everyone:2", "unknown fault"),
])
def test_skewed_names_that_cannot_be_struck_say_why(name: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        fault(name)


def test_clocks_of_programs_libc_does_not_time_are_refused(tmp_path: Path, infra: Endpoints) -> None:
    spec = TrialSpec(METHODS["goneli"], fault("drift"), budget=1.0, members=3, roles=6, hold=2.0)
    result = run_trial(spec, Environment(infra, tmp_path), 0, "go")
    assert not result.ok and "whose clock cannot be faked" in (result.error or "")


class Elsewhere:
    """A placement that is not this machine's processes (containers, say)."""

    python = sys.executable
    separate_clocks = False

    def prefix(self, member: str) -> list[str]:
        return []


def test_members_in_containers_cannot_have_their_clocks_faked(tmp_path: Path) -> None:
    env = Environment(None, tmp_path, placement=Elsewhere())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not in containers"):
        member_process(METHODS["etcd"], 6, env, "u", "etcd://127.0.0.1:1/p", "m0", [], fake_clock=True)


def test_etcd_keeps_its_promise_inside_its_rate_bound_and_overlaps_outside(tmp_path: Path, infra: Endpoints) -> None:
    """etcd:// states a tolerance of 1/3 (ttl / renew_deadline - 1). A leader whose clock runs at 0.9 (a ratio
    of 1.11) and is paused past D fences before a contender takes over; at 0.3 (a ratio of 3.3) it still believes
    in its lease for about 1.5 s after a contender took the role (its 0.75 s deadline is 2.5 s of real time), and
    the checker says so (a margin that a contender slowed by a busy machine does not close)."""
    env = Environment(infra, tmp_path)
    results = {}
    for name in ("drift", "pause@leader:0.9", "pause@leader:0.3"):
        spec = TrialSpec(METHODS["etcd"], fault(name), budget=1.0, members=3, roles=6, hold=2.0)
        results[name] = run_trial(spec, env, 0, name.replace("@", "-").replace(":", "-"))
        assert results[name].ok, results[name].error
    lines = results["pause@leader:0.3"].history["lines"]
    assert lines and all(abs(line["mono"] - time.monotonic()) < 120 for line in lines)  # real times, not faked
    assert results["drift"].violations == [] and results["drift"].unrecovered == 0
    assert results["pause@leader:0.9"].violations == [] and results["pause@leader:0.9"].failover
    assert results["pause@leader:0.3"].violations and results["pause@leader:0.3"].max_overlap > 0.5
