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

Weights (``balanced`` only): a node of weight 2 is primary for twice as many partitions as one of weight 1.
The primaries' counts are the weights' proportional parts by largest remainder (Hamilton), laid out so that
each partition goes to the node furthest behind its proportional part so far (ties: the first node), which
with equal weights is exactly the round-robin above. The failure bounds become per node: after f fails, x
leads at most ceil(P w_x / (W - w_f)) (W the total weight), which the secondaries keep exactly; after two
failures the tertiaries aim at ceil(P w_x / (W - w_f - w_g)); "fewest replicas" becomes fewest per weight.
With equal weights every bound and every choice is the unweighted one, so the table is the same, byte for
byte. Weights are read as the decimals they print as (0.1 is 1/10) and scaled to the smallest integers
with the same ratios, so the arithmetic is exact and every node computes the same table.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction

Strategy = str


def assign_priorities(
    nodes: Sequence[str], partitions: int, replication: int, strategy: Strategy = "balanced",
    weights: Mapping[str, float] | None = None, primaries: Sequence[int] | None = None,
) -> list[dict[str, int]]:
    """Per partition (index 0..P-1): member node -> priority; the primary has ``replication``.

    Members are listed best first. Deterministic: the same arguments always give the same result.
    ``weights``: node -> weight (> 0; a node not named weighs 1); ``balanced`` only (see the module).
    ``primaries``: each partition's primary (an index into ``nodes``), kept as given, with the other ranks laid out
    around them as always (`raft_priority.membership.sticky_primaries` keeps them across membership changes);
    ``balanced`` only.
    """
    names = list(nodes)
    n = len(names)
    if n == 0 or len(set(names)) != n:
        raise ValueError("nodes must be a non-empty list of distinct names")
    if not 1 <= replication <= n:
        raise ValueError(f"replication must be within 1..{n}")
    if partitions < 0:
        raise ValueError("partitions must be >= 0")
    scaled = integer_weights([(weights or {}).get(name, 1.0) for name in names])
    if (scaled is not None or primaries is not None) and strategy != "balanced":
        raise ValueError(f"weights and primaries need the balanced strategy, not {strategy!r}")
    if primaries is not None and (len(primaries) != partitions or any(not 0 <= x < n for x in primaries)):
        raise ValueError(f"primaries must name one of the {n} nodes for each of the {partitions} partitions")
    if strategy == "zeebe":
        return [{names[m]: p for m, p in ranks} for ranks in _zeebe(n, partitions, replication)]
    if strategy == "off":
        return [{names[(i + k) % n]: 1 for k in range(replication)} for i in range(partitions)]
    if strategy == "balanced":
        return [
            {names[m]: replication - k for k, m in enumerate(order)}
            for order in _balanced(n, partitions, replication, scaled or [1] * n, primaries)
        ]
    raise ValueError(f"unknown strategy {strategy!r} (balanced, zeebe, off)")


def integer_weights(weights: Sequence[float]) -> list[int] | None:
    """The smallest positive integers in the ratios of ``weights`` (each read as the decimal it prints as);
    None when they are all equal, i.e. unweighted."""
    if any(not (math.isfinite(w) and w > 0) for w in weights):
        raise ValueError(f"weights must be positive and finite, got {list(weights)}")
    exact = [Fraction(repr(float(w))) for w in weights]
    if len(set(exact)) <= 1:
        return None
    scale = math.lcm(*(f.denominator for f in exact))
    ints = [int(f * scale) for f in exact]
    common = math.gcd(*ints)
    return [i // common for i in ints]


def primary_quota(partitions: int, w: Sequence[int]) -> list[int]:
    """How many partitions each node is primary of: the weights' proportional parts by largest remainder."""
    n, total = len(w), sum(w)
    quota = [partitions * wx // total for wx in w]
    by_remainder = sorted(range(n), key=lambda x: (-(partitions * w[x] % total), x))
    for x in by_remainder[: partitions - sum(quota)]:
        quota[x] += 1
    return quota


def _primaries(partitions: int, w: list[int]) -> list[int]:
    """The primary of each partition: counts by largest remainder, each partition to the node furthest behind
    its proportional part so far (see the module). With equal weights: i mod N."""
    n, total = len(w), sum(w)
    quota = primary_quota(partitions, w)
    count = [0] * n
    out: list[int] = []
    for i in range(partitions):
        # deficit of x after i + 1 partitions, times W: w_x (i + 1) - W count_x; ties go to the first node
        best = max((x for x in range(n) if count[x] < quota[x]), key=lambda x: (w[x] * (i + 1) - total * count[x], -x))
        count[best] += 1
        out.append(best)
    return out


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


def _balanced(n: int, partitions: int, rf: int, w: list[int], given: Sequence[int] | None = None) -> list[list[int]]:
    equal = len(set(w)) == 1
    if given is not None:
        first = list(given)
    else:
        first = [i % n for i in range(partitions)] if equal else _primaries(partitions, w)
    order: list[list[int]] = [[x] for x in first]  # members, best first
    if rf == 1 or partitions == 0:
        return order
    primaries = [0] * n
    by_primary: list[list[int]] = [[] for _ in range(n)]
    for i, x in enumerate(first):
        primaries[x] += 1
        by_primary[x].append(i)
    members = primaries[:]  # partitions each node is a member of, so far
    total = sum(w)
    per = [math.lcm(*w) // wx for wx in w]  # replicas x per[x]: replicas per weight, in integers

    def ceil_share(x: int, gone: int) -> int:  # x's proportional part once nodes of weight `gone` failed
        return -(-partitions * w[x] // (total - gone))

    # leaders per survivor x after f fails; ... after f and the heaviest other node fail
    cap1 = [[ceil_share(x, w[f]) if x != f else 0 for x in range(n)] for f in range(n)]
    cap2 = [[ceil_share(x, w[f] + max(w[g] for g in range(n) if g not in (f, x))) if n > 2 and x != f else partitions
             for x in range(n)] for f in range(n)]
    sec = _secondaries(order, by_primary, primaries, members, per, cap1, cap2)
    if rf == 2:
        return order
    _tertiaries(order, sec, primaries, members, per,
                lambda f, g, x: ceil_share(x, w[f] + w[g]))
    if rf > 3:
        _the_rest(order, members, per, rf)
    return order


def _secondaries(
    order: list[list[int]],
    by_primary: list[list[int]],
    primaries: list[int],
    members: list[int],
    per: list[int],
    cap1: list[list[int]],
    cap2: list[list[int]],
) -> list[list[int]]:
    """For each node f, give f's partitions secondaries that keep every survivor x of f's failure within
    ``cap1[f][x]`` leaders (always possible: the survivors' spare room adds up to at least f's partitions).
    Among those, avoid nodes that would exceed ``cap2[f][x]`` if f and one more primary failed, then prefer
    the fewest replicas (per weight: ``members[x] * per[x]``). Returns sec[f][x]: partitions with primary f
    and secondary x."""
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
                if led >= cap1[f][x] and best >= 0:
                    continue
                t = top[x]
                pair = led + 1 + (t[0] if t[1] != f else t[2])  # if f and the worst other primary fail
                key = (int(led >= cap1[f][x]), max(pair - cap2[f][x], 0), members[x] * per[x], (x - f) % n)
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
    order: list[list[int]], sec: list[list[int]], primaries: list[int], members: list[int], per: list[int],
    cap2: Callable[[int, int, int], int],
) -> None:
    """For each pair {f, g} of primary and secondary, water-fill the partitions that move when both
    fail over the survivors' leader counts in that scenario, within ``cap2(f, g, x)`` where possible."""
    n = len(primaries)
    by_pair: dict[tuple[int, int], list[int]] = {}
    for i, o in enumerate(order):
        f, g = o[0], o[1]
        by_pair.setdefault((min(f, g), max(f, g)), []).append(i)
    for (f, g), parts in sorted(by_pair.items()):
        sf, sg = sec[f], sec[g]
        load = [primaries[x] + sf[x] + sg[x] for x in range(n)]
        candidates = [x for x in range(n) if x != f and x != g]
        cap = {x: cap2(f, g, x) for x in candidates}
        heap = [(members[x] * per[x], (x - f - g) % n, x) for x in candidates]
        heapq.heapify(heap)
        for i in parts:
            while heap and load[heap[0][2]] >= cap[heap[0][2]]:
                heapq.heappop(heap)  # full in this scenario
            if heap:
                _, rot, x = heapq.heappop(heap)
            else:  # nobody has room: the least loaded (for its weight: the furthest below its bound)
                x = min(candidates, key=lambda c: (load[c] - cap[c], load[c], members[c] * per[c]))
                rot = -1
            order[i].append(x)
            load[x] += 1
            members[x] += 1
            if rot >= 0:
                heapq.heappush(heap, (members[x] * per[x], rot, x))


def _the_rest(order: list[list[int]], members: list[int], per: list[int], rf: int) -> None:
    """Ranks 4..RF (they lead only after three failures): spread replicas evenly (per weight)."""
    n = len(members)
    if rf == n:  # everybody is a member: ring order, rotated per partition
        for i, o in enumerate(order):
            taken = set(o)
            start = o[0] + 1 + i // n
            o.extend(x for x in ((start + k) % n for k in range(n)) if x not in taken)
        return
    pool = [(members[x] * per[x], x) for x in range(n)]
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
            heapq.heappush(pool, (members[x] * per[x], x))
        for item in skipped:
            heapq.heappush(pool, item)
