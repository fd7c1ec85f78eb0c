"""Measures over a recorded stream of leadership changes (from the simulator or real members).

A tenure runs from an ``acquired`` to the same node's next ``revoked``/``fenced`` in that group, using
the times the core put in the events (a fenced tenure ends at its lease end, not when noticed).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raft_priority.messages import LeadershipChange

INF = math.inf


@dataclass(frozen=True, slots=True)
class Tenure:
    group: int
    node: str
    term: int
    start: float
    end: float = INF
    end_kind: str = ""


def tenures(history: Iterable[LeadershipChange]) -> list[Tenure]:
    """All tenures, ordered by start; open ones end at infinity."""
    open_: dict[tuple[int, str], LeadershipChange] = {}
    done: list[Tenure] = []
    for c in history:
        key = (c.group, c.node)
        began = open_.pop(key, None)
        if began is not None:
            done.append(Tenure(c.group, c.node, began.term, began.at, c.at, c.kind))
        if c.kind == "acquired":
            open_[key] = c
    done.extend(Tenure(c.group, c.node, c.term, c.at) for c in open_.values())
    done.sort(key=lambda t: (t.group, t.start, t.node))
    return done


def same_term_conflicts(history: Iterable[LeadershipChange]) -> list[tuple[int, int, list[str]]]:
    """(group, term, nodes) wherever two different nodes acquired the same term: must be empty."""
    who: dict[tuple[int, int], set[str]] = {}
    for c in history:
        if c.kind == "acquired":
            who.setdefault((c.group, c.term), set()).add(c.node)
    return [(g, t, sorted(ns)) for (g, t), ns in sorted(who.items()) if len(ns) > 1]


def overlaps(ts: Iterable[Tenure], tolerance: float = 0.0) -> list[tuple[Tenure, Tenure]]:
    """Pairs of tenures of one group held by different nodes at the same time (lease violations)."""
    by_group: dict[int, list[Tenure]] = {}
    for t in ts:
        by_group.setdefault(t.group, []).append(t)
    bad: list[tuple[Tenure, Tenure]] = []
    for group_ts in by_group.values():
        group_ts.sort(key=lambda t: t.start)
        latest: Tenure | None = None
        for t in group_ts:
            if latest is not None and latest.node != t.node and t.start < latest.end - tolerance:
                bad.append((latest, t))
            if latest is None or t.end > latest.end:
                latest = t
    return bad


def leaders_at(ts: Iterable[Tenure], at: float) -> dict[int, list[str]]:
    res: dict[int, list[str]] = {}
    for t in ts:
        if t.start <= at < t.end:
            res.setdefault(t.group, []).append(t.node)
    return res


def timeline(ts: Iterable[Tenure], group: int) -> list[tuple[float, float, str, int]]:
    """(start, end, node, term) of one group's leaders over time."""
    return [(t.start, t.end, t.node, t.term) for t in ts if t.group == group]


def failover_times(
    history: Iterable[LeadershipChange], fault_at: float, failed: str, groups: Iterable[int]
) -> dict[int, float]:
    """Per group: from the fault to the first ``acquired`` by a surviving node (INF if never)."""
    want = set(groups)
    res = dict.fromkeys(want, INF)
    for c in history:
        if c.kind == "acquired" and c.group in want and c.node != failed and c.at >= fault_at and res[c.group] == INF:
            res[c.group] = c.at - fault_at
    return res


def max_per_node(leaders: Mapping[int, Iterable[str]], nodes: Iterable[str] = ()) -> int:
    counts: Counter[str] = Counter(dict.fromkeys(nodes, 0))
    for ns in leaders.values():
        counts.update(ns)
    return max(counts.values(), default=0)
