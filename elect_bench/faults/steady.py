"""No fault: a steady-state run (cold start distribution, load)."""

from __future__ import annotations

from elect_bench.faults.base import Fault


class NoFault(Fault):
    """Nothing is struck: the trial ends after steady state."""

    name = "none"
    injects = False
