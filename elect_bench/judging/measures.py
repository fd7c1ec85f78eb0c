"""The measurements docs/architecture.md defines, computed from a `History`, and the one percentile.

- failover latency: from a fault to the first `acquired` by a *surviving* member (or by the failed member
  itself after its belief ended), per role the failed member led at the fault (0 if a survivor already
  believed it led the role then: non-exclusive overlap).
- leaderless gap: per role, time in a window with no member believing it leads.
- overlap: per role, time with two or more members believing they lead.
- distribution: the most roles one member leads at an instant; balanced when it equals ceil(P / live).
- time to balance: after a member returns, until every role is led once and the busiest member leads
  ceil(P / members), for good (to the end of the window).
- percentiles: `percentile`, the only definition in the project (runs, simulations and every kind of
  scenario summarize with it, so their numbers compare).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elect_bench.judging.history import FaultRecord, History, Interval


def _merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _clip(spans: Iterable[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(s, lo), min(e, hi)) for s, e in spans if min(e, hi) > max(s, lo)]


def leaderless(intervals: Sequence[Interval], lo: float, hi: float) -> list[tuple[float, float]]:
    """The spans within [lo, hi] when no member believed it led (the role's gaps)."""
    covered = _merge(_clip(((i.start, i.end) for i in intervals), lo, hi))
    gaps, cursor = [], lo
    for start, end in covered:
        if start > cursor:
            gaps.append((cursor, start))
        cursor = max(cursor, end)
    if cursor < hi:
        gaps.append((cursor, hi))
    return gaps


def overlaps(intervals: Sequence[Interval], lo: float = -math.inf, hi: float = math.inf
             ) -> list[tuple[float, float, frozenset[str]]]:
    """Spans when two or more members believed they led, with who (touching ends are no overlap)."""
    spans = [(max(i.start, lo), min(i.end, hi), i.member) for i in intervals if min(i.end, hi) > max(i.start, lo)]
    cuts = sorted({t for s, e, _ in spans for t in (s, e)})
    out: list[tuple[float, float, frozenset[str]]] = []
    for a, b in itertools.pairwise(cuts):
        who = frozenset(m for s, e, m in spans if s <= a and e >= b)
        if len(who) < 2:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b, out[-1][2] | who)
        else:
            out.append((a, b, who))
    return out


def total(spans: Iterable[tuple[float, ...]]) -> float:
    return sum(s[1] - s[0] for s in spans)


def holders_at(intervals_by_role: dict[str, list[Interval]], t: float) -> dict[str, list[str]]:
    """Per role, the members believing they lead at instant t."""
    return {role: [i.member for i in ivs if i.start <= t < i.end] for role, ivs in intervals_by_role.items()}


@dataclass(frozen=True)
class Failover:
    role: str
    failed: str
    fault: FaultRecord
    latency: float | None  # None: no survivor acquired the role before the end of the trial
    successor: str | None


def _led_at(intervals_by_role: dict[str, list[Interval]], fault: FaultRecord) -> list[str]:
    """The roles the fault's target believed it led at the fault."""
    return sorted(role for role, ivs in intervals_by_role.items()
                  if any(i.member == fault.target and i.start <= fault.mono <= i.end for i in ivs))


def failovers(history: History, fault: FaultRecord) -> list[Failover]:
    """Per role the fault's target led at the fault, the time until the role was led again: 0 when a survivor
    already believed it led at the fault (a non-exclusive mode's overlap), else until the next `acquired` by a
    survivor, or by the target itself once its belief at the fault has ended (a paused leader that wakes,
    fences and wins the role back has recovered it too; a long soak must not wait for some later handover)."""
    out = []
    by_role = history.intervals()
    for role in _led_at(by_role, fault):
        ivs = by_role[role]
        beside = next((i for i in ivs if i.member != fault.target and i.start <= fault.mono < i.end), None)
        if beside is not None:
            out.append(Failover(role, fault.target, fault, 0.0, beside.member))
            continue
        own = next(i for i in ivs if i.member == fault.target and i.start <= fault.mono <= i.end)
        nxt = next((line for line in history.lines
                    if line["role"] == role and line["event"] == "acquired" and line["mono"] >= fault.mono
                    and (line["member"] != fault.target or line["mono"] >= own.end)), None)
        out.append(Failover(role, fault.target, fault, None if nxt is None else nxt["mono"] - fault.mono,
                            None if nxt is None else nxt["member"]))
    return out


def handover_gaps(history: History, fault: FaultRecord, until: float = math.inf) -> list[Failover]:
    """After a gradual change (a membership change): every loss of a leader from the fault until `until`, each with
    the time from that loss until the role was acquired again (by anyone). A role may change hands twice (to a
    survivor as a member leaves, then to the member that joins), and each handover is one entry."""
    out = []
    for role, ivs in sorted(history.intervals().items()):
        for lost in (i for i in ivs if fault.mono <= i.end < until and i.ended_by != "open"):
            nxt = next((line for line in history.lines
                        if line["role"] == role and line["event"] == "acquired" and line["mono"] >= lost.end), None)
            out.append(Failover(role, lost.member, fault, None if nxt is None else nxt["mono"] - lost.end,
                                None if nxt is None else nxt["member"]))
    return out


def max_led(intervals_by_role: dict[str, list[Interval]], t: float) -> int:
    """The most roles one member believes it leads at instant t."""
    counts: dict[str, int] = {}
    for members in holders_at(intervals_by_role, t).values():
        for m in members:
            counts[m] = counts.get(m, 0) + 1
    return max(counts.values(), default=0)


def balanced(max_per_member: int, roles: int, live: int) -> bool:
    return live > 0 and max_per_member == math.ceil(roles / live)


def balanced_from(intervals_by_role: dict[str, list[Interval]], roles: Sequence[str], members: int, lo: float,
                  hi: float) -> float | None:
    """The instant from which, to `hi`, every one of `roles` has exactly one leader and the busiest of `members`
    leads ceil(roles / members): `lo` if it already holds then; None if it does not hold at `hi`."""
    cuts = sorted({t for ivs in intervals_by_role.values() for i in ivs for t in (i.start, i.end) if lo < t < hi})
    since: float | None = None
    for t in [lo, *cuts]:
        held = holders_at(intervals_by_role, t)
        counts: dict[str, int] = {}
        fine = True
        for role in roles:
            who = held.get(role, [])
            if len(who) != 1:
                fine = False
                break
            counts[who[0]] = counts.get(who[0], 0) + 1
        fine = fine and balanced(max(counts.values(), default=0), len(roles), members)
        if not fine:
            since = None
        elif since is None:
            since = t
    return since


def handover_overlaps(history: History, fault: FaultRecord) -> list[float]:
    """Per role the fault's target led at the fault, how long after it two or more members believed they led
    it (a non-exclusive leaver leads on until its own deadline)."""
    by_role = history.intervals()
    return [sum(e - s for s, e, _ in overlaps(by_role[role], lo=fault.mono)) for role in _led_at(by_role, fault)]


def survivor_fences(history: History, fault: FaultRecord) -> int:
    """`fenced` events of members the fault did not target, after it: a healthy member losing a role it led
    unasked (0 when a handover disturbs only the roles that move)."""
    return sum(1 for line in history.lines
               if line["event"] == "fenced" and line["member"] != fault.target and line["mono"] >= fault.mono)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolating linearly between the two nearest ranks; NaN for no values.

    Linear rather than nearest-rank: with the few dozen values a cell has, nearest-rank p99 is simply the
    maximum and p50 of an even count is one of two middle values; interpolation moves smoothly with the data.
    """
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def mean(values: Iterable[float]) -> float:
    """The mean of the values that are numbers (a process gone before it was read is NaN); NaN for none."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


@dataclass(frozen=True)
class Summary:
    n: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        return cls(len(values), percentile(values, 50), percentile(values, 99), max(values, default=math.nan))


def disruptions(history: History, fault: FaultRecord, until: float = math.inf) -> list[Failover]:
    """After a fault to the infrastructure: per role whose leader at the fault lost its leadership before the
    end (or before `until`: a soak's next fault, which owns what ends after it), the time from the fault until
    the role was acquired again (by anyone, the same member included)."""
    out = []
    for role, ivs in sorted(history.intervals().items()):
        lost = [i for i in ivs if i.start <= fault.mono < i.end < until and i.ended_by != "open"]
        if not lost:
            continue
        nxt = next((line for line in history.lines
                    if line["role"] == role and line["event"] == "acquired" and line["mono"] > fault.mono), None)
        out.append(Failover(role, lost[0].member, fault, None if nxt is None else nxt["mono"] - fault.mono,
                            None if nxt is None else nxt["member"]))
    return out
