from __future__ import annotations

import json

import pytest

from elect.events import Acquired, Fenced, Revoked, parse_line
from elect.roles import normalize_roles, parse_role, partition_of, roles_of_partition


def test_numbered_roles_map_by_j_mod_m() -> None:
    assert [partition_of(j, 4) for j in range(9)] == [0, 1, 2, 3, 0, 1, 2, 3, 0]


def test_named_roles_map_stably_and_spread() -> None:
    # A fixed value: the mapping must be identical in every process and release.
    assert partition_of("prices.EURUSD", 1000) == partition_of("prices.EURUSD", 1000)
    counts = [0] * 8
    for i in range(8000):
        counts[partition_of(f"role-{i}", 8)] += 1
    assert min(counts) > 800
    assert roles_of_partition(["a", 1, 5], 1, 4) == [1, 5]


def test_role_parsing_and_normalizing() -> None:
    assert parse_role("12") == 12 and parse_role("x.y") == "x.y"
    assert normalize_roles(["a", "a", 1]) == ("a", 1) and normalize_roles("solo") == ("solo",)
    for bad in ([True], [-1], [""], [1.5]):
        with pytest.raises((TypeError, ValueError)):
            normalize_roles(bad)  # type: ignore[arg-type]


def test_event_lines_have_the_fixed_format() -> None:
    line = json.loads(Acquired(role=3, member="a", token=7, mono=1.5, ts=100.0).to_line())
    assert line == {"ts": 100.0, "mono": 1.5, "member": "a", "role": "3", "event": "acquired", "token": 7}
    fenced = json.loads(Fenced(role="r", member="a", token=7, mono=2.0, ts=1.0, until=1.2).to_line())
    assert fenced["event"] == "fenced" and fenced["until"] == 1.2
    assert parse_line(Revoked(role="r", member="a", token=1).to_line())["event"] == "revoked"


@pytest.mark.parametrize("bad", ["nope", "[]", '{"ts": 1}',
                                 '{"ts":1,"mono":1,"member":"a","role":"r","event":"won","token":1}',
                                 '{"ts":1,"mono":1,"member":"a","role":"r","event":"fenced","token":1}'])
def test_bad_event_lines_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_line(bad)
