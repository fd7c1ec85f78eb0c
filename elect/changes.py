"""The leadership changes a pure core asks for, one set for every core (lease, NELI).

A core decides; the elector's driver applies the change through `BaseElector.apply`, which keeps the
event order and the fencing rules in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from elect.roles import Role


@dataclass(frozen=True)
class Acquire:
    """This member leads `role` under `token` until `deadline` (monotonic) unless extended."""

    role: Role
    token: int
    deadline: float


@dataclass(frozen=True)
class Extend:
    """The leadership of `role` holds until the new `deadline`."""

    role: Role
    deadline: float


@dataclass(frozen=True)
class Revoke:
    """Orderly end of leadership: emit Revoked and let callbacks finish before the successor starts."""

    role: Role


@dataclass(frozen=True)
class Fence:
    """Leadership of `role` ended abruptly; by the member's own rule it ended at `until`."""

    role: Role
    until: float


LeadershipChange = Acquire | Extend | Revoke | Fence
