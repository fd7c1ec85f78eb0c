"""Poll a condition with a deadline: the one way this project waits for something to become true (and,
`holds_for`, checks that something stays true over a window).

Bare sleeps either waste time or flake on a loaded machine; a deadline plus a short poll interval does
neither, and a timeout message that says what was awaited (and the last error seen) is debuggable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """The condition did not hold before the deadline; ``last_error`` is the last ignored exception."""

    def __init__(self, message: str, last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.last_error = last_error


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    interval: float = 0.05,
    *,
    what: str = "condition",
    ignore: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns a truthy value and return that value.

    Return a non-empty container (e.g. ``(index,)``) when the interesting value may be falsy, like 0.

    Exceptions of the types in ``ignore`` count as "not yet" (a probe against a port that is not open
    raises); any other exception propagates at once. The predicate is always tried at least once and
    once more at the deadline, so a slow last poll is not lost.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
        except ignore as exc:
            last_error = exc
        else:
            if result:
                return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            detail = f": {last_error}" if last_error is not None else ""
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}{detail}", last_error)
        time.sleep(min(interval, remaining))


def holds_for(check: Callable[[], object], seconds: float, interval: float = 0.05, *, what: str = "invariant") -> None:
    """Check that ``check()`` stays true for ``seconds``, sampled every ``interval``: an invariant over a window
    (a member must *not* lead while another holds the role), not a wait for a condition. A false sample raises
    AssertionError naming ``what`` and how far into the window it failed; ``check`` may raise its own instead."""
    began = time.monotonic()
    end = began + seconds
    while True:
        if not check():
            raise AssertionError(f"{what} broke {time.monotonic() - began:.2f} s into a {seconds:g} s window")
        remaining = end - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(interval, remaining))
