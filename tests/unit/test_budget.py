"""The handover budget both cores use to rate-limit rebalancing (elect.budget)."""

from __future__ import annotations

import math

import pytest

from elect.budget import HandoverBudget


def test_no_limit_always_allows() -> None:
    b = HandoverBudget(None, 1.0)
    for t in range(100):
        b.spend(t * 0.001)
    assert b.left(0.1) == math.inf and b.next_free(0.1) == 0.1


def test_at_most_limit_in_any_window() -> None:
    b = HandoverBudget(2, 10.0)
    assert b.left(0.0) == 2
    b.spend(0.0)
    b.spend(1.0)
    assert b.left(5.0) == 0 and b.next_free(5.0) == 10.0
    assert b.left(10.0) == 1  # the first one has left the window
    b.spend(10.0)
    assert b.left(10.5) == 0 and b.next_free(10.5) == 11.0


@pytest.mark.parametrize(("limit", "window"), [(0, 1.0), (1, 0.0)])
def test_bad_settings_are_refused(limit: int, window: float) -> None:
    with pytest.raises(ValueError):
        HandoverBudget(limit, window)
