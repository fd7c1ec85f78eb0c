"""The anchors' adapters (bench/anchors) against real infrastructure: each prints well-formed event lines,
never two `acquired` for one role without a loss between, and hands roles over on a kill and a graceful stop,
so the harness measures the anchor's own code exactly as it measures elect's methods."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pytest

from elect_bench.members import Line, MemberProcess, leaders, led
from elect_bench.methods import METHODS, Group
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until
from raft_priority.priorities import assign_priorities

pytestmark = pytest.mark.infra

ROLES = [str(r) for r in range(4)]


def _double_acquires(lines: list[Line]) -> list[Line]:
    """`acquired` lines for a role the member already held (in the same life of the member)."""
    held: dict[tuple[str, str], bool] = {}
    bad = []
    for line in lines:
        key = (line["member"], line["role"])
        if line["event"] == "acquired":
            if held.get(key):
                bad.append(line)
            held[key] = True
        else:
            held[key] = False
    return bad


@pytest.mark.parametrize("method", ["kazoo", "etcd-election", "goneli", "jraft", "ratis", "client-go",
                                    "k8s-python"])
def test_an_anchor_prints_well_formed_lines_and_hands_roles_over(method: str, request: pytest.FixtureRequest,
                                                                 tmp_path: Path) -> None:
    chosen = METHODS[method]
    where = request.getfixturevalue("kubernetes" if "kubernetes" in chosen.needs else "infra")
    infra: Endpoints = where if isinstance(where, Endpoints) else where.endpoints
    ids = ["m0", "m1", "m2"]
    group = Group(ids, len(ROLES), f"anchor-{method}-{time.monotonic_ns() % 10**9}", infra,
                  state_dir=str(tmp_path / "state"))
    urls = chosen.member_urls(group, 1.0)
    procs = [MemberProcess(urls[i], i, list(range(len(ROLES))), log_dir=tmp_path,
                           command=chosen.launch(urls[i], i, range(len(ROLES)), sys.executable)) for i in ids]
    began = time.monotonic()
    try:
        for p in procs:
            p.start()
        wait_until(lambda: led(procs) == set(ROLES), 60.0, what=f"{method}: every role led")
        victim = leaders(procs, "0")[0]
        held = victim.log.leading()
        killed = time.monotonic()
        victim.kill()
        survivors = [p for p in procs if p is not victim]
        wait_until(lambda: led(survivors) >= held, 60.0, what=f"{method}: survivors take the killed member's roles")
        first_life = len(victim.log.lines)
        victim.restart()  # back before the graceful stop: a Raft anchor needs two of three members to elect
        wait_until(victim.started, 60.0, what=f"{method}: the killed member back")
        # a member joining may move roles again (goNELI: Kafka's eager rebalance): stop whoever leads role 0 then
        graceful = wait_until(lambda: next(iter(leaders(procs, "0")), None), 60.0,
                              what=f"{method}: a leader of role 0 with the killed member back")
        moved = graceful.log.leading()
        graceful.stop(timeout=30.0)
        assert graceful.returncode == 0, graceful.stderr_tail()
        rest = [p for p in procs if p is not graceful]
        wait_until(lambda: led(rest) >= moved, 60.0, what=f"{method}: the others take the stopped member's roles")
        second_life = len(graceful.log.lines)
        if method == "ratis":
            # the stop's transfer raised its target's priority; the adapter's new leader puts the balanced ones back
            # after 3D, so the stopped member, restarted, gets the roles it is first in priority for handed back
            own = {str(r) for r, ranks in enumerate(assign_priorities(ids, len(ROLES), len(ids)))
                   if max(ranks, key=lambda m: ranks[m]) == graceful.member_id}
            graceful.restart()
            wait_until(lambda: graceful.log.leading() >= own, 60.0,
                       what=f"{method}: the gracefully stopped member, restarted, leading {sorted(own)} again")
    finally:
        for p in procs:
            p.stop(timeout=20.0)
    lines = sorted((line for p in procs for line in p.log.lines), key=lambda line: line["mono"])
    assert all(not p.bad_lines for p in procs), [p.bad_lines for p in procs]
    restarts = {id(victim): [first_life]}
    restarts.setdefault(id(graceful), []).append(second_life)  # a no-op restart point when it was not restarted
    lives = []  # the lines of each life of each member (a restart begins a new one)
    for p in procs:
        bounds = [0, *restarts.get(id(p), []), len(p.log.lines)]
        lives += [p.log.lines[a:b] for a, b in itertools.pairwise(bounds)]
    assert [bad for life in lives for bad in _double_acquires(life)] == []  # a new life starts with nothing
    assert all(began <= line["mono"] <= time.monotonic() for line in lines)  # one monotonic clock with ours
    assert {line["role"] for line in lines if line["event"] == "acquired" and line["mono"] > killed} >= held
    ended = [line for line in graceful.log.lines if line["event"] == "revoked"]
    assert {line["role"] for line in ended} >= moved  # the graceful stop said what it gave up
