"""The nemesis soak: its schedule replays from the seed, and a short real soak strikes, recovers and checks."""

from __future__ import annotations

import itertools
from pathlib import Path

from elect_bench import soak
from elect_bench.faults import fault
from elect_bench.judging.history import FaultRecord as Record
from elect_bench.judging.history import History
from elect_bench.methods import METHODS
from elect_bench.scenario import Scenario
from elect_bench.suite import environment


def _first(seed: int, n: int = 50) -> list[tuple[int, str, int]]:
    kinds = tuple(fault(k) for k in ("kill", "stop", "pause", "restart"))
    return [(p.index, p.fault.name, p.role) for p in itertools.islice(soak.schedule(seed, kinds, 6), n)]


def test_the_same_seed_replays_the_schedule_and_another_does_not() -> None:
    assert _first(7) == _first(7)
    assert _first(7) != _first(8)
    assert {kind for _, kind, _ in _first(7)} == {"kill", "stop", "pause", "restart"}
    assert all(0 <= role < 6 for _, _, role in _first(7))


def test_the_schedule_deals_rounds_so_each_kind_gets_as_many_strikes() -> None:
    rounds = [_first(7, 40)[i:i + 4] for i in range(0, 40, 4)]
    assert all(sorted(kind for _, kind, _ in r) == ["kill", "pause", "restart", "stop"] for r in rounds)
    assert len({tuple(kind for _, kind, _ in r) for r in rounds}) > 1  # the order within rounds is shuffled


def test_a_short_raft_soak_strikes_recovers_and_finds_nothing_wrong(tmp_path: Path) -> None:
    kinds = (fault("kill"), fault("stop"), fault("pause"), fault("restart"))
    spec = soak.SoakSpec(METHODS["raft"], kinds, duration=180.0, seed=2, hold=1.5, rounds=1)
    scenario = Scenario(name="soak", faults=kinds, methods=("raft",))
    with environment(scenario, tmp_path) as env:
        result = soak.run(spec, env, lambda _status: None, command="test", keep_logs=tmp_path / "logs")
    assert result.error == ""
    assert sorted(s.fault for s in result.strikes) == ["kill", "pause", "restart", "stop"]  # one round: each once
    lives = {m: sum(1 for r in result.history.faults if r.target == m and r.kind in ("kill", "stop", "restart"))
             for m in ("m0", "m1", "m2")}
    started = {m: (tmp_path / "logs" / f"member-{m}.log").read_text().count(" started on ") for m in lives}
    assert all(started[m] == 1 + lives[m] for m in lives), (started, lives)  # every removed member came back
    assert all(s.failed_starts == 0 for s in result.strikes)
    assert result.violations == []
    assert all(s.unrecovered == 0 for s in result.strikes)
    assert result.writes["writes"] > 0 and result.writes["stale_writes"] == 0 and result.writes["lost_writes"] == 0
    data, report = soak.write(result, tmp_path / "out")
    assert "Seed 2" in report.read_text() and data.is_file()
    assert sorted(p.name for p in (tmp_path / "logs").glob("member-*.log")) == [f"member-m{i}.log" for i in range(3)]


def test_a_role_left_without_a_leader_by_a_member_not_struck_is_reported() -> None:
    """Strike 0 kills a; b, not struck, fences "s" at 3.0 and nobody leads it again before strike 1 at 60.0 (a
    `bound` of 30 s). "r" changes hands at the moment strike 1 comes: a handover under way, not a lost role."""
    def line(member: str, role: str, event: str, token: int, mono: float) -> dict[str, object]:
        return {"mono": mono, "member": member, "role": role, "event": event, "token": token,
                **({"until": mono} if event == "fenced" else {})}

    lines = [line("a", "r", "acquired", 1, 0.0), line("b", "s", "acquired", 1, 0.0),
             line("b", "r", "acquired", 2, 1.0), line("b", "s", "fenced", 1, 3.0),
             line("b", "r", "revoked", 2, 59.99), line("c", "r", "acquired", 3, 60.01)]
    records = [Record(0.5, "kill", "a"), Record(60.0, "stop", "c")]
    history = History(lines, records, end=70.0)
    strikes = [soak.Strike(0, "kill", "a", 0.5), soak.Strike(1, "stop", "c", 60.0)]
    soak._measure(strikes, history, records, ["r", "s"], bound=30.0)
    assert strikes[0].unrecovered == 0 and strikes[0].failover == [0.5]  # the victim's role: taken over by b
    assert strikes[0].leaderless == 1  # "s": its leader b was not struck, and it was never led again


def test_a_membership_change_is_measured_by_each_handover_not_from_the_strike() -> None:
    """A `remove` at 10.0: the leaver a hands "r" to b at once; 8 s later a newcomer j takes "r" from b, 0.02 s
    after b gave it up. The strike's gaps are those two handovers (0.01 s and 0.02 s), not the 8 s it took j to
    start and catch up."""
    lines = [{"mono": m, "member": who, "role": "r", "event": ev, "token": t}
             for m, who, ev, t in ((0.0, "a", "acquired", 1), (10.0, "a", "revoked", 1), (10.01, "b", "acquired", 2),
                                   (18.0, "b", "revoked", 2), (18.02, "j", "acquired", 3))]
    records = [Record(10.0, "remove", "a")]
    history = History(lines, records, end=30.0)
    strikes = [soak.Strike(0, "remove", "a", 10.0)]
    soak._measure(strikes, history, records, ["r"], bound=3.0)
    assert [round(x, 3) for x in strikes[0].failover] == [0.01, 0.02] and strikes[0].unrecovered == 0
