"""A trial's merged history: every member's event lines plus the faults the harness injected.

Leadership *belief* intervals are derived from it the one way every metric and the checker use:
a member believes it leads a role from its `acquired` line until its `revoked` line, or until the
`until` of its `fenced` line (its own deadline), or until the harness killed it, or until the end of
the observation.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect.events import parse_line
from elect_bench import faults

Line = dict[str, Any]

log = logging.getLogger("elect.bench")


@dataclass(frozen=True)
class FaultRecord:
    """What the harness did, when (monotonic seconds), to whom: a fault's name as `kind` (elect_bench.faults), or
    the record of its healing (its `healed_as`)."""

    mono: float
    kind: str
    target: str
    detail: str = ""


@dataclass(frozen=True)
class Interval:
    member: str
    role: str
    token: int
    start: float
    end: float
    ended_by: str  # revoked | fenced | killed | open

    @property
    def length(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class History:
    lines: list[Line]
    faults: list[FaultRecord] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0

    def __post_init__(self) -> None:
        self.lines.sort(key=lambda line: line["mono"])
        if not self.end and self.lines:
            self.end = self.lines[-1]["mono"]
        if not self.start and self.lines:
            self.start = self.lines[0]["mono"]

    @property
    def roles(self) -> list[str]:
        return sorted({line["role"] for line in self.lines})

    def kills(self) -> dict[str, list[float]]:
        """Per member, when the harness killed its process (in order: a soak kills and restarts one member many
        times). Belief ends at each: a dead process believes nothing, and a restarted one starts believing
        afresh."""
        out: dict[str, list[float]] = defaultdict(list)
        for f in sorted(self.faults, key=lambda f: f.mono):
            if faults.kills_process(f.kind):
                out[f.target].append(f.mono)
        return dict(out)

    def intervals(self) -> dict[str, list[Interval]]:
        """Per role, every member's belief intervals, in start order."""
        deaths = sorted((t, member) for member, times in self.kills().items() for t in times)
        open_: dict[tuple[str, str], Line] = {}
        out: dict[str, list[Interval]] = defaultdict(list)

        def close(key: tuple[str, str], end: float, how: str) -> None:
            begun = open_.pop(key)
            out[key[1]].append(Interval(key[0], key[1], begun["token"], begun["mono"], max(end, begun["mono"]), how))

        d = 0
        for line in self.lines:
            while d < len(deaths) and deaths[d][0] < line["mono"]:  # a kill before this line ends every belief
                at, member = deaths[d]
                for key in [k for k in open_ if k[0] == member]:
                    close(key, at, "killed")
                d += 1
            key = (line["member"], line["role"])
            if line["event"] == "acquired":
                if key in open_:  # re-acquired under a new token without an end line: close the old one
                    close(key, line["mono"], "revoked")
                open_[key] = line
            elif key in open_:
                close(key, line["mono"] if line["event"] == "revoked" else min(line["until"], line["mono"]),
                      line["event"])
        for at, member in deaths[d:]:
            for key in [k for k in open_ if k[0] == member]:
                close(key, at, "killed")
        for key in list(open_):
            close(key, self.end, "open")
        for intervals in out.values():
            intervals.sort(key=lambda i: (i.start, i.end))
        return dict(out)

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "lines": self.lines,
                "faults": [f.__dict__ for f in self.faults]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> History:
        return cls(list(data["lines"]), [FaultRecord(**f) for f in data.get("faults", [])], data.get("start", 0.0),
                   data.get("end", 0.0))


@dataclass(frozen=True)
class LineProblem:
    """A line `read_lines` skipped: where it is (file, 1-based line number) and why."""

    path: Path
    number: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.number}: {self.reason}"


def read_lines(paths: Iterable[Path], *, problems: list[LineProblem] | None = None) -> list[Line]:
    """Event lines from files (one JSON object per line), e.g. captured `elect member` stdout.

    A malformed line (torn by a kill mid-write, not UTF-8, not an event) is skipped rather than fatal, so one
    bad line does not cost the rest of a run; each is appended to `problems`, or logged as a warning when no
    list is given. A file that cannot be read at all still raises OSError.
    """
    lines: list[Line] = []
    for path in paths:
        path = Path(path)
        text = path.read_bytes().decode("utf-8", errors="replace")  # bad bytes fail their line, not the file
        for number, raw in enumerate(text.split("\n"), start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                lines.append(parse_line(raw))
            except ValueError as exc:
                problem = LineProblem(path, number, str(exc))
                if problems is None:
                    log.warning("skipped event line %s", problem)
                else:
                    problems.append(problem)
    return lines
