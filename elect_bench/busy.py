"""A busy machine: CPU-bound processes beside the members, at their priority, for as long as a trial runs.

Users run elect on machines that do other work. A member whose threads wait for a core is late to renew, to
answer a peer, to fence itself; `busy: N` in a scenario (and the envelope's `busy` axis) starts N processes that
spin in a loop, at the scheduling priority the members have (the harness's own, unchanged), so the members share
the cores with them as they would with an application's work.
"""

from __future__ import annotations

import subprocess
import sys

SPIN = "while True:\n    pass\n"


class Busy:
    """`start()` N spinning processes, `stop()` them (stop is safe to call twice, and without a start)."""

    def __init__(self, processes: int, python: str = sys.executable) -> None:
        if processes < 0:
            raise ValueError("busy processes must be >= 0")
        self.processes = processes
        self.python = python
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> Busy:
        for _ in range(self.processes - len(self._procs)):
            self._procs.append(subprocess.Popen([self.python, "-c", SPIN], stdin=subprocess.DEVNULL,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def stop(self) -> None:
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait(10)
        self._procs.clear()
