"""Detached service processes: start, inspect through /proc, signal and wait for whole process groups.

Each service runs in its own session (so its process group id is its pid): ``elect cluster up`` can
return while the services keep running, and ``down`` from any other process can find and kill them
using only the pid and start time recorded in the state file. /proc is the source of truth because
``os.kill(pid, 0)`` succeeds on zombies, which linger when nobody reaps an orphan.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ClusterError
from .waiting import WaitTimeout, wait_until


@dataclass(frozen=True)
class ProcessSpec:
    """How to (re)start one service process: enough to restart it later with the same ports and data."""

    argv: tuple[str, ...]
    cwd: str
    log: str
    env: dict[str, str] = field(default_factory=dict)
    drop_env: tuple[str, ...] = ()  # prefixes of inherited variables the service would misread

    def to_dict(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "cwd": self.cwd, "log": self.log, "env": dict(self.env),
                "drop_env": list(self.drop_env)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessSpec:
        return cls(argv=tuple(data["argv"]), cwd=str(data["cwd"]), log=str(data["log"]),
                   env={str(k): str(v) for k, v in data.get("env", {}).items()},
                   drop_env=tuple(data.get("drop_env", ())))


@dataclass(frozen=True)
class ProcessId:
    """A pid plus its kernel start time, so a recycled pid is never mistaken for our process."""

    pid: int
    start_time: int


def spawn(spec: ProcessSpec) -> tuple[subprocess.Popen[bytes], ProcessId]:
    """Start ``spec`` detached (new session, stdin closed, stdout+stderr appended to its log)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(spec.drop_env)} if spec.drop_env \
        else dict(os.environ)
    env.update(spec.env)
    Path(spec.log).parent.mkdir(parents=True, exist_ok=True)
    with open(spec.log, "ab") as log:
        try:
            proc = subprocess.Popen(list(spec.argv), cwd=spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise ClusterError(f"cannot start {spec.argv[0]}: {exc}") from exc
    started = _stat(proc.pid)
    # The child exists until reaped, so its /proc entry is readable now; a fallback of 0 still works.
    return proc, ProcessId(proc.pid, int(started[19]) if started else 0)


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (index 0 is the state letter), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2:].split()


@dataclass(frozen=True)
class Usage:
    """What a process has used since it started, as the kernel counts it (the harness reports these)."""

    cpu_seconds: float  # user + system
    age: float  # seconds since it started
    rss_bytes: int

    @property
    def cpu_share(self) -> float:
        """The average share of one core over its life."""
        return self.cpu_seconds / max(self.age, 1e-6)

    @property
    def rss_mb(self) -> float:
        return self.rss_bytes / 1e6


def usage(pid: int) -> Usage | None:
    """CPU time, age and resident memory of a live process from /proc, or None once it is gone."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return Usage(cpu_seconds=(int(fields[11]) + int(fields[12])) / hz, age=max(0.0, uptime - int(fields[19]) / hz),
                 rss_bytes=int(fields[21]) * os.sysconf("SC_PAGE_SIZE"))


def is_running(ident: ProcessId) -> bool:
    """True if the process exists, is not a zombie, and is the same process we started."""
    fields = _stat(ident.pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return ident.start_time == 0 or int(fields[19]) == ident.start_time


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, children included."""
    found: list[int] = []
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(pid)
    return found


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def group_alive(ident: ProcessId) -> bool:
    """True while the process or anything left in its process group still lives.

    If the pid now belongs to a different process, our group is certainly gone: the kernel never
    hands out a pid that is still in use as a process group id.
    """
    fields = _stat(ident.pid)
    if fields is not None and ident.start_time and int(fields[19]) != ident.start_time:
        return False
    return bool(group_members(ident.pid))


def signal_group(ident: ProcessId, sig: signal.Signals) -> bool:
    """Send ``sig`` to the process group led by ``ident``; False if it was already gone."""
    if not group_alive(ident):
        return False
    try:
        os.killpg(ident.pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_group(ident: ProcessId, *, grace: float = 0.0, timeout: float = 15.0,
               popen: subprocess.Popen[bytes] | None = None) -> None:
    """End the whole process group: SIGTERM and ``grace`` seconds to exit (if grace > 0), then SIGKILL.

    Returns once no live process is left in the group; ``popen`` (when this process is the parent)
    is reaped so no zombie stays behind.
    """
    def gone() -> bool:
        if popen is not None:
            popen.poll()
        return not group_alive(ident)

    try:
        if grace > 0 and signal_group(ident, signal.SIGTERM):
            with contextlib.suppress(WaitTimeout):
                wait_until(gone, grace, 0.05, what=f"pid {ident.pid} to exit after SIGTERM")
        signal_group(ident, signal.SIGKILL)
        wait_until(gone, timeout, 0.02, what=f"process group {ident.pid} to disappear after SIGKILL")
    finally:
        if popen is not None and popen.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=1.0)


def tail(path: str | Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file (for error messages), or a note that it is missing."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            text = f.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    kept = text.splitlines()[-lines:]
    return "\n".join(kept) if kept else "(log is empty)"
