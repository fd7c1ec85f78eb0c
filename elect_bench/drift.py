"""What a run under skewed clocks found (`elect bench drift`, faults such as `pause@leader:0.8`): per method and
direction, the clock-rate ratio it states it tolerates beside the smallest ratio at which two members led one role
at once, and the violations inside the stated bound (there should be none).

The ratio is the contenders' clock rate over the leader's: a leader at 0.8 (its clock slow) is 1.25, the others at
1.25 (theirs fast) is 1.25 too; above 1 is the direction a timing argument must cover (the leader believes in its
lease longer than the others wait), below 1 the other one (it gives up early: slower failover, never overlap).
A method states `Characteristics.max_drift`: its promises hold up to a ratio of 1 + max_drift (docs/clocks.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from elect_bench.faults.clock import Skewed

if TYPE_CHECKING:
    from elect_bench.suite import RunResult


@dataclass(frozen=True)
class Finding:
    """One method under one direction of skew: what it states, what was run, where overlap began."""

    method: str
    direction: str  # "leader's clock slow", "others' clocks fast" (or the other way)
    stated: float | None  # the tolerated ratio, 1 + max_drift (None: no bound stated)
    ratios: tuple[float, ...]  # the ratios run, ascending
    first_overlap: float | None  # the smallest ratio with any overlap in any trial (None: none overlapped)
    inside_violations: int  # violations in trials at ratios the method tolerates
    trials: int


def ratio(kind: Skewed) -> float:
    """The contenders' clock rate over the leader's under this fault."""
    return 1 / kind.rate if kind.who == "leader" else kind.rate


def findings(result: RunResult) -> list[Finding]:
    """Per method and direction (the leader's clock changed, or the others'), in the order the run had them."""
    groups: dict[tuple[str, str], list[tuple[float, int, bool, int]]] = {}
    stated: dict[str, float | None] = {}
    for cell in result.cells:
        if not isinstance(cell.fault, Skewed):
            continue
        ok = [t for t in cell.trials if t.ok]
        if ok:
            stated[cell.method.name] = ok[0].max_drift
        pace = "slow" if cell.fault.rate < 1 else "fast"
        direction = f"leader's clock {pace}" if cell.fault.who == "leader" else f"others' clocks {pace}"
        groups.setdefault((cell.method.name, direction), []).append(
            (ratio(cell.fault), sum(len(t.violations) for t in ok), any(t.overlap > 0 for t in ok), len(ok)))
    out = []
    for (method, direction), runs in groups.items():
        drift = stated.get(method)
        bound = None if drift is None else 1 + drift
        runs.sort()
        inside = sum(v for r, v, _, _ in runs if bound is not None and r <= bound + 1e-9)
        first = next((r for r, _, overlapped, _ in runs if overlapped), None)
        out.append(Finding(method, direction, bound, tuple(r for r, *_ in runs), first, inside,
                           sum(n for *_, n in runs)))
    return out


def table(result: RunResult) -> list[str]:
    """The findings as a Markdown table with what it means, or nothing for a run without skewed clocks."""
    found = findings(result)
    if not found:
        return []

    def ratio_text(value: float | None) -> str:
        return "-" if value is None else "inf" if math.isinf(value) else f"{value:.3g}"

    lines = ["## Clock rates", "",
             "The ratio is the contenders' clock rate over the leader's (a leader at 0.8 of real time: 1.25). "
             "*Stated*: the ratio the method says it tolerates, 1 + `max_drift` from its settings (docs/clocks.md); "
             "*first overlap*: the smallest ratio run at which two members led one role at once in any trial; "
             "*violations inside*: the checker's findings at ratios up to the stated one (should be 0).", "",
             "| method | clocks changed | stated | ratios run | first overlap | violations inside | trials |",
             "|---|---|---|---|---|---|---|"]
    for f in found:
        lines.append(f"| {f.method} | {f.direction} | {ratio_text(f.stated)} | "
                     f"{', '.join(f'{r:.3g}' for r in f.ratios)} | {ratio_text(f.first_overlap)} | "
                     f"{f.inside_violations} | {f.trials} |")
    return [*lines, ""]
