"""Which nodes replicate each partition and with what priority, so leaders spread evenly.

Priority election makes the highest-priority live member lead, so the whole leader distribution --
at start and after failures -- is decided here, once, by arithmetic:

* ``zeebe``: ZEP006's round-robin scheme, reproducing the table in ZEP006.
* ``balanced`` (default): primaries round-robin (at most ceil(P/N) per node); then, for every node f,
  the secondaries of f's partitions go to nodes that stay within ceil(P/(N-1)) leaders if f fails (so
  after any single failure that bound holds exactly, for every N, P, RF); tertiaries are water-filled
  the same way for every failed pair against ceil(P/(N-2)) (met in about 90% of pair failures, within
  one otherwise: it is not always reachable, e.g. N=5, P=3: the two nodes without a primary must be
  secondaries of three partitions, so one of them is secondary twice); lower ranks spread replicas.
  With RF < N this also picks the members, which is what makes those bounds reachable at all.
* ``off``: round-robin members, all of equal priority (stock Raft decides).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

Strategy = str


def assign_priorities(
    nodes: Sequence[str], partitions: int, replication: int, strategy: Strategy = "balanced"
) -> list[dict[str, int]]:
    """Per partition (index 0..P-1): member node -> priority; the primary has ``replication``.

    Members are listed best first. Deterministic: the same arguments always give the same result.
    """
    names = list(nodes)
    n = len(names)
    if n == 0 or len(set(names)) != n:
        raise ValueError("nodes must be a non-empty list of distinct names")
    if not 1 <= replication <= n:
        raise ValueError(f"replication must be within 1..{n}")
    if partitions < 0:
        raise ValueError("partitions must be >= 0")
    if strategy == "zeebe":
        return [{names[m]: p for m, p in ranks} for ranks in _zeebe(n, partitions, replication)]
    if strategy == "off":
        return [{names[(i + k) % n]: 1 for k in range(replication)} for i in range(partitions)]
    if strategy == "balanced":
        return [
            {names[m]: replication - k for k, m in enumerate(order)} for order in _balanced(n, partitions, replication)
        ]
    raise ValueError(f"unknown strategy {strategy!r} (balanced, zeebe, off)")


def _zeebe(n: int, partitions: int, rf: int) -> list[list[tuple[int, int]]]:
    """ZEP006: partition i (0-based) has primary i mod N and members i..i+RF-1 around the ring.

    The primary gets RF. The others get RF-1 .. 1 walking away from the primary in even blocks of N
    partitions and 1 .. RF-1 in odd blocks, so a node that is primary twice has different secondaries.
    (This is the reading of ZEP006's pseudo-code that reproduces its table.)
    """
    out = []
    for i in range(partitions):
        ring = [(i + k) % n for k in range(rf)]
        descending = (i // n) % 2 == 0
        ranks = [(ring[0], rf)]
        for k in range(1, rf):
            ranks.append((ring[k], rf - k if descending else k))
        ranks.sort(key=lambda mp: -mp[1])
        out.append(ranks)
    return out


def _balanced(n: int, partitions: int, rf: int) -> list[list[int]]:
    order: list[list[int]] = [[i % n] for i in range(partitions)]  # members, best first
    if rf == 1 or partitions == 0:
        return order
    primaries = [0] * n
    by_primary: list[list[int]] = [[] for _ in range(n)]
    for i in range(partitions):
        primaries[i % n] += 1
        by_primary[i % n].append(i)
    members = primaries[:]  # partitions each node is a member of, so far
    cap1 = -(-partitions // (n - 1))  # leaders per survivor after one failure
    cap2 = -(-partitions // (n - 2)) if n > 2 else partitions  # ... after two
    sec = _secondaries(order, by_primary, primaries, members, cap1, cap2)
    if rf == 2:
        return order
    _tertiaries(order, sec, primaries, members, cap2)
    if rf > 3:
        _the_rest(order, members, rf)
    return order


def _secondaries(
    order: list[list[int]],
    by_primary: list[list[int]],
    primaries: list[int],
    members: list[int],
    cap1: int,
    cap2: int,
) -> list[list[int]]:
    """For each node f, give f's partitions secondaries that keep every survivor of f's failure within
    ``cap1`` leaders (always possible: the survivors' spare room adds up to at least f's partitions).
    Among those, avoid nodes that would exceed ``cap2`` if f and one more primary failed, then prefer
    the fewest replicas. Returns sec[f][x]: partitions with primary f and secondary x."""
    n = len(primaries)
    sec = [[0] * n for _ in range(n)]
    top = [[0, -1, 0] for _ in range(n)]  # per x: the largest sec[g][x], that g, the second largest
    for f in range(n):
        sf = sec[f]
        for i in by_primary[f]:
            best, best_key = -1, (0, 0, 0, 0)
            for x in range(n):
                if x == f:
                    continue
                led = primaries[x] + sf[x]
                if led >= cap1 and best >= 0:
                    continue
                t = top[x]
                pair = led + 1 + (t[0] if t[1] != f else t[2])  # if f and the worst other primary fail
                key = (int(led >= cap1), max(pair - cap2, 0), members[x], (x - f) % n)
                if best < 0 or key < best_key:
                    best, best_key = x, key
            order[i].append(best)
            sf[best] += 1
            members[best] += 1
            t, v = top[best], sf[best]
            if t[1] == f:
                t[0] = v
            elif v > t[0]:
                t[0], t[1], t[2] = v, f, t[0]
            elif v > t[2]:
                t[2] = v
    return sec


def _tertiaries(
    order: list[list[int]], sec: list[list[int]], primaries: list[int], members: list[int], cap2: int
) -> None:
    """For each pair {f, g} of primary and secondary, water-fill the partitions that move when both
    fail over the survivors' leader counts in that scenario, within ``cap2`` where possible."""
    n = len(primaries)
    by_pair: dict[tuple[int, int], list[int]] = {}
    for i, o in enumerate(order):
        f, g = o[0], o[1]
        by_pair.setdefault((min(f, g), max(f, g)), []).append(i)
    for (f, g), parts in sorted(by_pair.items()):
        sf, sg = sec[f], sec[g]
        load = [primaries[x] + sf[x] + sg[x] for x in range(n)]
        candidates = [x for x in range(n) if x != f and x != g]
        heap = [(members[x], (x - f - g) % n, x) for x in candidates]
        heapq.heapify(heap)
        for i in parts:
            while heap and load[heap[0][2]] >= cap2:
                heapq.heappop(heap)  # full in this scenario
            if heap:
                _, rot, x = heapq.heappop(heap)
            else:  # nobody has room: the least loaded
                x = min(candidates, key=lambda c: (load[c], members[c]))
                rot = -1
            order[i].append(x)
            load[x] += 1
            members[x] += 1
            if rot >= 0:
                heapq.heappush(heap, (members[x], rot, x))


def _the_rest(order: list[list[int]], members: list[int], rf: int) -> None:
    """Ranks 4..RF (they lead only after three failures): spread replicas evenly."""
    n = len(members)
    if rf == n:  # everybody is a member: ring order, rotated per partition
        for i, o in enumerate(order):
            taken = set(o)
            start = o[0] + 1 + i // n
            o.extend(x for x in ((start + k) % n for k in range(n)) if x not in taken)
        return
    pool = [(members[x], x) for x in range(n)]
    heapq.heapify(pool)
    for o in order:
        taken = set(o)
        skipped: list[tuple[int, int]] = []
        chosen: list[int] = []
        while len(chosen) < rf - 3:
            cnt, x = heapq.heappop(pool)
            if x in taken:
                skipped.append((cnt, x))
            else:
                chosen.append(x)
        o.extend(chosen)
        for x in chosen:
            members[x] += 1
            heapq.heappush(pool, (members[x], x))
        for item in skipped:
            heapq.heappush(pool, item)
