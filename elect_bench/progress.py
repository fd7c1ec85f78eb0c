"""The two ways a long run reports how it goes, named once for every kind of run."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, int, int, str], None]
"""How far a run of many cells is: (cell, done, total, status). A suite, the envelope, the idle cost, the
simulations; `elect bench` draws it as the progress line."""

Status = Callable[[str], None]
"""What one trial, rollout or soak is doing now, as one short line."""
