"""Reading members' event lines: who leads what, and how long a role went without a leader."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from elect_bench.members import Line, MemberProcess

Spawn = Callable[..., MemberProcess]
_names = itertools.count()


def unique(name: str) -> str:
    """A key prefix / node path no other test uses."""
    return f"{name}-{next(_names)}-{time.monotonic_ns()}"


def holders(members: Sequence[MemberProcess], role: str) -> list[str]:
    return [m.member_id for m in members if m.alive and role in m.log.leading()]


def counts(members: Sequence[MemberProcess]) -> dict[str, int]:
    return {m.member_id: len(m.log.leading()) for m in members if m.alive}


def settled(members: Sequence[MemberProcess], roles: Sequence[str], per_member: int | None = None) -> bool:
    """Every role has exactly one live leader (and, if given, every live member leads `per_member`)."""
    if not all(len(holders(members, r)) == 1 for r in roles):
        return False
    return per_member is None or all(n == per_member for n in counts(members).values())


def longest_gap(members: Sequence[MemberProcess], role: str, start: float, end: float) -> float:
    """The longest time within [start, end] during which no member led `role` by its own event lines
    (a fenced leadership counts as ended at its `until`)."""
    lines: list[tuple[float, int, Line]] = []
    for m in members:
        for line in m.log.lines:
            if line["role"] != role:
                continue
            at = line["until"] if line["event"] == "fenced" else line["mono"]
            lines.append((at, 0 if line["event"] != "acquired" else 1, line))
    lines.sort(key=lambda x: (x[0], x[1]))
    leading: set[str] = set()
    gap_from: float | None = None
    longest = 0.0
    started = False
    for at, _, line in lines:
        if at > end:
            break
        if at >= start and not started:
            started = True
            gap_from = None if leading else start
        if line["event"] == "acquired":
            leading.add(line["member"])
        else:
            leading.discard(line["member"])
        if at < start:
            continue
        if not leading and gap_from is None:
            gap_from = at
        elif leading and gap_from is not None:
            longest = max(longest, at - gap_from)
            gap_from = None
    if not started and not leading:
        gap_from = start
    if gap_from is not None:
        longest = max(longest, end - gap_from)
    return longest
