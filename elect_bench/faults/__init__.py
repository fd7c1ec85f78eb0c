"""The fault kinds the harness injects, one class each (docs/architecture.md, Faults).

Names are looked up only where a user writes them (CLI flags, scenario YAML) with `fault(name)`; everywhere
else code holds `Fault` objects and asks them. A history's fault *records* (`elect_bench.history.FaultRecord`) keep
the name as `kind`, so questions about a record are answered here too, by that name.
"""

from __future__ import annotations

from elect.errors import ConfigError
from elect_bench.faults import infrastructure, member, steady  # noqa: F401 (each kind registers as it is defined)
from elect_bench.faults.base import REGISTRY, Fault, InfraFault, MemberFault

__all__ = ["FAULTS", "Fault", "InfraFault", "MemberFault", "fault", "kills_process"]

#: Every fault kind by the name users write.
FAULTS: dict[str, type[Fault]] = REGISTRY


def fault(name: str) -> Fault:
    """The fault a user named; ConfigError, listing the names, for an unknown one."""
    try:
        return FAULTS[name.strip()]()
    except KeyError:
        raise ConfigError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}", parameter="faults") from None


def kills_process(kind: str) -> bool:
    """Whether a record of `kind` (a fault's name, or its healing's) means the harness killed its target (a dead
    process believes nothing after it)."""
    found = FAULTS.get(kind)
    return found is not None and found.kills_process
