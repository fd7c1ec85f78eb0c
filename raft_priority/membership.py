"""A raft:// cluster's membership: who its nodes are, where they listen, and which node is each partition's primary.

It is the payload of the cluster group's configuration (`raft_priority.messages.Conf`, group `CLUSTER`): the one
election group every voter belongs to, whose configuration log is the cluster's membership history. Partition
groups follow it: each partition's voters and priorities are derived from the committed membership
(:func:`partition_voters`), and the partition's own leader takes its group there (`RaftGroup.set_target`).

Primaries are stored, not recomputed: the table's round-robin for N + 1 nodes would move most partitions' leaders,
while a new node needs only its share of them (:func:`sticky_primaries` moves the fewest that make the counts
even, or as the weights say). The other ranks (successors) are recomputed from the primaries by
`raft_priority.priorities`, so after any change they are as even as at the start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raft_priority.priorities import assign_priorities, integer_weights, primary_quota

CLUSTER = 0xFFFFFFFE
"""The cluster group's id: outside every partition's (partitions are 0..99,999), inside the wire's uint32."""


@dataclass(frozen=True, slots=True)
class Membership:
    """Node id -> HOST:PORT for every node the cluster's configuration names, and each partition's primary."""

    addresses: tuple[tuple[str, str], ...]
    primaries: tuple[str, ...]

    @classmethod
    def of(cls, addresses: Mapping[str, str], primaries: Sequence[str]) -> Membership:
        return cls(tuple(sorted(addresses.items())), tuple(primaries))

    def address_map(self) -> dict[str, str]:
        return dict(self.addresses)

    def to_json(self) -> str:
        return json.dumps({"addresses": dict(self.addresses), "primaries": list(self.primaries)},
                          separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Membership:
        try:
            raw = json.loads(text)
            addresses, primaries = raw["addresses"], raw["primaries"]
        except (KeyError, TypeError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError already
            raise ValueError(f"not a membership: {exc}") from None
        if not (isinstance(addresses, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in addresses.items())):
            raise ValueError(f"membership addresses must map ids to HOST:PORT, got {addresses!r}")
        if not (isinstance(primaries, list) and all(isinstance(p, str) for p in primaries)):
            raise ValueError(f"membership primaries must be a list of ids, got {primaries!r}")
        return cls.of(addresses, primaries)


def sticky_primaries(previous: Sequence[str], voters: Sequence[str], weights: Mapping[str, float] | None = None
                     ) -> list[str]:
    """Each partition's primary among ``voters``, moving as few as the new counts require: a partition keeps its
    primary while that node is a voter within its quota (the counts `assign_priorities` would give, by weight);
    the others go, in partition order, to the node furthest below its quota. N -> N + 1 nodes moves about
    P / (N + 1) partitions, all of them to the new node."""
    names = sorted(voters)
    scaled = integer_weights([(weights or {}).get(x, 1.0) for x in names]) or [1] * len(names)
    quota = dict(zip(names, primary_quota(len(previous), scaled), strict=True))
    count = dict.fromkeys(names, 0)
    out: list[str | None] = []
    for p in previous:
        if p in count and count[p] < quota[p]:
            count[p] += 1
            out.append(p)
        else:
            out.append(None)
    result: list[str] = []
    for kept in out:
        if kept is None:
            kept = max(names, key=lambda x: (quota[x] - count[x], -names.index(x)))
            count[kept] += 1
        result.append(kept)
    return result


def partition_voters(voters: Sequence[str], primaries: Sequence[str], replication: int | None, strategy: str,
                     weights: Mapping[str, float] | None = None) -> list[dict[str, int]]:
    """Per partition: member -> priority, for these voters (sorted) with these primaries. ``replication`` None: every
    voter is a member. With ``strategy`` other than balanced the primaries are the table's own."""
    names = sorted(voters)
    rf = len(names) if replication is None else min(replication, len(names))
    if strategy != "balanced":
        return assign_priorities(names, len(primaries), rf, strategy)
    return assign_priorities(names, len(primaries), rf, strategy, weights or None,
                             primaries=[names.index(p) for p in primaries])


def initial(addresses: Mapping[str, str], partitions: int, replication: int | None, strategy: str,
            weights: Mapping[str, float] | None = None) -> tuple[Membership, list[dict[str, int]]]:
    """A new cluster's membership (the static `peers` form) and its partitions' voters: the table as it always was."""
    names = sorted(addresses)
    rf = len(names) if replication is None else replication
    table = assign_priorities(names, partitions, rf, strategy, weights or None)
    primaries = [max(t, key=lambda m: t[m]) for t in table]
    return Membership.of(addresses, primaries), table


@dataclass(frozen=True, slots=True)
class Layout:
    """What every node of a cluster is given alike and never changes while it runs: how many partitions, how many
    replicas each (None: every voter), how priorities are laid out, the nodes' weights."""

    partitions: int
    replication: int | None = None
    strategy: str = "balanced"
    weights: tuple[tuple[str, float], ...] = ()

    def table(self, voters: Sequence[str], membership: Membership) -> list[dict[str, int]]:
        """Each partition's voters and priorities for this committed membership."""
        weights = dict(self.weights) or None
        primaries = membership.primaries
        if any(p not in voters for p in primaries):  # not a table of these voters: the closest one that is
            primaries = tuple(sticky_primaries(primaries, voters, weights))
        return partition_voters(voters, primaries, self.replication, self.strategy, weights)
