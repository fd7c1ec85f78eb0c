"""Faults to one member: crash, graceful stop, freeze, crash and restart, and faults to its network link
(a cut, one-way cuts, loss, a slow link)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

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


class LinkFault(MemberFault):
    """A fault to the member's network link for the hold; the heal undoes every network fault to its host."""

    needs_hosts = True
    healed_as = "heal"

    def heal(self, placement: Placement, member: Signalled) -> None:
        placement.heal(member.member_id)


class Cut(LinkFault):
    """The member's host loses its link for the hold: alive, but nobody hears it."""

    name = "cut"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.cut(victim.member_id)


class CutIn(LinkFault):
    """One-way cut: the member is heard by its peers and the infrastructure, but hears nobody (what reaches its
    host is dropped).

    TCP needs packets both ways, so an established connection stalls in both directions at the transport
    level (what it sends is never acknowledged): that is what such a network does to TCP. Only a datagram
    protocol shows the one-wayness to the member."""

    name = "cut-in"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.block(victim.member_id, "in")


class CutOut(LinkFault):
    """One-way cut, the other way: the member hears its peers and the infrastructure, but what it sends is
    dropped. Over TCP this too stalls both directions (nothing it sends, acknowledgements included, gets
    out); a UDP send fails at once with EPERM (the drop is on its own host)."""

    name = "cut-out"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.block(victim.member_id, "out")


class Lossy(LinkFault):
    """Each packet the member sends or receives is dropped with `probability`: a bad link, not a dead one, so
    heartbeats and renewals mostly get through and the question is whether leadership flaps."""

    name = "lossy"
    fails_over = False
    probability: ClassVar[float] = 0.3

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.lossy(victim.member_id, self.probability)


class Slow(LinkFault):
    """A low-bandwidth link both ways (token bucket, `elect_cluster.netns.SLOW`: 64 kbit/s, bounded queue).

    Latency injection (netem) is unavailable on this kernel, so this is not a fixed delay: a packet waits
    behind what is queued on its way, from nothing up to the queue's bound, and one that would wait longer
    is dropped. Little traffic sees little delay; bursts (a batch of heartbeats, a snapshot) see a lot."""

    name = "slow"
    fails_over = False

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.slow(victim.member_id)


class Restart(MemberFault):
    """SIGKILL, then after the hold the member is started again: a new process, same URL, id and roles, and so
    the same state on disk (a Raft member's term and vote). The first life's beliefs end at the kill; the
    second one has to win its roles anew."""

    name = "restart"
    kills_process = True
    healed_as = "restarted"

    def inject(self, placement: Placement, victim: Signalled) -> None:
        placement.kill(victim)

    def heal(self, placement: Placement, member: Signalled) -> None:
        placement.restart(member)  # a no-op for a member that runs (every member is healed before the stop)
