"""What every fault kind is: a name, how it is injected and healed, and what the measures may expect of it.

A kind registers itself by being defined (`Fault.__init_subclass__`), so adding one is one class in one
module of this package: the trial, the measures and the reports ask the fault, never its name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from elect_bench.infrastructure import InfraFaults, Victim
    from elect_bench.placement import Placement, Signalled

#: Every fault kind by name, filled as the kinds are defined.
REGISTRY: dict[str, type[Fault]] = {}


class Fault(ABC):
    """One kind of fault. Kinds hold no state, so two faults of one kind are equal."""

    name: ClassVar[str]
    #: the trial strikes (False only for steady-state runs): there is a victim, a failover, an "after"
    injects: ClassVar[bool] = True
    #: the victim's process dies at the fault, so its belief in any leadership ends there
    kills_process: ClassVar[bool] = False
    #: the victim does not come back before the trial ends: the distribution afterwards counts the others only
    removes_victim: ClassVar[bool] = False
    #: it strikes the infrastructure, not a member: measured as disruption (roles that lost their leader and
    #: how long until each was led again) rather than as failover from a victim
    infrastructure: ClassVar[bool] = False
    #: members must run on network-namespace hosts for it
    needs_hosts: ClassVar[bool] = False
    #: the victim's roles are expected to move: the trial waits (up to its bound) for survivors to take them.
    #: False: the victim may well keep them (a lossy or slow link), so the fault lasts exactly the hold and
    #: whether leadership moved at all is the finding
    fails_over: ClassVar[bool] = True
    #: it unfolds over many seconds (a member joins, then leaves): measured per handover, from the moment each
    #: role lost its leader until it was led again, not from the strike (which would count the wait for a
    #: newcomer to start as a gap)
    gradual: ClassVar[bool] = False
    #: the kind of the record written when the fault is healed after the hold; None: it is never healed
    healed_as: ClassVar[str | None] = None
    #: the members run under clocks the harness can change (`elect_bench.fakeclock`, `MemberFault.clocks`)
    fakes_clock: ClassVar[bool] = False

    def __init_subclass__(cls, register: bool = True) -> None:
        super().__init_subclass__()
        if "name" in cls.__dict__ and register:  # `register=False`: a kind only some runners carry out
            REGISTRY[cls.name] = cls
        # a record's kind must say alone whether it is a fault or a healing (the measures and the soak ask)
        healings = {kind.healed_as for kind in REGISTRY.values() if kind.healed_as is not None}
        if clash := healings & set(REGISTRY):
            raise TypeError(f"fault kind(s) {sorted(clash)} are also the record of another kind's healing")

    @property
    def measured_as_disruption(self) -> bool:
        """Measured by the roles that lost their leader and how long until each was led again (a fault to the
        infrastructure, or a bad link that need not move anything) rather than as failover from a victim."""
        return self.infrastructure or not self.fails_over

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


class MemberFault(Fault):
    """A fault to one member process (the trial picks the victim: the member leading role 0)."""

    def clocks(self, victim: str, others: Sequence[str]) -> Mapping[str, float]:
        """The members whose clocks run at another rate from the strike until the heal, and at what rate of real
        time (most kinds: none)."""
        return {}

    @abstractmethod
    def inject(self, placement: Placement, victim: Signalled) -> None:
        """Strike the victim where it runs."""

    def heal(self, placement: Placement, member: Signalled) -> None:
        """Undo the fault (after the hold; and on every member before they are stopped): nothing to undo here."""


class InfraFault(Fault):
    """A fault to one member of a service the method uses (the service's leader, or its only member)."""

    infrastructure = True
    healed_as: ClassVar[str]  # every infrastructure fault ends: the service is whole again

    @abstractmethod
    def inject(self, infra: InfraFaults, service: str) -> Victim:
        """Strike the service; say which of its members."""

    @abstractmethod
    def heal(self, infra: InfraFaults, victim: Victim, timeout: float) -> None:
        """Bring the struck member back after the hold."""
