"""Faults to the infrastructure: one member of the store (its leader) or the broker, killed or frozen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elect_bench.faults.base import InfraFault

if TYPE_CHECKING:
    from elect_bench.infrastructure import InfraFaults, Victim


class InfraKill(InfraFault):
    """SIGKILL, then a restart with the same ports and data after the hold."""

    name = "infra"
    healed_as = "restarted"

    def inject(self, infra: InfraFaults, service: str) -> Victim:
        return infra.kill(service)

    def heal(self, infra: InfraFaults, victim: Victim, timeout: float) -> None:
        infra.restart(victim, timeout=timeout)


class InfraPause(InfraFault):
    """Frozen for the hold (SIGSTOP / container pause), state intact, then let go on."""

    name = "infra-pause"
    healed_as = "resume"

    def inject(self, infra: InfraFaults, service: str) -> Victim:
        return infra.pause(service)

    def heal(self, infra: InfraFaults, victim: Victim, timeout: float) -> None:
        infra.resume(victim)
