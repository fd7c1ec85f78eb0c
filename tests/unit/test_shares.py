"""`elect.shares`: fair shares of weighted, capped members (the rule the lease cores and memory:// share)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elect.errors import ConfigError
from elect.shares import Capacity, check_capacity, refuse_capacity, shares


def test_equal_weights_without_caps_are_ceil_roles_over_members() -> None:
    for roles in range(0, 30):
        for n in range(1, 7):
            assert shares(roles, {i: Capacity() for i in range(n)}) == dict.fromkeys(range(n), math.ceil(roles / n))
            assert shares(roles, {i: Capacity(0.5) for i in range(n)}) == dict.fromkeys(range(n),
                                                                                        math.ceil(roles / n))


def test_weights_are_proportional_and_exact() -> None:
    assert shares(20, {"a": Capacity(2), "b": Capacity(1), "c": Capacity(1)}) == {"a": 10, "b": 5, "c": 5}
    assert shares(8, {"a": Capacity(3), "b": Capacity(1)}) == {"a": 6, "b": 2}
    # ten members of weight 0.1 (in floats, 10 x 0.1 / (0.1 + ... + 0.1) is not 1) over 10 roles: one each, not
    # two (a cap above the part takes the general path)
    assert shares(10, {i: Capacity(0.1) for i in range(9)} | {9: Capacity(0.1, max_roles=5)}) == \
        dict.fromkeys(range(10), 1)
    assert shares(3, {"a": Capacity(0.1), "b": Capacity(0.2)}) == {"a": 1, "b": 2}


def test_caps_below_the_part_spread_the_rest_by_weight() -> None:
    assert shares(12, {"a": Capacity(max_roles=3), "b": Capacity(), "c": Capacity()}) == {"a": 3, "b": 5, "c": 5}
    assert shares(12, {"a": Capacity(max_roles=5), "b": Capacity(), "c": Capacity()}) == {"a": 4, "b": 4, "c": 4}
    assert shares(12, {"a": Capacity(max_roles=1), "b": Capacity(2, max_roles=2), "c": Capacity()}) == \
        {"a": 1, "b": 2, "c": 9}
    # everybody capped below their part: the shares are the caps (the rest is led over the caps, soft)
    assert shares(10, {"a": Capacity(max_roles=2), "b": Capacity(max_roles=3)}) == {"a": 2, "b": 3}


@given(st.integers(0, 200), st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 3.0, 0.1]),
                                               st.none() | st.integers(1, 50)), min_size=1, max_size=8))
def test_shares_respect_caps_and_cover_the_roles(roles: int, members: list[tuple[float, int | None]]) -> None:
    """No share is above its member's cap, and the shares cover every role unless every member is at its cap."""
    got = shares(roles, {i: Capacity(w, cap) for i, (w, cap) in enumerate(members)})
    assert all(cap is None or got[i] <= cap for i, (_, cap) in enumerate(members)), got
    assert sum(got.values()) >= roles or all(cap is not None and got[i] == cap for i, (_, cap) in enumerate(members))


def test_option_rules_name_the_parameter() -> None:
    for weight, cap, parameter in ((0.0, None, "weight"), (-1.0, None, "weight"), (math.inf, None, "weight"),
                                   (math.nan, None, "weight"), (1.0, 0, "max_roles")):
        with pytest.raises(ConfigError) as info:
            check_capacity(weight, cap)
        assert info.value.parameter == parameter
    refuse_capacity("x", 1.0, None, "why")
    with pytest.raises(ConfigError, match=r"weight: x:// cannot weigh members: because"):
        refuse_capacity("x", 2.0, None, "because")
    with pytest.raises(ConfigError, match=r"max_roles: x:// cannot cap a member's roles: because"):
        refuse_capacity("x", 1.0, 3, "because")
