"""Members under test or benchmark: an elector in this process, or `elect member` as a process.

Both kinds expose one interface (`Member`) and record the same event lines (docs/architecture.md), so
the conformance suite and the harness check every implementation with one piece of code, whether its
members must be separate processes (Raft, NELI, leases) or live in one process (`memory://`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from elect import member_reports
from elect.contract import Elector
from elect.errors import ConfigError
from elect.events import Event, parse_line
from elect.roles import Role
from elect_bench.fakeclock import FakeClock

Line = dict[str, Any]

#: What the harness writes into a member's stderr log before it starts a new life of it.
_AGAIN = "started again"


class EventLog:
    """The event lines of one member, appended from a reader thread and awaited by tests.

    A member started again (`MemberProcess.restart`) writes on in the same log, in a new *life*: the lines
    of every life stay (they are the history), but what it leads now is read from the current life only,
    as a killed process took its beliefs with it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._lines: list[Line] = []
        self.closed = False
        self._life = 0
        self._life_starts = 0  # index of the current life's first line
        # kept as lines arrive, so that polling what a member leads costs the same at 6,000 roles as at 6 (the
        # harness polls these every few tens of milliseconds while a group of thousands of roles changes hands)
        self._leading: set[str] = set()  # the current life's
        self._ended = 0  # lines that end a leadership (revoked, fenced), every life's
        self._last = 0.0  # the newest line's mono

    def begin_life(self) -> int:
        """Open the log for a new life of the member; returns the life's number, for `close`."""
        with self._cond:
            self._life += 1
            self._life_starts = len(self._lines)
            self._leading = set()
            self.closed = False
            return self._life

    def append(self, line: Line) -> None:
        with self._cond:
            self._lines.append(line)
            if line["event"] == "acquired":
                self._leading.add(line["role"])
            else:
                self._leading.discard(line["role"])
                self._ended += 1
            self._last = max(self._last, float(line["mono"]))
            self._cond.notify_all()

    def close(self, life: int | None = None) -> None:
        """No more lines are coming; from `life` only, if given (a late close of an earlier life is ignored)."""
        with self._cond:
            if life is None or life == self._life:
                self.closed = True
            self._cond.notify_all()

    @property
    def lines(self) -> list[Line]:
        with self._cond:
            return list(self._lines)

    def __len__(self) -> int:
        with self._cond:
            return len(self._lines)

    def since(self, start: int) -> list[Line]:
        """The lines from index `start` on (a poll that reads only what is new)."""
        with self._cond:
            return self._lines[start:]

    @property
    def ended(self) -> int:
        """How many leaderships have ended so far (`revoked` and `fenced` lines), every life's."""
        with self._cond:
            return self._ended

    @property
    def last(self) -> float:
        """The newest line's `mono` (0 before any)."""
        with self._cond:
            return self._last

    def wait_for(self, predicate: Callable[[Line], bool], timeout: float, *, start: int = 0,
                 what: str = "an event") -> Line:
        """The first line from index `start` on that satisfies `predicate`, waiting up to `timeout`."""
        deadline = time.monotonic() + timeout
        with self._cond:
            index = start
            while True:
                while index < len(self._lines):
                    if predicate(self._lines[index]):
                        return self._lines[index]
                    index += 1
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    why = "the member exited" if self.closed else f"{timeout:g} s passed"
                    raise TimeoutError(f"{what} did not arrive ({why}); lines so far: {self._lines}")
                self._cond.wait(remaining)

    def leading(self) -> set[str]:
        """The roles this member leads according to its own event lines (of its current life)."""
        with self._cond:
            return set(self._leading)


class Member(Protocol):
    """What tests and the harness need from a member, however it runs."""

    member_id: str
    log: EventLog

    def start(self) -> None: ...
    def stop(self, timeout: float = 30.0) -> None: ...
    def kill(self) -> None: ...
    def resign(self, role: Role) -> None: ...
    def transfer(self, role: Role, to: str) -> None: ...
    def add_roles(self, roles: Iterable[Role]) -> None: ...
    def remove_roles(self, roles: Iterable[Role]) -> None: ...
    @property
    def alive(self) -> bool: ...


class InProcessMember:
    """An elector in this process; `kill` is as abrupt as one process allows (stop without handover)."""

    def __init__(self, elector: Elector) -> None:
        self.elector = elector
        self.member_id = elector.member
        self.log = EventLog()
        self._alive = False

    def start(self) -> None:
        self.elector.subscribe(self._record)
        self.elector.start()
        self._alive = True

    def _record(self, event: Event) -> None:
        self.log.append(event.to_dict())

    def stop(self, timeout: float = 30.0) -> None:
        if self._alive:
            self._alive = False
            self.elector.stop(timeout)
            self.log.close()

    kill = stop

    def resign(self, role: Role) -> None:
        self.elector.resign(role)

    def transfer(self, role: Role, to: str) -> None:
        self.elector.transfer(role, to)

    def add_roles(self, roles: Iterable[Role]) -> None:
        self.elector.add_roles(roles)

    def remove_roles(self, roles: Iterable[Role]) -> None:
        self.elector.remove_roles(roles)

    @property
    def alive(self) -> bool:
        return self._alive


class SignalledProcess:
    """A child process held as `proc` that faults can signal, freeze and wake (no-ops once it has exited)."""

    proc: subprocess.Popen[Any] | None

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)


class ClockAlignment:
    """Carries one member's `mono` onto this process's monotonic clock, for a member on another kernel (another
    host) whose monotonic clock is unrelated to ours.

    Each line's offset sample is *our monotonic time when the line arrived − its `mono`*: the true offset plus the
    line's delivery delay, never less than the true offset. The smallest sample so far is the estimate, too late by
    at most the fastest delivery seen (on one host, a pipe: well under a millisecond); `bound` says how much the
    estimate moved since the first line, an upper bound of what earlier lines may be off by. A line is shifted by
    the estimate when it arrives (`mono`, and a `fenced` line's `until`); its wall time `ts` is kept.
    """

    def __init__(self) -> None:
        self.offset: float | None = None
        self.first: float | None = None

    def align(self, line: Line, received: float) -> Line:
        sample = received - float(line["mono"])
        if self.offset is None or sample < self.offset:
            self.offset = sample
        if self.first is None:
            self.first = sample
        shifted = dict(line)
        shifted["mono"] = float(line["mono"]) + self.offset
        if "until" in line:
            shifted["until"] = float(line["until"]) + self.offset
        return shifted

    @property
    def bound(self) -> float:
        return 0.0 if self.first is None or self.offset is None else self.first - self.offset


class MemberProcess(SignalledProcess):
    """`python -m elect member URL --id ID --roles ... --control` as a child process (or an anchor's adapter,
    bench/anchors, given as `command`: another program that prints the same lines).

    Its stdout event lines are parsed into `log` by a reader thread; stderr goes to a log file.
    Commands (resign, add, remove) travel over stdin. `prefix` runs it inside something else, e.g.
    `ip netns exec HOST`. `restart` starts it again as a new process with the same command line (URL, id,
    roles: the same state on disk), logging on into the same `log` and stderr file. `align_clock`: the member runs
    on another kernel, and its lines' `mono` are carried onto this machine's clock (`ClockAlignment`). `fake_clock`:
    its clock runs at the rate the harness sets (the clock faults), and its lines are read back in real time.
    """

    def __init__(self, url: str, member_id: str, roles: Sequence[Role], *, log_dir: Path,
                 extra_args: Sequence[str] = (), prefix: Sequence[str] = (),
                 env: dict[str, str] | None = None, python: str = sys.executable,
                 command: Sequence[str] | None = None, align_clock: bool = False,
                 fake_clock: FakeClock | None = None) -> None:
        if fake_clock is not None and align_clock:
            raise ConfigError("clock faults need members on this machine's kernel (a local placement)",
                              parameter="faults")
        self.url = url
        self.member_id = member_id
        self.roles = list(roles)
        self.log = EventLog()
        self.stderr_path = Path(log_dir) / f"member-{member_id}.log"
        own = command if command is not None else [  # an anchor's adapter (bench/anchors) brings its own
            python, "-m", "elect", "member", url, "--id", member_id, "--control", *extra_args,
            *(["--roles", ",".join(str(r) for r in self.roles)] if self.roles else [])]
        self._argv = [*prefix, *own]
        self._env = {**os.environ, **(env or {}), **(fake_clock.env() if fake_clock else {}), "PYTHONUNBUFFERED": "1"}
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.bad_lines: list[str] = []
        self.clock = ClockAlignment() if align_clock else None
        self.fake_clock = fake_clock

    @property
    def pid(self) -> int:
        assert self.proc is not None, "member not started"
        return self.proc.pid

    def start(self) -> None:
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        life = self.log.begin_life()
        if self.fake_clock is not None:
            self.fake_clock.starting()
        with open(self.stderr_path, "a") as stderr:
            self.proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                         text=True, env=self._env, start_new_session=True)
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout, life), daemon=True,
                                        name=f"member-{self.member_id}-reader-{life}")
        self._reader.start()

    def restart(self) -> None:
        """SIGKILL this life if it still runs, then start a new process with the same command line.

        The old reader must have read the old life to its end first, or its lines would be taken for the
        new life's."""
        self.kill()
        if self._reader is not None and self._reader.is_alive():
            raise RuntimeError(f"member {self.member_id}: the killed process's output is still open; "
                               "not starting it again")
        with open(self.stderr_path, "a") as stderr:
            stderr.write(f"--- elect bench: {self.member_id} {_AGAIN}\n")
        self.start()

    def started(self) -> bool:
        """Whether this life reported that its elector started (and has not exited since)."""
        if not self.alive:
            return False
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return False
        life = text.rsplit(f"--- elect bench: {self.member_id} {_AGAIN}", 1)[-1]
        return f"elect member: {self.member_id} {member_reports.STARTED} " in life

    def _read(self, stream: IO[str] | None, life: int) -> None:
        assert stream is not None
        for raw in stream:
            raw = raw.strip()
            if not raw:
                continue
            received = time.monotonic()
            try:
                line = parse_line(raw)
            except ValueError:
                self.bad_lines.append(raw)
                continue
            if self.fake_clock is not None:
                line = self.fake_clock.to_real(line)
            self.log.append(line if self.clock is None else self.clock.align(line, received))
        self.log.close(life)

    def command(self, *words: str) -> None:
        """Send one control line (see `elect member --control`)."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()

    def resign(self, role: Role) -> None:
        self.command("resign", json.dumps(str(role)))

    def transfer(self, role: Role, to: str) -> None:
        """Ask the member to transfer `role` to `to`; the outcome comes as its `TRANSFERRED` report."""
        self.command("transfer", json.dumps(str(role)), to)

    def add_roles(self, roles: Iterable[Role]) -> None:
        self.command("add", *(json.dumps(str(r)) for r in roles))

    def remove_roles(self, roles: Iterable[Role]) -> None:
        self.command("remove", *(json.dumps(str(r)) for r in roles))

    def kill(self) -> None:
        """SIGKILL the member (and anything it started) and reap it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._join_reader()

    def stop(self, timeout: float = 30.0) -> None:
        """Graceful stop (SIGTERM: the member hands its roles over); SIGKILL if it overstays `timeout`."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)  # a paused member cannot handle SIGTERM
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._join_reader()

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(10)
        if self.proc is not None and self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def reports(self, kind: str) -> list[Line]:
        """What this member reported on stderr as `kind` (`WORK`, `DRAINED`), every life's."""
        try:
            return member_reports.reports(self.stderr_path.read_text(errors="replace"), self.member_id, kind)
        except OSError:
            return []

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def led(procs: Iterable[MemberProcess]) -> set[str]:
    """The roles some live member believes it leads, by its own lines."""
    return {role for p in procs if p.alive for role in p.log.leading()}


def leaders(procs: Iterable[MemberProcess], role: str) -> list[MemberProcess]:
    """The live members that believe they lead `role`."""
    return [p for p in procs if p.alive and role in p.log.leading()]


def settle(procs: Sequence[MemberProcess], quiet: float, limit: float, *, all_started: bool = False) -> bool:
    """Wait until no member has printed an event for `quiet` seconds (rebalances over); False if `limit`
    seconds passed first. `all_started` (a cold start): and until every member reported that its elector started,
    since one that joins after the others led every role moves roles when it does (a NELI member that created
    and warmed the topic joins seconds after the others), which a window at rest would count as failovers."""
    deadline = time.monotonic() + limit

    def last_event() -> float:
        return max((p.log.last for p in procs), default=0.0)

    while time.monotonic() < deadline:
        if all_started and not all(p.started() for p in procs):
            time.sleep(0.05)
            continue
        idle = time.monotonic() - last_event()
        if idle >= quiet:
            return True
        time.sleep(max(0.0, min(quiet - idle, deadline - time.monotonic(), 0.2)) + 0.001)  # never negative
    return False
