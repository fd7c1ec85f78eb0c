"""Fair shares of roles among members of different capacity (`weight`) and soft caps (`max_roles`).

One rule for every method that balances roles itself (the lease cores and memory://), so each member computes
the same shares from what the others publish:

* without caps, a member's share is ceil(roles x its weight / the live members' total weight); with every
  weight 1 that is ceil(roles / live members), the rule of equal sharing;
* a cap below that proportional part is the member's share, and what it leaves over is shared among the others
  by their weights (water-filling), so the uncapped members' shares grow to cover it.

Exact arithmetic (fractions of the weights as published), so a proportional part that is a whole number is not
rounded up by a float error, and members that publish the same numbers agree on every share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from elect.options import rule

K = TypeVar("K")


@dataclass(frozen=True)
class Capacity:
    """What a member says of its capacity: `weight` (> 0, relative to the others) and `max_roles` (a soft cap, or
    None)."""

    weight: float = 1.0
    max_roles: int | None = None


DEFAULT = Capacity()


def check_capacity(weight: float, max_roles: int | None) -> None:
    """The option rules shared by every method that honours them."""
    rule(math.isfinite(weight) and weight > 0, "weight", f"must be > 0 (a member's relative capacity), got {weight!r}")
    rule(max_roles is None or max_roles >= 1, "max_roles", f"must be >= 1, got {max_roles!r}")


def refuse_capacity(scheme: str, weight: float, max_roles: int | None, why: str) -> None:
    """For methods that cannot honour them: weight 1 and no cap only, with the reason in the error."""
    rule(weight == 1, "weight", f"{scheme}:// cannot weigh members: {why}")
    rule(max_roles is None, "max_roles", f"{scheme}:// cannot cap a member's roles: {why}")


def shares(roles: int, members: Mapping[K, Capacity]) -> dict[K, int]:
    """Each member's share of `roles` (see the module). Shares add up to at least `roles` unless every member is
    capped below its part; a member above its share sheds, one below it is offered free roles first."""
    if members and all(c.max_roles is None for c in members.values()) and \
            len({c.weight for c in members.values()}) == 1:  # equal weights, no caps: the common case, in integers
        equal = -(-roles // len(members))
        return dict.fromkeys(members, equal)
    weight = {k: Fraction(c.weight) for k, c in members.items()}
    left, total = Fraction(roles), sum(weight.values(), Fraction(0))
    fixed: dict[K, int] = {}
    capped = sorted((k for k, c in members.items() if c.max_roles is not None),
                    key=lambda k: Fraction(members[k].max_roles or 0) / weight[k])
    for k in capped:  # in order of cap per weight: fixing one below the level only raises the level
        cap = members[k].max_roles
        assert cap is not None
        if total <= 0 or cap * total >= left * weight[k]:
            break
        fixed[k] = cap
        left -= cap
        total -= weight[k]
    return {k: fixed[k] if k in fixed else (math.ceil(left * weight[k] / total) if total > 0 else 0)
            for k in members}
