"""Judges what was written to the fenced store, from three records that do not depend on each other's word:
the store's attempt log (every attempt in the order the store decided it), the store's dump (what it holds
at the end), and each writer's log of the writes it saw acknowledged.

Per role, with "earlier" meaning earlier in the attempt log:

- **stale accepted**: an accepted write whose token is below the highest token accepted earlier for its
  role. A fenced store refuses these; an unfenced one takes them, and they are what fencing is for.
- **lost**: a write a writer saw acknowledged that the dump does not hold (same role, member, seq, token).
- **out of order**: in the dump, a write whose token is below that of the write just before it (each
  descent once).
- **conflicting**: an accepted write by member A under token a, earlier than which a write by another
  member B under a newer token b > a was accepted. A's old leadership and B's new one then interleave on
  the resource, and A's write lands on top of what B wrote: the clobber an application without fencing
  suffers. A member's own older writes never count (it cannot clobber itself), so every conflict is also
  a stale accepted write, not the other way round.

Counts of attempts, accepted and refused writes per member come from the attempt log. The functions are
pure over parsed lines; `read_jsonl` reads a log file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elect_bench.judging.checker import Violation

Line = dict[str, Any]
Dump = Mapping[str, Sequence[Line]]


@dataclass(frozen=True)
class WriteViolation:
    kind: str  # stale | lost | out_of_order | conflict
    role: str
    at: float  # monotonic time of the offending write
    detail: str
    lines: tuple[Line, ...]  # the log, dump or acknowledgement lines that show it

    def __str__(self) -> str:
        return str(self.as_violation())

    def as_violation(self) -> Violation:
        """The checker's record of it, with the lines that show it in its detail."""
        shown = "; ".join(json.dumps(line, sort_keys=True) for line in self.lines)
        return Violation(f"write-{self.kind}", self.role, self.at, f"{self.detail} [{shown}]")


@dataclass(frozen=True)
class Counts:
    attempts: int = 0
    accepted: int = 0
    rejected: int = 0


@dataclass(frozen=True)
class WriteCheck:
    stale_accepted: tuple[WriteViolation, ...] = ()
    lost: tuple[WriteViolation, ...] = ()
    out_of_order: tuple[WriteViolation, ...] = ()
    conflicting: tuple[WriteViolation, ...] = ()
    members: Mapping[str, Counts] = field(default_factory=dict)

    @property
    def accepted(self) -> int:
        return sum(c.accepted for c in self.members.values())

    @property
    def rejected(self) -> int:
        return sum(c.rejected for c in self.members.values())

    @property
    def attempts(self) -> int:
        return sum(c.attempts for c in self.members.values())

    def violations(self) -> list[WriteViolation]:
        """Every finding, in time order."""
        found = [*self.stale_accepted, *self.lost, *self.out_of_order, *self.conflicting]
        return sorted(found, key=lambda v: (v.at, v.role, v.kind))


def check_writes(attempts: Sequence[Line], dump: Dump, acks: Iterable[Line]) -> WriteCheck:
    """Judge one run: the store's attempt log lines (in file order), its dump, and every writer's ack lines."""
    return WriteCheck(stale_accepted=tuple(stale_accepted(attempts)), lost=tuple(lost(dump, acks)),
                      out_of_order=tuple(out_of_order(dump)), conflicting=tuple(conflicting(attempts)),
                      members=counts(attempts))


def stale_accepted(attempts: Sequence[Line]) -> list[WriteViolation]:
    highest: dict[str, Line] = {}  # role -> the accepted line with the highest token so far
    found: list[WriteViolation] = []
    for line in attempts:
        if not line["accepted"]:
            continue
        role, top = line["role"], highest.get(line["role"])
        if top is not None and line["token"] < top["token"]:
            found.append(WriteViolation("stale", role, line["mono"],
                                        f"{line['member']} wrote under token {line['token']} after "
                                        f"{top['member']}'s {top['token']} was accepted", (top, line)))
        if top is None or line["token"] > top["token"]:
            highest[role] = line
    return found


def lost(dump: Dump, acks: Iterable[Line]) -> list[WriteViolation]:
    held = {(role, w["member"], w["seq"], w["token"]) for role, writes in dump.items() for w in writes}
    return [WriteViolation("lost", ack["role"], ack["mono"],
                           f"{ack['member']}'s write seq {ack['seq']} (token {ack['token']}) was acknowledged but "
                           f"the store does not hold it", (ack,))
            for ack in acks if (ack["role"], ack["member"], ack["seq"], ack["token"]) not in held]


def out_of_order(dump: Dump) -> list[WriteViolation]:
    found: list[WriteViolation] = []
    for role, writes in sorted(dump.items()):
        for prev, nxt in itertools.pairwise(writes):
            if nxt["token"] < prev["token"]:
                found.append(WriteViolation("out_of_order", role, nxt["mono"],
                                            f"token {nxt['token']} ({nxt['member']}) stored after token "
                                            f"{prev['token']} ({prev['member']})", (prev, nxt)))
    return found


def conflicting(attempts: Sequence[Line]) -> list[WriteViolation]:
    newest: dict[str, dict[str, Line]] = {}  # role -> member -> that member's accepted line with the top token
    found: list[WriteViolation] = []
    for line in attempts:
        if not line["accepted"]:
            continue
        role, member = line["role"], line["member"]
        by_member = newest.setdefault(role, {})
        others = [w for m, w in by_member.items() if m != member and w["token"] > line["token"]]
        if others:
            newer = max(others, key=lambda w: w["token"])
            found.append(WriteViolation("conflict", role, line["mono"],
                                        f"{member} (token {line['token']}) wrote over {newer['member']}'s writes "
                                        f"under the newer token {newer['token']}", (newer, line)))
        mine = by_member.get(member)
        if mine is None or line["token"] > mine["token"]:
            by_member[member] = line
    return found


def counts(attempts: Iterable[Line]) -> dict[str, Counts]:
    tally: dict[str, list[int]] = {}
    for line in attempts:
        row = tally.setdefault(line["member"], [0, 0, 0])
        row[0] += 1
        row[1 if line["accepted"] else 2] += 1
    return {m: Counts(*row) for m, row in sorted(tally.items())}


def read_jsonl(path: Path) -> list[Line]:
    """The JSON lines of a log; a missing file is empty, and a torn last line (its writer was killed mid-line)
    is left out. A bad line anywhere else raises ValueError."""
    try:
        raws = [raw for raw in Path(path).read_text(encoding="utf-8").splitlines() if raw.strip()]
    except FileNotFoundError:
        return []
    lines: list[Line] = []
    for i, raw in enumerate(raws):
        try:
            lines.append(json.loads(raw))
        except ValueError:
            if i < len(raws) - 1:
                raise ValueError(f"{path}: line {i + 1} is not JSON: {raw!r}") from None
    return lines
