"""Faults to one member: crash, graceful stop, freeze, network cut."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elect_bench.faults.base import MemberFault

if TYPE_CHECKING:
    from elect_bench.placement import Placement, Signalled


class Kill(MemberFault):
    """SIGKILL: a crash; the member hands nothing over and never comes back."""

    name = "kill"
    kills_process = True
    removes_victim = True

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.kill(victim)


class Stop(MemberFault):
    """SIGTERM: an orderly stop; the member hands its roles over (Revoked) and exits."""

    name = "stop"
    removes_victim = True

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.stop(victim)


class Pause(MemberFault):
    """SIGSTOP for the hold, then SIGCONT: a frozen member wakes up believing what it believed."""

    name = "pause"
    healed_as = "resume"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.pause(victim)

    def heal(self, placement: Placement, member: Signalled) -> None:
        placement.resume(member)


class Cut(MemberFault):
    """The member's host loses its link for the hold: alive, but nobody hears it."""

    name = "cut"
    needs_hosts = True
    healed_as = "heal"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.cut(victim.member_id)

    def heal(self, placement: Placement, member: Signalled) -> None:
        placement.heal(member.member_id)
