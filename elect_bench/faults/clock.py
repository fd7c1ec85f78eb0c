"""Faults to members' clocks: a clock that runs at another rate, alone (`drift`) or while another fault strikes
(`pause@leader:0.8`: the leader's clock at 0.8 of real time, then it is paused).

Each exclusive method fences a leader on its own clock and times its silence on others' (or the store's): that is
safe only while the rates agree within the bound the method states (`Characteristics.max_drift`). Members run under
a faked clock for these (`elect_bench.fakeclock`): every elect method and the Python anchors (kazoo, k8s-python). The
Go anchors (etcd-election, goneli, client-go) read the clock without libc and the Java ones (jraft, ratis) wait in
ways libfaketime does not all wrap, so a trial refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from elect.errors import ConfigError
from elect_bench.faults.base import REGISTRY, MemberFault

if TYPE_CHECKING:
    from elect_bench.placement import Placement, Signalled


class Drift(MemberFault):
    """The victim's clock runs at `rate` of real time for the hold, then at the real rate again.

    A slow leader renews less often and believes in its lease longer than others wait for it; at 0.95 it stays
    inside every bound stated here (a rate ratio of 1.053), so no leadership should move and none overlap:
    whether anything moved is the finding (measured as disruption)."""

    name = "drift"
    fakes_clock = True
    fails_over = False
    healed_as = "clock-restored"
    rate: ClassVar[float] = 0.95

    def clocks(self, victim: str, others: Sequence[str]) -> Mapping[str, float]:
        return {victim: self.rate}

    def inject(self, placement: Placement, victim: Signalled) -> None:
        """Nothing besides the clock (which the trial sets as the fault strikes)."""


class Skewed(MemberFault):
    """Another member fault struck while some clocks run at another rate: `INNER@leader:R` (the victim, the
    leader of the role struck, at rate R) or `INNER@others:R` (every other member at R), from the strike until
    the heal. One class per name (`skewed`), so the kind, like every other, holds no state; they are not in the
    registry (`FAULTS` lists the kinds, not every rate)."""

    fakes_clock = True
    inner: ClassVar[MemberFault]
    who: ClassVar[str]
    rate: ClassVar[float]

    def clocks(self, victim: str, others: Sequence[str]) -> Mapping[str, float]:
        return {victim: self.rate} if self.who == "leader" else {m: self.rate for m in others}

    def inject(self, placement: Placement, victim: Signalled) -> None:
        self.inner.inject(placement, victim)

    def heal(self, placement: Placement, member: Signalled) -> None:
        self.inner.heal(placement, member)


_SKEWED = re.compile(r"(?P<inner>[a-z-]+)@(?P<who>leader|others):(?P<rate>\d+(\.\d+)?)")
_MADE: dict[str, type[Skewed]] = {}


def skewed(name: str) -> type[Skewed] | None:
    """The kind a name such as `pause@leader:0.8` means (made on first use), or None for a name of another
    form. ConfigError for such a name that cannot be struck."""
    if name in _MADE:
        return _MADE[name]
    match = _SKEWED.fullmatch(name)
    if match is None:
        return None
    inner_kind = REGISTRY.get(match["inner"])
    if inner_kind is None or not issubclass(inner_kind, MemberFault) or issubclass(inner_kind, (Skewed, Drift)):
        raise ConfigError(f"{name!r}: {match['inner']!r} is not a fault to a member", parameter="faults")
    if inner_kind.kills_process:
        raise ConfigError(f"{name!r}: a killed process has no clock left to skew", parameter="faults")
    rate = float(match["rate"])
    if not 0.05 <= rate <= 20:
        raise ConfigError(f"{name!r}: a clock rate from 0.05 to 20, please", parameter="faults")
    attrs = {"inner": inner_kind(), "who": match["who"], "rate": rate,
             "fails_over": inner_kind.fails_over, "healed_as": inner_kind.healed_as,
             "needs_hosts": inner_kind.needs_hosts, "removes_victim": inner_kind.removes_victim,
             "__doc__": f"{inner_kind.__name__} with the {match['who']}'s clock at {rate:g} of real time."}
    made = type(f"Skewed{len(_MADE)}", (Skewed,), attrs)  # no `name` in its body: not registered
    assert issubclass(made, Skewed)
    made.name = name
    _MADE[name] = made
    return made
