"""The fault kinds the harness injects, one class each (docs/architecture.md, Faults).

Names are looked up only where a user writes them (CLI flags, scenario YAML) with `fault(name)`; everywhere
else code holds `Fault` objects and asks them. A history's fault *records*
(`elect_bench.judging.history.FaultRecord`) keep the name as `kind`, so questions about a record are answered here
too, by that name.
"""

from __future__ import annotations

from elect.errors import ConfigError
from elect_bench.faults import clock, infrastructure, lifecycle, member, steady  # noqa: F401 (each kind registers when defined)
from elect_bench.faults.base import REGISTRY, Fault, InfraFault, MemberFault
from elect_bench.faults.lifecycle import KILLING_STEPS, LifecycleFault
from elect_bench.faults.membership import Add, MembershipFault, Remove, Replace

__all__ = ["FAULTS", "MEMBERSHIP", "Fault", "InfraFault", "LifecycleFault", "MemberFault", "MembershipFault", "fault",
           "kills_process", "known"]

#: Every fault kind by the name users write: single faults first, then the rollouts (the order of `--help` and
#: of an unknown name's error).
FAULTS: dict[str, type[Fault]] = dict(sorted(REGISTRY.items(), key=lambda kind: issubclass(kind[1], LifecycleFault)))
#: ... and the membership changes only a soak (`elect soak raft`) and the simulator carry out.
MEMBERSHIP: dict[str, type[Fault]] = {k.name: k for k in (Add, Remove, Replace)}


def fault(name: str) -> Fault:
    """The fault a user named (a kind, or a member fault under skewed clocks: `pause@leader:0.8`); ConfigError,
    listing the names, for an unknown one."""
    kind = known(name.strip())
    if kind is None:
        raise ConfigError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}, or KIND@leader:RATE / "
                          "KIND@others:RATE (that member fault under clocks at RATE); `elect soak raft` also takes "
                          f"{', '.join(MEMBERSHIP)}", parameter="faults")
    return kind()


def known(kind: str) -> type[Fault] | None:
    """The fault kind of that name (a record's `kind`), if it is one (not a healing, or unknown)."""
    return FAULTS.get(kind) or MEMBERSHIP.get(kind) or clock.skewed(kind)


def kills_process(kind: str) -> bool:
    """Whether a record of `kind` (a fault's name, its healing's, or a rollout's step) means the harness killed its
    target (a dead process believes nothing after it)."""
    found = known(kind)
    return (found is not None and found.kills_process) or kind in KILLING_STEPS
