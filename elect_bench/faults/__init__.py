"""The fault kinds the harness injects, one class each (docs/architecture.md, Faults).

Names are looked up only where a user writes them (CLI flags, scenario YAML) with `fault(name)`; everywhere
else code holds `Fault` objects and asks them. A history's fault *records* (`elect_bench.history.FaultRecord`) keep
the name as `kind`, so questions about a record are answered here too, by that name.
"""

from __future__ import annotations

from elect.errors import ConfigError
from elect_bench.faults import clock, infrastructure, member, steady  # noqa: F401 (each kind registers when defined)
from elect_bench.faults.base import REGISTRY, Fault, InfraFault, MemberFault

__all__ = ["FAULTS", "Fault", "InfraFault", "MemberFault", "fault", "kills_process", "known"]

#: Every fault kind by the name users write.
FAULTS: dict[str, type[Fault]] = REGISTRY


def fault(name: str) -> Fault:
    """The fault a user named (a kind, or a member fault under skewed clocks: `pause@leader:0.8`); ConfigError,
    listing the names, for an unknown one."""
    kind = known(name.strip())
    if kind is None:
        raise ConfigError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}, or KIND@leader:RATE / "
                          "KIND@others:RATE (that member fault under clocks at RATE)", parameter="faults")
    return kind()


def known(kind: str) -> type[Fault] | None:
    """The fault kind of that name (a record's `kind`), if it is one (not a healing, or unknown)."""
    return FAULTS.get(kind) or clock.skewed(kind)


def kills_process(kind: str) -> bool:
    """Whether a record of `kind` (a fault's name, or its healing's) means the harness killed its target (a dead
    process believes nothing after it)."""
    found = known(kind)
    return found is not None and found.kills_process
