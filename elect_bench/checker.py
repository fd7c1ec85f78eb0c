"""Reads a merged history and reports every violation of what an elector promised.

- two members leading one role at once, in a mode that claims exclusivity; in a mode that bounds its overlap
  instead (NELI full above its exclusivity bound: T), two members leading one role together for longer than that;
- a fencing token that did not increase from one leader of a role to the next (a member resuming its
  own leadership under the same token, nobody else having acquired in between, is allowed: see
  elect.contract.Leadership);
- a role without a leader for longer than its bound after the last fault healed.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from elect.contract import Characteristics
from elect_bench.history import History
from elect_bench.measures import leaderless, overlaps


@dataclass(frozen=True)
class Violation:
    kind: str  # overlap | token | leaderless
    role: str
    at: float
    detail: str
    since: float | None = None  # the earlier event it relates to (a token's previous acquisition)

    def __str__(self) -> str:
        return f"{self.kind} on {self.role} at {self.at:.3f}: {self.detail}"


def check(history: History, *, exclusive: bool, tokens: bool = True, leaderless_bound: float | None = None,
          healed_at: float | None = None, overlap_tolerance: float = 0.0,
          max_overlap: float | None = None) -> list[Violation]:
    """Every violation in `history`; tokens are checked only where the method has them (`tokens`: an anchor
    without a fencing token prints 0); `leaderless_bound` applies from `healed_at` (default: the last fault).
    `max_overlap` (a non-exclusive mode's bound) is judged per pair of leaderships: a chain of handovers may keep
    some two members leading for longer, each pair within the bound."""
    found: list[Violation] = []
    by_role = history.intervals()
    for role, ivs in sorted(by_role.items()):
        if exclusive:
            for start, end, members in overlaps(ivs):
                if end - start > overlap_tolerance:
                    found.append(Violation("overlap", role, start,
                                           f"{', '.join(sorted(members))} both led for {end - start:.3f} s"))
        elif max_overlap is not None:
            for a, b in itertools.combinations(ivs, 2):
                start, end = max(a.start, b.start), min(a.end, b.end)
                if a.member != b.member and end - start > max_overlap:
                    found.append(Violation("overlap", role, start, f"{a.member}, {b.member} both led for "
                                           f"{end - start:.3f} s (bound {max_overlap:g} s)"))
        acquired = [line for line in history.lines if tokens and line["role"] == role and line["event"] == "acquired"]
        for prev, nxt in itertools.pairwise(acquired):
            resumed = nxt["member"] == prev["member"] and nxt["token"] == prev["token"]
            if nxt["token"] <= prev["token"] and not resumed:
                found.append(Violation("token", role, nxt["mono"],
                                       f"{nxt['member']} got token {nxt['token']} after {prev['member']}'s "
                                       f"{prev['token']}", since=prev["mono"]))
    if leaderless_bound is not None:
        since = healed_at if healed_at is not None else max((f.mono for f in history.faults), default=history.start)
        for role in history.roles:
            for start, end in leaderless(by_role.get(role, []), since, history.end):
                if end - start > leaderless_bound:
                    found.append(Violation("leaderless", role, start,
                                           f"no leader for {end - start:.3f} s (bound {leaderless_bound:g} s)"))
    return sorted(found, key=lambda v: (v.at, v.role))


def check_promise(history: History, promised: Characteristics) -> list[Violation]:
    """`check` against what an elector promises (its `characteristics`): exclusivity, or a non-exclusive mode's
    overlap bound where it states one; token order where it has tokens."""
    return check(history, exclusive=promised.exclusive, tokens=promised.has_token,
                 max_overlap=None if promised.exclusive else promised.max_overlap)
