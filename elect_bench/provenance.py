"""How, when and where a run was made: one record that every kind of run (trials, envelope, idle, soak, the
simulations) carries, writes into its JSON and opens its report with. A figure is only as good as what it says
about its making: the command, the start, the wall time, the machine and how busy it was."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect_bench.judging.measures import percentile


@dataclass
class Provenance:
    command: str
    started: float
    """Wall-clock seconds (`time.time`) at the start; a resumed run keeps its first start."""
    seconds: float = 0.0
    """Wall time so far (`tick`), a resumed run's earlier time included."""
    machine: dict[str, Any] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)
    """The machine's 1-minute load average, sampled as the run went (`sample`)."""
    _began: float = field(default_factory=time.monotonic, repr=False, compare=False)
    _earlier: float = field(default=0.0, repr=False, compare=False)

    @classmethod
    def begin(cls, command: str, resume: Mapping[str, Any] | None = None) -> Provenance:
        """A run starting now; or one going on from a checkpoint's JSON, whose command, start, time so far and load
        samples carry on."""
        if resume is None:
            return cls(command, time.time(), 0.0, machine())
        said = f"{resume['command']} (resumed: {command})" if command else str(resume["command"])
        earlier = float(resume["seconds"])
        return cls(said, float(resume["started"]), earlier, machine(), [float(x) for x in resume.get("load", [])],
                   _earlier=earlier)

    def tick(self) -> Provenance:
        """`seconds` brought up to now."""
        self.seconds = self._earlier + time.monotonic() - self._began
        return self

    def sample(self) -> None:
        """Note the machine's load now."""
        self.load.append(round(os.getloadavg()[0], 2))

    def header(self) -> str:
        """"Command: `...` — when, how long, on what machine." The opening of every report."""
        m = self.machine
        return (f"Command: `{self.command}` — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(self.started))}, "
                f"{self.seconds:.0f} s on {m['host']} ({m['cpus']} cores, {m['cpu']}, Python {m['python']}).")

    def busy(self) -> str:
        """How busy the machine was ("" without samples)."""
        return load_note(self.load, int(self.machine.get("cpus") or 0))

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "started": self.started, "seconds": self.seconds, "machine": self.machine,
                "load": self.load}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance:
        return cls(str(data["command"]), float(data["started"]), float(data["seconds"]), dict(data["machine"]),
                   [float(x) for x in data.get("load", [])])


def load_note(loads: Sequence[float], cpus: int) -> str:
    """"Machine load (1-minute average, N cores): median M, max X over K samples." or "" without samples."""
    if not loads:
        return ""
    return (f"Machine load while it ran (1-minute average, {cpus} cores): median {percentile(loads, 50):.1f}, "
            f"max {max(loads):.1f} over {len(loads)} samples.")


def machine() -> dict[str, Any]:
    """This machine, and the versions of what a run's figures depend on."""
    import importlib.metadata as md

    versions = {}
    for dist in ("elect", "confluent-kafka", "grpcio", "etcd3gw", "kazoo", "pysyncobj"):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[dist] = md.version(dist)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"host": platform.node(), "cpus": os.cpu_count(), "cpu": cpu, "python": sys.version.split()[0],
            "platform": platform.platform(), "versions": versions}
