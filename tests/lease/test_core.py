"""The lease core on virtual time: safety (never two valid leaders), failover, fencing, fair sharing."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import pytest
from lease_sim import Sim, decide

from cas_lease.core import LeaseCore, Timing
from cas_lease.model import (
    Create,
    Delete,
    Done,
    Expire,
    Holder,
    MemberRecord,
    MemberSeen,
    Observation,
    Renew,
    RoleSeen,
    Snapshot,
    StoreAction,
    Take,
)
from elect.core import Acquire, Fence
from elect.errors import ConfigError
from elect.roles import Role

ETCD = Timing(ttl=1.0, renew_interval=0.25, renew_deadline=0.75, fair_delay=0.25, resign_backoff=1.0,
              retry_interval=0.05, silence_takeover=True, keepalive_interval=0.66)
ZK = Timing(ttl=1.0, renew_interval=0.25, renew_deadline=0.75, fair_delay=0.25, resign_backoff=1.0,
            retry_interval=0.05, silence_takeover=False, ttl_name="session_timeout")
ROLES = [f"r{i}" for i in range(6)]


def leaders(sim: Sim, role: Role) -> list[str]:
    return [m.name for m in sim.members.values() if role in m.leading and m.alive]


def counts(sim: Sim) -> dict[str, int]:
    return {m.name: len(m.leading) for m in sim.members.values() if m.alive}


def acquired_at(sim: Sim, name: str, role: Role, after: float = 0.0) -> float:
    return min(e.t for e in sim.members[name].events if e.kind == "acquired" and e.role == role and e.t >= after)


# ---------------------------------------------------------------------------------------------- timing rules
@pytest.mark.parametrize(("interval", "deadline", "ttl", "parameter"), [
    (0.5, 0.4, 1.0, "renew_deadline"),   # interval >= deadline
    (0.25, 1.0, 1.0, "renew_deadline"),  # deadline >= ttl
    (0.0, 0.5, 1.0, "renew_interval"),
])
def test_timing_rules_name_the_parameter(interval: float, deadline: float, ttl: float, parameter: str) -> None:
    with pytest.raises(ConfigError) as info:
        Timing(ttl=ttl, renew_interval=interval, renew_deadline=deadline)
    assert info.value.parameter == parameter


def test_zookeeper_timing_names_session_timeout() -> None:
    with pytest.raises(ConfigError, match="session_timeout"):
        Timing(ttl=1.0, renew_interval=0.25, renew_deadline=1.5, ttl_name="session_timeout")


# ---------------------------------------------------------------------------------------------- the state machine
def test_no_leadership_before_a_renewal_succeeded() -> None:
    core = LeaseCore("a", "s1", ETCD, ["x"], now=0.0)
    out = decide(core, 0.0)
    assert Renew() in out and not any(isinstance(o, (Create, Acquire)) for o in out)
    core.step(Done(Renew(), True, 0.0), 0.01)
    out = decide(core, 0.01)
    assert Create("x") in out
    core.step(RoleSeen("x", Holder("s1", "a", 7), 7), 0.02)
    core.step(Done(Create("x"), True, 0.01), 0.02)
    (acquire,) = [o for o in decide(core, 0.02) if isinstance(o, Acquire)]
    # the deadline counts from when the last successful renewal was *sent*
    assert acquire == Acquire("x", 7, 0.0 + ETCD.renew_deadline, shared=True)


def test_older_observations_are_ignored() -> None:
    core = LeaseCore("a", "s1", ETCD, ["x"], now=0.0)
    core.step(RoleSeen("x", Holder("s2", "b", 10), 10), 0.0)
    core.step(RoleSeen("x", None, 5), 0.0)  # stale: from before revision 10
    core.step(Done(Renew(), True, 0.0), 0.0)
    assert Create("x") not in decide(core, 0.0)
    core.step(Snapshot({}, {}, 11), 0.0)  # newer: the key is gone
    assert Create("x") in decide(core, 0.0)


def test_a_renewal_that_does_not_show_our_key_fences_at_once() -> None:
    core = LeaseCore("a", "s1", ETCD, ["x"], now=0.0)
    core.step(Done(Renew(), True, 0.0), 0.0)
    decide(core, 0.0)
    core.step(RoleSeen("x", Holder("s1", "a", 3), 3), 0.0)
    core.step(Done(Create("x"), True, 0.0), 0.0)
    assert any(isinstance(o, Acquire) for o in decide(core, 0.0))
    core.step(Snapshot({"x": Holder("s2", "b", 9)}, {}, 9), 0.3)
    core.step(Done(Renew(), True, 0.25), 0.3)
    assert Fence("x", 0.3) in decide(core, 0.3)


def test_suspended_fences_every_role_now() -> None:
    core = LeaseCore("a", "s1", ZK, ["x", "y"], now=0.0)
    core.step(Done(Renew(), True, 0.0), 0.0)
    for role, token in (("x", 4), ("y", 6)):
        decide(core, 0.0)
        core.step(RoleSeen(role, Holder("s1", "a", token), 2 * token), 0.0)
        core.step(Done(Create(role), True, 0.0), 0.0)
    decide(core, 0.0)
    assert set(core.leading()) == {"x", "y"}
    core.suspended(0.4)
    out = decide(core, 0.4)
    assert {o for o in out if isinstance(o, Fence)} == {Fence("x", 0.4), Fence("y", 0.4)}
    # back on the same session, with the nodes still ours: lead again only after a renewal
    assert not any(isinstance(o, Acquire) for o in decide(core, 0.5))
    core.step(Done(Renew(), True, 0.6), 0.61)
    assert {o.role for o in decide(core, 0.61) if isinstance(o, Acquire)} == {"x", "y"}


def test_a_silent_holder_is_taken_over_only_after_ttl_on_our_own_clock() -> None:
    core = LeaseCore("b", "s2", ETCD, ["x"], now=0.0)
    core.step(MemberSeen("s1", MemberRecord("a", frozenset({"x"})), 5, 5), 0.0)
    core.step(RoleSeen("x", Holder("s1", "a", 6), 6), 0.0)
    core.step(Done(Renew(), True, 0.85), 0.85)
    assert not [o for o in decide(core, 0.9) if isinstance(o, Take | Expire)]
    core.step(MemberSeen("s1", MemberRecord("a", frozenset({"x"})), 8, 8), 0.9)  # a renewal of a
    core.step(Done(Renew(), True, 0.9), 0.9)
    assert not [o for o in decide(core, 1.5) if isinstance(o, Take | Expire)]
    core.step(Done(Renew(), True, 1.85), 1.85)
    taken = [o for o in decide(core, 1.9) if isinstance(o, Take | Expire)]
    # the only contender takes it over in one write, guarded by the holder's token and the version last seen
    assert taken == [Take("x", Holder("s1", "a", 6), 8)]
    core.step(RoleSeen("x", Holder("s2", "b", 9), 9), 1.92)
    core.step(Done(taken[0], True, 1.9), 1.92)
    assert [o for o in decide(core, 1.92) if isinstance(o, Acquire)] == [Acquire("x", 9, 1.85 + ETCD.renew_deadline,
                                                                                 shared=True)]


def test_a_silent_holders_record_deleted_is_timed_from_its_last_version_only_when_watched() -> None:
    """Another contender's fence deletes a silent holder's member record just before this one's timer runs out. A
    deletion the watch reports follows every version before it, so the holder's silence runs on from the last one
    seen, and this member takes over when its own timer runs out (the lifecycle-60 run's kubernetes rolling kill: half
    of a dead member's roles waited one TTL more, 2.2 s). An absence found by a read or a listing may hide renewals
    missed before it, and is timed anew, one TTL from its sight."""
    def takeover_at(deleted_at: float | None, *, in_order: bool) -> float:
        core = LeaseCore("b", "s2", ETCD, ["x"], now=0.0)
        core.step(MemberSeen("s1", MemberRecord("a", frozenset({"x"})), 5, 5), 0.0)
        core.step(RoleSeen("x", Holder("s1", "a", 6), 6), 0.0)
        for step in range(1, 60):
            t = step * 0.05
            core.step(Done(Renew(), True, t), t)
            if deleted_at is not None and math.isclose(t, deleted_at):
                core.step(MemberSeen("s1", None, 0, 9, in_order=in_order), t)
            if [o for o in decide(core, t) if isinstance(o, Take | Expire)]:
                return t
        return math.inf

    assert takeover_at(None, in_order=True) == pytest.approx(1.0)
    assert takeover_at(0.95, in_order=True) == pytest.approx(1.0)
    assert takeover_at(0.95, in_order=False) == pytest.approx(1.95)


def test_a_watched_deletion_keeps_the_silence_the_record_declared() -> None:
    """A client-go holder declares a longer silence (its lease duration) than the TTL: a watched deletion of its
    entry keeps it, so the holder is still given its own duration."""
    core = LeaseCore("b", "s2", ETCD, ["x"], now=0.0)
    core.step(MemberSeen("s1", MemberRecord("a", frozenset({"x"}), silence=2.0), 5, 5), 0.0)
    core.step(RoleSeen("x", Holder("s1", "a", 6), 6), 0.0)
    core.step(MemberSeen("s1", None, 0, 9, in_order=True), 0.5)
    for t in (0.5, 1.0, 1.5, 1.95):
        core.step(Done(Renew(), True, t), t)
        assert not [o for o in decide(core, t) if isinstance(o, Take | Expire)], t
    core.step(Done(Renew(), True, 2.0), 2.0)
    assert [o for o in decide(core, 2.0) if isinstance(o, Take | Expire)]


def test_a_silent_holders_roles_planned_for_another_member_are_freed_only_if_it_does_not_take_them() -> None:
    """Of a dead member's roles, each contender takes over the ones planned for it; a role planned for another
    live member is left to it for `fair_delay`, then freed (an expiry, not a takeover: the planned member may
    still create it)."""
    c = LeaseCore("c", "s3", ETCD, ["x", "y", "z", "w"], now=0.0)
    for session, name, version in (("s1", "a", 5), ("s2", "b", 6)):
        c.step(MemberSeen(session, MemberRecord(name, frozenset({"x", "y", "z", "w"})), version, version), 0.0)
    for i, role in enumerate(("x", "y", "z", "w")):
        c.step(RoleSeen(role, Holder("s1", "a", 10 + i), 10 + i), 0.0)
    for t in (0.5, 1.0, 1.1):
        c.step(MemberSeen("s2", MemberRecord("b", frozenset({"x", "y", "z", "w"})), int(t * 100), int(t * 100)), t)
        c.step(Done(Renew(), True, t), t)
    out = decide(c, 1.1)  # a silent for ttl: c takes its planned share over, b's part waits
    taken = {o.role for o in out if isinstance(o, Take)}
    assert taken and not [o for o in out if isinstance(o, Expire)]
    c.step(Done(Renew(), True, 1.1 + ETCD.fair_delay), 1.1 + ETCD.fair_delay)
    c.step(MemberSeen("s2", MemberRecord("b", frozenset({"x", "y", "z", "w"})), 200, 200), 1.1 + ETCD.fair_delay)
    later = decide(c, 1.1 + ETCD.fair_delay)
    assert {o.role for o in later if isinstance(o, Expire)} == {"x", "y", "z", "w"} - taken


# ---------------------------------------------------------------------------------------------- worlds
@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_crashed_leader_is_replaced_after_about_the_ttl(timing: Timing) -> None:
    sim = Sim(timing, sessions=not timing.silence_takeover)
    a = sim.add("a", ["x"])
    sim.run(0.2)
    sim.add("b", ["x"])
    sim.run(0.5)
    assert leaders(sim, "x") == ["a"]
    sim.crash("a")
    crash = sim.now
    took = sim.run_until(lambda: leaders(sim, "x") == ["b"], 3.0)
    assert timing.ttl - timing.renew_interval - 0.05 <= took <= timing.ttl + 0.1, took
    fenced = [e for e in a.events if e.kind == "fenced"]
    assert fenced and fenced[0].until is not None and fenced[0].until < crash + took
    tokens = [e.token for m in sim.members.values() for e in m.events if e.kind == "acquired"]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_frozen_leader_has_stopped_by_its_own_clock_before_the_successor_starts(timing: Timing) -> None:
    sim = Sim(timing, sessions=not timing.silence_takeover)
    a = sim.add("a", ["x"])
    sim.run(0.1)
    b = sim.add("b", ["x"])
    sim.run(0.6)
    a.frozen = True
    sim.run(3.0)
    a.frozen = False
    sim.run(0.05)
    fenced = next(e for e in a.events if e.kind == "fenced")
    succeeded = acquired_at(sim, "b", "x")
    assert fenced.until is not None and fenced.until < succeeded
    assert fenced.t >= succeeded  # reported only when a woke, but dated by its deadline
    assert [e.kind for e in a.events] == ["acquired", "fenced"]
    assert leaders(sim, "x") == ["b"] and b.events[0].kind == "acquired"


def test_leader_cut_off_from_the_store_stops_before_anyone_takes_over() -> None:
    sim = Sim(ETCD)
    a = sim.add("a", ["x", "y"])
    sim.run(0.1)
    sim.add("b", ["x", "y"])
    sim.run(1.0)
    a.reachable = False
    sim.run(2.0)  # check() asserts no overlap at every step
    assert not a.leading and set(leaders(sim, "x") + leaders(sim, "y")) == {"b"}
    a.reachable = True
    sim.run(2.0)
    assert counts(sim) == {"a": 1, "b": 1}


def test_zookeeper_suspension_fences_before_the_session_expires() -> None:
    sim = Sim(ZK, sessions=True, suspend_after=0.6)
    a = sim.add("a", ["x"])
    sim.run(0.1)
    sim.add("b", ["x"])
    sim.run(0.5)
    a.reachable = False
    cut = sim.now
    sim.run(2.0)
    fenced = next(e for e in a.events if e.kind == "fenced")
    assert fenced.t - cut <= 0.61 and leaders(sim, "x") == ["b"]


def test_a_lagging_watch_alone_never_causes_a_takeover() -> None:
    """b's watch falls 5 s behind; the snapshot in each of its own renewals keeps its view fresh."""
    sim = Sim(ETCD, watch_delay=0.005)
    sim.add("a", ["x"])
    sim.run(0.1)
    b = sim.add("b", ["x"])
    sim.run(0.5)
    sim.watch_delay = 5.0
    sim.run(3.0)
    assert leaders(sim, "x") == ["a"] and not b.events


def test_a_renewal_landing_first_defeats_a_takeover() -> None:
    """b sees nothing of a's renewals, so it tries to expire a's key; the compare on a's membership
    version refuses every attempt and a keeps leading."""
    sim = Sim(ETCD)
    sim.add("a", ["x"])
    sim.run(0.1)
    b = sim.add("b", ["x"])
    sim.run(0.5)
    b.blind = True
    before = sim.store.requests
    sim.run(4.0)
    assert leaders(sim, "x") == ["a"] and not b.events
    assert sim.store.requests > before  # b did try (and failed) to take over


def test_graceful_stop_hands_every_role_over_without_waiting_for_ttl() -> None:
    sim = Sim(ETCD)
    a = sim.add("a", ROLES, revoke_delay=0.4)  # 3 handovers in a row outlast renew_deadline
    sim.run(0.1)
    b = sim.add("b", ROLES)
    sim.run(1.0)
    led = sorted(a.leading)
    assert led
    a.core.stop(sim.now)
    stopped = sim.now
    sim.run_until(lambda: a.core.finished, 5.0)
    sim.run(0.1)
    for role in led:
        revoked = next(e for e in a.events if e.kind == "revoked" and e.role == role)
        took = acquired_at(sim, "b", role, after=stopped) - revoked.t
        assert 0.4 <= took <= 0.4 + 0.05, (role, took)  # the blocking callback holds b back, no longer
    assert [e.kind for e in a.events if e.t >= stopped] == ["revoked"] * len(led)  # none lapsed meanwhile
    assert not sim.store.roles.keys() - set(b.leading)


def test_resign_hands_over_to_another_member_at_once() -> None:
    sim = Sim(ETCD)
    sim.add("a", ROLES)
    sim.run(0.1)
    sim.add("b", ROLES)
    sim.run(1.5)
    role = sorted(sim.members["a"].leading)[0]
    sim.members["a"].core.resign(role, sim.now)
    resigned = sim.now
    took = sim.run_until(lambda: leaders(sim, role) == ["b"], 2.0)
    assert took < 0.05
    assert acquired_at(sim, "b", role, after=resigned) - resigned < 0.05


def test_a_role_freed_by_its_holder_is_not_left_to_that_holder() -> None:
    """A member below its share that wants a free role gets it first (for `fair_delay`), but not the member that just
    freed it: one stopping frees its roles as it rewrites its record, and a ZooKeeper member watch may report the
    record after the freed role; seen still wanting it, the stopping member held every role it left for a quarter of
    the TTL."""
    def first_create(role: Role, freed: bool) -> float:
        a = LeaseCore("a", "s1", ETCD, [role], now=0.0)
        a.step(MemberSeen("s2", MemberRecord("b", frozenset({role})), 5, 5), 0.0)
        if freed:
            a.step(RoleSeen(role, Holder("s2", "b", 6), 6), 0.0)
            a.step(RoleSeen(role, None, 7), 0.1)
        for step in range(2, 12):
            t = step * 0.05
            a.step(Done(Renew(), True, t), t)
            a.step(MemberSeen("s2", MemberRecord("b", frozenset({role})), 5 + step * 10, 5 + step * 10), t)
            if [o for o in decide(a, t) if isinstance(o, Create)]:
                return t
        return math.inf

    role = next(r for r in (f"x{i}" for i in range(50)) if first_create(r, freed=False) > 0.3)  # one planned for b
    assert first_create(role, freed=True) == pytest.approx(0.1)


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_a_resign_whose_callbacks_outlast_the_backoff_still_leaves_the_role_to_others(timing: Timing) -> None:
    """The back-off runs from the release: a worker finishing for longer than resign_backoff must not let the
    resigner take its role straight back as it deletes the key (it won that race on ZooKeeper)."""
    sim = Sim(timing, sessions=not timing.silence_takeover)
    a = sim.add("a", ["r"], revoke_delay=1.5 * timing.resign_backoff)
    sim.run(0.1)
    sim.add("b", ["r"])
    sim.run(1.5)
    assert leaders(sim, "r") == ["a"]
    a.core.resign("r", sim.now)
    sim.run_until(lambda: leaders(sim, "r") == ["b"], 3.0)
    sim.run(2 * timing.resign_backoff)
    assert leaders(sim, "r") == ["b"]


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_fair_share_20_roles_over_4_members_joining_one_by_one(timing: Timing) -> None:
    roles = list(range(20))
    sim = Sim(timing, sessions=not timing.silence_takeover)
    for name in "abcd":
        sim.add(name, roles)
        sim.run(0.7)
    sim.run_until(lambda: sorted(counts(sim).values()) == [5, 5, 5, 5], 5.0)
    sim.run(2.0)
    assert sorted(counts(sim).values()) == [5, 5, 5, 5]  # and it stays so
    assert sum(len(m.leading) for m in sim.members.values()) == 20


def test_fair_share_after_a_crash_and_a_leave() -> None:
    roles = list(range(20))
    sim = Sim(ETCD)
    for name in "abcd":
        sim.add(name, roles)
    sim.run_until(lambda: sorted(counts(sim).values()) == [5, 5, 5, 5], 5.0)
    sim.crash("d")
    sim.run_until(lambda: sorted(counts(sim).values()) == [6, 7, 7], 3.0)
    sim.members["c"].core.stop(sim.now)
    sim.run_until(lambda: sorted(v for k, v in counts(sim).items() if k != "c") == [10, 10], 3.0)


def test_fair_off_lets_the_first_member_keep_everything() -> None:
    timing = Timing(ttl=1.0, renew_interval=0.25, renew_deadline=0.75, fair=False)
    sim = Sim(timing)
    sim.add("a", ROLES)
    sim.run(0.5)
    sim.add("b", ROLES)
    sim.run(2.0)
    assert counts(sim) == {"a": 6, "b": 0}


def test_share_is_ceil_roles_over_live_members() -> None:
    core = LeaseCore("a", "s1", ETCD, range(7), now=0.0)
    assert core.share(0.0) == 7
    for session, name in (("s2", "b"), ("s3", "c")):
        core.step(MemberSeen(session, MemberRecord(name, frozenset(range(7))), 1, 1), 0.0)
    assert core.share(0.5) == math.ceil(7 / 3)
    assert core.share(1.5) == 7  # their entries went silent for a TTL: not live


def test_a_stale_lapse_notice_does_not_end_a_newer_leadership() -> None:
    core = LeaseCore("a", "s1", ZK, ["x"], now=0.0)
    core.step(Done(Renew(), True, 0.0), 0.0)
    decide(core, 0.0)
    core.step(RoleSeen("x", Holder("s1", "a", 4), 8), 0.0)
    core.step(Done(Create("x"), True, 0.0), 0.0)
    decide(core, 0.0)
    assert Fence("x", 0.75) in decide(core, 0.8)  # its deadline passed; the elector fenced it too, at 0.8
    core.step(Done(Renew(), True, 0.85), 0.86)
    assert any(isinstance(o, Acquire) for o in decide(core, 0.86))  # the node is still ours: lead again
    core.lapsed("x", 0.9, at=0.8)  # the elector's notice of the first lapse arrives late
    assert core.leading() == {"x": 4}
    core.lapsed("x", 0.95)  # an extension the elector refused: that one counts
    assert core.leading() == {}


def test_suspension_noticed_after_the_deadline_dates_the_fence_at_the_deadline() -> None:
    """A frozen member wakes to SUSPENDED: its leadership ended at its deadline, not when it woke."""
    core = LeaseCore("a", "s1", ZK, ["x"], now=0.0)
    core.step(Done(Renew(), True, 0.0), 0.0)
    decide(core, 0.0)
    core.step(RoleSeen("x", Holder("s1", "a", 4), 8), 0.0)
    core.step(Done(Create("x"), True, 0.0), 0.0)
    decide(core, 0.0)
    core.suspended(3.0)  # woke at 3.0; the deadline was 0.75
    assert [o for o in decide(core, 3.0) if isinstance(o, Fence)] == [Fence("x", 0.75)]


# ---------------------------------------------------------------------------------------------- transfer
@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_transfer_hands_the_role_to_the_named_member_who_keeps_it(timing: Timing) -> None:
    """Of three balanced members, the named one takes the role at once (not the bystander, which fair sharing
    could have picked as well), and keeps it although that puts it above its share: balancing moves another of
    its roles instead."""
    roles = list(range(6))
    sim = Sim(timing, sessions=not timing.silence_takeover)
    for name in "abc":
        sim.add(name, roles)
    sim.run_until(lambda: sorted(counts(sim).values()) == [2, 2, 2], 5.0)
    sim.run(0.5)
    role = sorted(sim.members["a"].leading, key=str)[0]
    assert sim.members["a"].core.can_take(role, "c", sim.now)
    assert not sim.members["a"].core.can_take(role, "nobody", sim.now)
    sim.members["a"].core.transfer(role, "c", sim.now)
    began = sim.now
    took = sim.run_until(lambda: leaders(sim, role) == ["c"], 2.0)
    assert took < 0.1
    assert not [e for e in sim.members["b"].events if e.role == role and e.t >= began]
    sim.run_until(lambda: sorted(counts(sim).values()) == [2, 2, 2], 5.0)  # c shed another role, not this one
    sim.run(3 * timing.resign_backoff)
    assert leaders(sim, role) == ["c"] and sorted(counts(sim).values()) == [2, 2, 2]


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_fair_sharing_does_not_undo_a_transfer(timing: Timing) -> None:
    """`a` contends only for x, `c` for x and y: fair sharing gives each one. Moved to `c` by a transfer, x stays
    there after `a`'s back-off, although `c` is then above its share and x is the only role it could shed."""
    sim = Sim(timing, sessions=not timing.silence_takeover)
    sim.add("a", ["x"])
    sim.run(0.5)
    sim.add("c", ["x", "y"])
    sim.run_until(lambda: leaders(sim, "x") == ["a"] and leaders(sim, "y") == ["c"], 5.0)
    sim.members["a"].core.transfer("x", "c", sim.now)
    sim.run_until(lambda: leaders(sim, "x") == ["c"], 2.0)
    sim.run(3 * timing.resign_backoff)
    assert leaders(sim, "x") == ["c"]


def test_a_transfer_to_a_member_that_dies_falls_back_to_the_others() -> None:
    """The hint holds the others back only while its target is live: once the target is gone, the role is
    taken as any free role is."""
    sim = Sim(ETCD)
    for name in "abc":
        sim.add(name, ["r"])
    sim.run(1.5)
    (old,) = leaders(sim, "r")
    target, other = (n for n in "abc" if n != old)
    sim.crash(target)
    sim.members[old].core.transfer("r", target, sim.now)
    sim.run_until(lambda: leaders(sim, "r") == [other], 3 * ETCD.ttl)


def test_shedding_is_rate_limited() -> None:
    """A member leading 10 roles alone sheds to a newcomer at most rebalance_limit roles per rebalance_window."""
    timing = Timing(ttl=1.0, renew_interval=0.25, renew_deadline=0.75, fair_delay=0.25, resign_backoff=1.0,
                    retry_interval=0.05, silence_takeover=True, keepalive_interval=0.66, rebalance_limit=2,
                    rebalance_window=2.0)
    roles = list(range(10))
    sim = Sim(timing)
    sim.add("a", roles)
    sim.run(1.0)
    sim.add("b", roles)
    joined = sim.now
    took = sim.run_until(lambda: counts(sim) == {"a": 5, "b": 5}, 20.0)
    acquired = sorted(e.t - joined for e in sim.members["b"].events if e.kind == "acquired")
    assert len(acquired) == 5
    for t in acquired:  # never more than 2 in any 2 s window
        assert sum(1 for u in acquired if t <= u < t + 2.0) <= 2, acquired
    assert took >= 4.0  # 2 + 2 + 1: three windows


# ---------------------------------------------------------------------------------------------- weights and caps
@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_weights_2_1_1_share_20_roles_10_5_5(timing: Timing) -> None:
    """A member of weight 2 leads twice as many roles as each of two of weight 1, whatever the joining order."""
    roles = list(range(20))
    sim = Sim(timing, sessions=not timing.silence_takeover)
    for name, weight in (("b", 1.0), ("a", 2.0), ("c", 1.0)):
        sim.add(name, roles, weight=weight)
        sim.run(0.7)
    sim.run_until(lambda: counts(sim) == {"a": 10, "b": 5, "c": 5}, 10.0)
    sim.run(3.0)
    assert counts(sim) == {"a": 10, "b": 5, "c": 5}  # and it stays so
    assert sim.members["a"].core.share(sim.now) == 10 and sim.members["b"].core.share(sim.now) == 5


def test_weights_follow_the_live_members() -> None:
    """Shares are of the live weight: when the heavy member dies the others split its roles evenly."""
    roles = list(range(12))
    sim = Sim(ETCD)
    for name, weight in (("a", 2.0), ("b", 1.0), ("c", 1.0)):
        sim.add(name, roles, weight=weight)
    sim.run_until(lambda: counts(sim) == {"a": 6, "b": 3, "c": 3}, 10.0)
    sim.crash("a")
    sim.run_until(lambda: {k: v for k, v in counts(sim).items() if k != "a"} == {"b": 6, "c": 6}, 5.0)


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_max_roles_caps_a_member_unless_nobody_else_can_lead(timing: Timing) -> None:
    """max_roles=3 of 12 roles with three members: the capped member leads 3 (the others share the other 9),
    although it came first and took everything; once the others are gone it leads all 12 (the cap is soft), and
    when one returns it hands the excess over again."""
    roles = list(range(12))
    sim = Sim(timing, sessions=not timing.silence_takeover)
    sim.add("a", roles, max_roles=3)
    sim.run(1.0)
    assert counts(sim) == {"a": 12}
    sim.add("b", roles)
    sim.add("c", roles)
    sim.run_until(lambda: counts(sim)["a"] == 3 and sorted(counts(sim).values()) == [3, 4, 5], 10.0)
    sim.run(3.0)
    assert counts(sim)["a"] == 3 and sum(counts(sim).values()) == 12
    sim.crash("b")
    sim.crash("c")
    sim.run_until(lambda: counts(sim) == {"a": 12}, 5.0)
    sim.add("d", roles)
    sim.run_until(lambda: counts(sim) == {"a": 3, "d": 9}, 10.0)


def test_a_capped_member_keeps_the_roles_only_it_contends_for() -> None:
    """max_roles=1, and two roles nobody else wants: the member leads those two (over its cap, soft) and none of
    the roles the others can take."""
    sim = Sim(ETCD)
    sim.add("a", list(range(8)), max_roles=1)
    sim.run(1.0)
    for name in "bc":
        sim.add(name, list(range(6)))
    sim.run_until(lambda: sim.members["a"].held() == {6, 7} and sum(counts(sim).values()) == 8, 10.0)
    sim.run(3.0)
    assert sim.members["a"].held() == {6, 7}
    assert all(counts(sim)[n] <= 4 for n in "bc")  # the cap's spare (8 - 1) split by weight, rounded up


def test_shares_of_weighted_and_capped_members() -> None:
    core = LeaseCore("a", "s1", ETCD, range(12), now=0.0, weight=2.0)
    assert core.share(0.0) == 12
    core.step(MemberSeen("s2", MemberRecord("b", frozenset(range(12)), weight=1.0), 1, 1), 0.0)
    core.step(MemberSeen("s3", MemberRecord("c", frozenset(range(12)), max_roles=2), 1, 1), 0.0)
    # c is capped below its part (3): its 1 spare role goes to a and b by weight: 10 x 2/3, 10 x 1/3
    assert core.share(0.5) == math.ceil(20 / 3)
    with pytest.raises(ConfigError, match="weight"):
        LeaseCore("a", "s1", ETCD, ["x"], now=0.0, weight=0.0)
    with pytest.raises(ConfigError, match="max_roles"):
        LeaseCore("a", "s1", ETCD, ["x"], now=0.0, max_roles=0)


# ---------------------------------------------------------------------------------------------- many roles at once
def _refusals(sim: Sim) -> list[tuple[str, str, Role]]:
    """Wrap the world's store: every Create, Expire or Take it refuses (another member was first) is noted."""
    refused: list[tuple[str, str, Role]] = []
    execute = sim.store.execute

    def noting(session: str, member: str, action: StoreAction, sent: float, now: float,
               ours: Mapping[Role, int] | None = None) -> tuple[list[Observation], list[Observation]]:
        mine, theirs = execute(session, member, action, sent, now, ours)
        if isinstance(action, Create | Expire | Take):
            took = [o for o in mine if isinstance(o, RoleSeen) and o.role == action.role]
            done = took and (took[-1].holder is None if isinstance(action, Expire) else
                             took[-1].holder is not None and took[-1].holder.session == session)
            if not done:
                refused.append((member, type(action).__name__, action.role))
        return mine, theirs

    sim.store.execute = noting  # type: ignore[method-assign]
    return refused


def test_members_starting_together_split_the_roles_without_racing_for_them() -> None:
    """Three members that find 60 free roles at once each create their own part (a plan every member computes
    alike: each role to the first member in its rendezvous order that is below its share), all in one tick, and
    none asks for a role another is taking."""
    roles = list(range(60))
    sim = Sim(ETCD)
    refused = _refusals(sim)
    members = [sim.add(name, roles) for name in "abc"]
    sim.run(0.005)
    sim.run_until(lambda: sorted(counts(sim).values()) == [20, 20, 20], 2.0)
    assert refused == []
    assert all(len({e.t for e in m.events if e.kind == "acquired"}) == 1 for m in members)  # one batch each


@pytest.mark.parametrize("timing", [ETCD, ZK], ids=["etcd", "zookeeper"])
def test_a_dead_holders_roles_are_split_between_the_survivors_at_once(timing: Timing) -> None:
    """600 roles over 3 members, one crashes: the survivors take its 200 in one step each (expired and created as
    batches, not one role at a time), by the same plan, so none is expired or created twice, and each leads its
    share of 300 right away rather than after a round of shedding."""
    roles = list(range(600))
    sim = Sim(timing, sessions=not timing.silence_takeover)
    for name in "abc":
        sim.add(name, roles)
    sim.run_until(lambda: sorted(counts(sim).values()) == [200, 200, 200], 5.0)
    refused = _refusals(sim)
    sim.crash("a")
    crashed = sim.now
    took = sim.run_until(lambda: sorted(counts(sim).values()) == [300, 300], 3.0)
    assert took <= timing.ttl + 0.1, took
    assert refused == []
    for name in "bc":
        taken = {e.t for e in sim.members[name].events if e.kind == "acquired" and e.t > crashed}
        assert len(taken) == 1, (name, sorted(taken))


# ---------------------------------------------------------------------------------------------- liveness
FAST = Timing(ttl=0.1, renew_interval=0.025, renew_deadline=0.075, fair_delay=0.025, resign_backoff=0.1,
              retry_interval=0.01, silence_takeover=True, keepalive_interval=0.66)


def _renewing(core: LeaseCore, until: float, latency: Callable[[float], float]) -> list[tuple[float, object]]:
    """Drive `core` alone until `until`: each Renew answered `latency(sent)` seconds after it was asked (the
    store and the watch behind it), every other action at once; the leadership changes, timed."""
    changes: list[tuple[float, object]] = []
    now, pending = 0.0, []  # (when it lands, what)
    while now < until:
        core.tick(now)
        ready = core.ready()
        changes += [(now, c) for c in ready.changes]
        for action in ready.messages:
            pending.append((now + (latency(now) if isinstance(action, Renew) else 0.001), Done(action, True, now)))
        pending.sort(key=lambda p: p[0])
        nxt = min([core.next_wakeup(), *(p[0] for p in pending[:1]), until])
        now = max(nxt, now + 1e-4)
        while pending and pending[0][0] <= now:
            core.step(pending.pop(0)[1], now)
    return changes


def test_a_leadership_that_would_lapse_before_its_next_renewal_is_not_taken_up() -> None:
    """Issue 61: renewals that took 52 ms at ttl=0.1 (etcd's watch behind, the renewal waiting for it) each ended
    with 23 ms of their 75 ms left; the member adopted its own key, fenced it 23 ms later, adopted it again, for
    minutes. A leadership that cannot be renewed in time is not taken up: the member waits for renewals that land
    in time, and leads from then on without a fence."""
    core = LeaseCore("a", "s1", FAST, ["x"], now=0.0)
    core.step(Snapshot({"x": Holder("s1", "a", 7)}, {}, 7), 0.0)  # its own key, as after the cold start's Create
    slow_until = 1.0
    changes = _renewing(core, 2.0, lambda sent: 0.052 if sent < slow_until else 0.002)
    slow = [c for t, c in changes if t < slow_until]
    assert not [c for c in slow if isinstance(c, (Acquire, Fence))], slow[:6]
    later = [c for t, c in changes if t >= slow_until and isinstance(c, (Acquire, Fence))]
    assert later == [Acquire("x", 7, later[0].deadline, shared=True)], later  # type: ignore[union-attr]


def test_a_key_it_cannot_lead_in_time_is_handed_on_after_a_ttl() -> None:
    """Renewals that stay too slow to lead by: after a TTL of them the member deletes its key and leaves the role
    to the others for resign_backoff, so a member whose renewals land in time can lead it."""
    core = LeaseCore("a", "s1", FAST, ["x"], now=0.0)
    core.step(Snapshot({"x": Holder("s1", "a", 7)}, {}, 7), 0.0)
    deleted: list[float] = []
    now, pending = 0.0, []
    while now < 0.5 and not deleted:
        core.tick(now)
        ready = core.ready()
        assert not [c for c in ready.changes if isinstance(c, (Acquire, Fence))]
        for action in ready.messages:
            if isinstance(action, Delete):
                deleted.append(now)
            pending.append((now + (0.052 if isinstance(action, Renew) else 0.001), Done(action, True, now)))
        pending.sort(key=lambda p: p[0])
        now = max(min([core.next_wakeup(), *(p[0] for p in pending[:1]), 0.5]), now + 1e-4)
        while pending and pending[0][0] <= now:
            core.step(pending.pop(0)[1], now)
    assert deleted and FAST.ttl <= deleted[0] <= FAST.ttl + 0.1, deleted
