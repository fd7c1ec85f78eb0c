"""Measures over a recorded stream of leadership changes (:class:`~elect_bench.simulation.world.Recorded`).

A tenure runs from an ``Acquire`` to the same node's next ``Revoke``/``Fence`` in that group (role), at
the times the changes took effect (:func:`effective_at`: a fenced tenure ends at its lease end, not
when noticed).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from elect.core import Acquire, Extend, Fence, LeadershipChange, Revoke
from elect.roles import Role
from elect_bench.simulation.world import Recorded

INF = math.inf


KINDS: dict[type[LeadershipChange], str] = {Acquire: "acquired", Extend: "extended", Revoke: "revoked",
                                           Fence: "fenced"}
"""Each change's name, as in the events members print (an Extend prints none)."""


def effective_at(r: Recorded) -> float:
    """When a change took effect: a Fence at its ``until`` (the lease end, earlier than the step that
    noticed it when the node ran late), any other change at its step."""
    c = r.change
    return c.until if isinstance(c, Fence) else r.at


@dataclass(frozen=True, slots=True)
class Tenure:
    group: Role
    node: str
    term: int
    start: float
    end: float = INF
    end_kind: str = ""


def tenures(history: Iterable[Recorded]) -> list[Tenure]:
    """All tenures, ordered by start; open ones end at infinity."""
    open_: dict[tuple[Role, str], tuple[int, float]] = {}  # (term, start)
    done: list[Tenure] = []
    for r in history:
        c = r.change
        if isinstance(c, Extend):
            continue
        key = (c.role, r.node)
        began = open_.pop(key, None)
        if began is not None:
            done.append(Tenure(c.role, r.node, began[0], began[1], effective_at(r), KINDS[type(c)]))
        if isinstance(c, Acquire):
            open_[key] = (c.token, r.at)
    done.extend(Tenure(g, node, term, start) for (g, node), (term, start) in open_.items())
    done.sort(key=lambda t: (t.group, t.start, t.node))
    return done


def same_term_conflicts(history: Iterable[Recorded]) -> list[tuple[Role, int, list[str]]]:
    """(group, term, nodes) wherever two different nodes acquired the same term: must be empty."""
    who: dict[tuple[Role, int], set[str]] = {}
    for r in history:
        c = r.change
        if isinstance(c, Acquire):
            who.setdefault((c.role, c.token), set()).add(r.node)
    return [(g, t, sorted(ns)) for (g, t), ns in sorted(who.items()) if len(ns) > 1]


def overlaps(ts: Iterable[Tenure], tolerance: float = 0.0) -> list[tuple[Tenure, Tenure]]:
    """Pairs of tenures of one group held by different nodes at the same time (lease violations)."""
    by_group: dict[Role, list[Tenure]] = {}
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


def leaders_at(ts: Iterable[Tenure], at: float) -> dict[Role, list[str]]:
    res: dict[Role, list[str]] = {}
    for t in ts:
        if t.start <= at < t.end:
            res.setdefault(t.group, []).append(t.node)
    return res


def timeline(ts: Iterable[Tenure], group: Role) -> list[tuple[float, float, str, int]]:
    """(start, end, node, term) of one group's leaders over time."""
    return [(t.start, t.end, t.node, t.term) for t in ts if t.group == group]


def failover_times(
    history: Iterable[Recorded], fault_at: float, failed: str, groups: Iterable[Role]
) -> dict[Role, float]:
    """Per group: from the fault to the first ``Acquire`` by a surviving node (INF if never)."""
    want = set(groups)
    res = dict.fromkeys(want, INF)
    for r in history:
        c = r.change
        if isinstance(c, Acquire) and c.role in want and r.node != failed and r.at >= fault_at and res[c.role] == INF:
            res[c.role] = r.at - fault_at
    return res


def max_per_node(leaders: Mapping[Role, Iterable[str]], nodes: Iterable[str] = ()) -> int:
    counts: Counter[str] = Counter(dict.fromkeys(nodes, 0))
    for ns in leaders.values():
        counts.update(ns)
    return max(counts.values(), default=0)
