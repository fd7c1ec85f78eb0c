"""The contract every elector must keep (docs/architecture.md), checked through members' event lines."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import pytest

from elect.errors import ConfigError, NotSupported
from elect.member_reports import DRAINED, LEADER, METRICS, TRANSFERRED, WORK
from elect.metrics import FAILOVER, LEADER_GAUGE, RENEWAL, TRANSITIONS, scrape
from elect_bench.members import Line, Member
from elect_cluster.waiting import holds_for, wait_until

from implementations import Group, Implementation

ROLES: list[str | int] = ["prices.EURUSD", "prices.USDJPY", 0, 1, 2, 3]
NAMES = [str(r) for r in ROLES]


def holders(members: Sequence[Member], role: str) -> list[str]:
    return [m.member_id for m in members if m.alive and role in m.log.leading()]


def all_started(group: Group, members: Sequence[Member], timeout: float) -> None:
    wait_until(lambda: all(group.started(m) for m in members), timeout, what="every member started")


def all_led_once(members: Sequence[Member], roles: Sequence[str], timeout: float) -> None:
    wait_until(lambda: all(holders(members, r) for r in roles), timeout, what=f"a leader for each of {roles}")


def leader_of(members: Sequence[Member], role: str, timeout: float) -> Member:
    ids = wait_until(lambda: holders(members, role), timeout, what=f"a leader of {role}")
    return next(m for m in members if m.member_id == ids[0])


def is_event(kind: str, role: str) -> Callable[[Line], bool]:
    return lambda line: line["event"] == kind and line["role"] == role


def handover(old: Member, successor: Member, role: str, marks: tuple[int, int], overlapping: bool,
             timeout: float) -> tuple[Line, Line]:
    """`old`'s revocation of `role` and `successor`'s acquisition that took it over, from the line counts `marks`
    (of old's log, of successor's) taken before `old` let go. `overlapping`: the successor already led the role
    then (a method that allows overlap); its latest acquisition before the mark took over if it is the newer one."""
    old_mark, successor_mark = marks
    revoked = old.log.wait_for(is_event("revoked", role), timeout, start=old_mark, what=f"{role} revoked")
    if overlapping:
        before = [line for line in successor.log.lines[:successor_mark] if is_event("acquired", role)(line)][-1]
        if before["token"] > revoked["token"]:
            return revoked, before
    acquired = successor.log.wait_for(is_event("acquired", role), timeout, start=successor_mark,
                                      what=f"{role} acquired by {successor.member_id}")
    return revoked, acquired


def test_lone_member_acquires_every_role(group: Group, impl: Implementation) -> None:
    m = group.start("a", ROLES)
    for role in NAMES:
        line = m.log.wait_for(is_event("acquired", role), impl.timeout, what=f"acquired {role}")
        assert line["member"] == "a" and line["token"] >= 0


def test_each_role_has_exactly_one_leader(group: Group, impl: Implementation) -> None:
    members = [group.start(name, ROLES) for name in ("a", "b", "c")]
    all_led_once(members, NAMES, impl.timeout)
    if not impl.exclusive:
        return
    # Settled: every role has one leader, and it stays one across a few observations.
    wait_until(lambda: all(len(holders(members, r)) == 1 for r in NAMES), impl.timeout,
               what="exactly one leader per role")
    for _ in range(5):
        assert all(len(holders(members, r)) <= 1 for r in NAMES), {r: holders(members, r) for r in NAMES}


def test_stop_hands_roles_over(group: Group, impl: Implementation) -> None:
    members = [group.start(name, ROLES, revoke_delay=0.3) for name in ("a", "b")]
    all_led_once(members, NAMES, impl.timeout)
    role = NAMES[0]
    old = leader_of(members, role, impl.timeout)
    survivor = next(m for m in members if m is not old)
    led = sorted(old.log.leading())
    # only lines after the stop: at start-up either may have led and handed over a role already
    old_mark, survivor_mark = len(old.log.lines), len(survivor.log.lines)
    # a method that allows overlap (NELI full) may have given the survivor a role the old member still held,
    # in a rebalance still going on when the roles were first all led: that acquisition is the handover
    overlapping = set() if impl.exclusive else survivor.log.leading() & set(led)
    old.stop()
    for r in led:
        revoked, acquired = handover(old, survivor, r, (old_mark, survivor_mark), r in overlapping, impl.timeout)
        assert acquired["token"] > revoked["token"]
        if impl.graceful:
            # the blocking Revoked callback held the successor back
            assert acquired["mono"] >= revoked["mono"] + 0.25, (revoked, acquired)


def test_resign_hands_the_role_to_another_member(group: Group, impl: Implementation) -> None:
    members = [group.start(name, ROLES) for name in ("a", "b")]
    all_led_once(members, NAMES, impl.timeout)
    role = NAMES[1]
    old = leader_of(members, role, impl.timeout)
    other = next(m for m in members if m is not old)
    marks = len(old.log.lines), len(other.log.lines)
    # as in test_stop_hands_roles_over: under NELI full the other member may already lead the role, given to it
    # by a rebalance still going on (found in CI: it led on under that older acquisition and never acquired again)
    overlapping = not impl.exclusive and role in other.log.leading()
    old.resign(role)
    revoked, acquired = handover(old, other, role, marks, overlapping, impl.timeout)
    assert acquired["token"] > revoked["token"]


def test_roles_added_and_removed_at_run_time(group: Group, impl: Implementation) -> None:
    members = [group.start(name, ["alpha"]) for name in ("a", "b")]
    all_led_once(members, ["alpha"], impl.timeout)
    for m in members:
        m.add_roles(["beta", 7])
    all_led_once(members, ["beta", "7"], impl.timeout)

    first = leader_of(members, "alpha", impl.timeout)
    second = next(m for m in members if m is not first)
    mark = len(second.log.lines)
    if impl.per_member_roles:  # one member stops contending: the other takes the role over
        first.remove_roles(["alpha"])
        first.log.wait_for(is_event("revoked", "alpha"), impl.timeout, what="revoked after remove")
        second.log.wait_for(is_event("acquired", "alpha"), impl.timeout, start=mark,
                            what="alpha taken over by the member still contending")
        second.remove_roles(["alpha"])
        second.log.wait_for(is_event("revoked", "alpha"), impl.timeout, start=mark,
                            what="revoked after the last contender removed alpha")
    else:  # the group's role set changes on every member at once
        for m in members:
            m.remove_roles(["alpha"])
        first.log.wait_for(is_event("revoked", "alpha"), impl.timeout, what="revoked after remove")
    wait_until(lambda: not holders(members, "alpha"), impl.timeout, what="nobody leading a removed role")
    all_led_once(members, ["beta", "7"], impl.timeout)


def test_tokens_strictly_increase_across_successive_leaders(group: Group, impl: Implementation) -> None:
    role = "prices.EURUSD"
    members = [group.start(name, [role]) for name in ("a", "b", "c")]
    for _ in range(4):
        leader = leader_of(members, role, impl.timeout)
        mark = sum(len(m.log.lines) for m in members)
        leader.resign(role)
        wait_until(lambda mark=mark: sum(len(m.log.lines) for m in members) >= mark + 2 and holders(members, role),
                   impl.timeout, what="the next leader after a resign")
    acquired = sorted((line for m in members for line in m.log.lines if line["event"] == "acquired"),
                      key=lambda line: line["mono"])
    tokens = [line["token"] for line in acquired]
    assert len(tokens) >= 5
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), acquired


def _check_alternation(lines: list[Line]) -> None:
    state: dict[str, int | None] = {}
    last_mono = float("-inf")
    for line in lines:
        assert line["mono"] >= last_mono, f"events out of order: {lines}"
        last_mono = line["mono"]
        role, held = line["role"], state.get(line["role"])
        if line["event"] == "acquired":
            assert held is None or line["token"] > held, f"acquired {role} twice without losing it: {lines}"
            state[role] = line["token"]
        else:
            assert held == line["token"], f"{line['event']} {role} without holding it: {lines}"
            state[role] = None
    assert not any(state.values()), f"a leadership was never ended by the graceful stop: {state}"


def test_events_arrive_in_order_and_none_is_lost(group: Group, impl: Implementation) -> None:
    members = [group.start(name, ROLES) for name in ("a", "b", "c")]
    all_led_once(members, NAMES, impl.timeout)
    for role in NAMES[:3]:
        leader_of(members, role, impl.timeout).resign(role)
    for m in members if not impl.per_member_roles else members[:1]:
        m.remove_roles([0, 1])
    for m in members if not impl.per_member_roles else members[1:2]:
        m.add_roles(["late"])
    expected = [*NAMES, "late"] if impl.per_member_roles else [n for n in NAMES if n not in ("0", "1")] + ["late"]
    all_led_once(members, expected, impl.timeout)
    members[2].stop()
    all_led_once(members, expected, impl.timeout)
    for m in members:
        m.stop()
    for m in members:
        _check_alternation(m.log.lines)


def test_a_successor_starts_only_after_the_leaders_work_returned(group: Group, impl: Implementation) -> None:
    """`run` (`elect member --work`): Revoked tells the worker to stop, and on a graceful handover the successor
    acquires only after the worker returned. Without graceful handover (kafka's full mode) the weaker promise
    holds instead: the worker is still told to stop and finishes, a grace is refused as unsupported, and the
    successor is not held back."""
    role, finish = "prices.EURUSD", 1.0
    promises = group.elector("a", [role]).characteristics
    assert promises.graceful_handover == impl.graceful
    members = [group.start(name, [role], work=finish) for name in ("a", "b")]
    all_started(group, members, impl.timeout)  # so that there is a successor to hand over to
    old = leader_of(members, role, impl.timeout)
    other = next(m for m in members if m is not old)
    token = [line for line in old.log.lines if is_event("acquired", role)(line)][-1]["token"]

    def work(state: str, of: Member, token: int) -> list[Line]:
        return [w for w in group.reports(of, WORK) if w["role"] == role and w["token"] == token and w["state"] == state]

    wait_until(lambda: work("started", old, token), impl.timeout, what=f"{old.member_id}'s worker under token {token}")
    marks = len(old.log.lines), len(other.log.lines)
    overlapping = not impl.exclusive and role in other.log.leading()
    old.resign(role)
    revoked, acquired = handover(old, other, role, marks, overlapping, impl.timeout)
    returned = wait_until(lambda: work("returned", old, revoked["token"]), impl.timeout,
                          what="the old leader's worker returning")[0]
    assert acquired["token"] > revoked["token"]
    # told to stop when the handover began, it then took its `finish` seconds
    assert returned["mono"] >= revoked["mono"] + 0.9 * finish, (revoked, returned)
    if promises.graceful_handover:
        assert acquired["mono"] >= returned["mono"], (revoked, returned, acquired)
        wait_until(lambda: work("started", other, acquired["token"]), impl.timeout,
                   what="the successor's worker under its token")
    else:
        with pytest.raises(NotSupported, match="no graceful handover"):
            group.elector("probe", [role]).run(role, lambda lead, stop: None, grace=1.0)


def test_sigterm_drains_the_member(group: Group, impl: Implementation) -> None:
    """`elect member` drains on SIGTERM: every role it led is handed over, it says how long that took, and where
    the method can see it, who took each role (the survivor) before it stopped."""
    members = [group.start(name, ROLES) for name in ("a", "b")]
    all_started(group, members, impl.timeout)  # a member that has not started yet is no successor yet
    all_led_once(members, NAMES, impl.timeout)
    old = leader_of(members, NAMES[0], impl.timeout)
    survivor = next(m for m in members if m is not old)
    mark = len(survivor.log.lines)
    began = time.monotonic()
    old.stop()
    drained = wait_until(lambda: group.reports(old, DRAINED), impl.timeout, what="the drained report")[-1]
    # what it led when the signal came (a group still rebalancing may have moved NAMES[0] meanwhile: NELI's
    # cooperative second round, Raft's returning primaries), each handed over below
    assert drained["roles"] and set(drained["roles"]) <= set(NAMES)
    assert 0 < drained["seconds"] <= time.monotonic() - began
    for role in drained["roles"]:
        if not impl.exclusive and role in survivor.log.leading():
            continue  # NELI full: the survivor was given it in a rebalance while the old member still held it
        survivor.log.wait_for(is_event("acquired", role), impl.timeout, start=mark, what=f"{role} taken over")
    if impl.sees_successors:
        assert drained["successors"] == {role: survivor.member_id for role in drained["roles"]}, drained
        assert drained["uncontended"] == [], drained
        assert drained["confirmed"] is True, drained
    else:  # documented: the method cannot see successors; drain returned after the handover
        assert drained["successors"] is None, drained
        assert drained["confirmed"] is False, drained


def test_drain_after_renewals_hands_over_what_it_led(group: Group, impl: Implementation) -> None:
    """A drain long after the leaderships began (several renewals, shared deadlines moved on many times) reports
    every role the member led, and confirms only what a successor was seen to take. Once a drain read the stored
    deadlines, not the live ones, and said it had led nothing (issue 54)."""
    members = [group.start(name, ROLES) for name in ("a", "b")]
    all_started(group, members, impl.timeout)
    all_led_once(members, NAMES, impl.timeout)
    old = leader_of(members, NAMES[0], impl.timeout)
    # three detection budgets at rest (D = 1 s for every method here) on one leadership: a dozen lease renewals, as
    # many rounds of heartbeats. Not "from now on": a role may still move while a group settles (and a member's kept
    # partitions went unread for 0.6 s after it gave others up, in 5 of about 100 runs on KIP-848, until the elector
    # woke librdkafka's fetch: `KafkaElector._wake_fetch`)
    wait_until(lambda: _led_for(old, 3.0), 3.0 + impl.timeout, what=f"{old.member_id} leading a role for 3 s")
    mark = len(old.log.lines)
    old.stop()
    drained = wait_until(lambda: group.reports(old, DRAINED), impl.timeout, what="the drained report")[-1]
    assert drained["roles"], drained

    def handed() -> set[str]:  # its event lines and its stderr are read apart: the lines may come a little later
        return {line["role"] for line in old.log.lines[mark:] if line["event"] in ("revoked", "fenced")}

    wait_until(lambda: handed() >= set(drained["roles"]), impl.timeout, what="a revoked line per drained role")
    assert set(drained["roles"]) == handed(), (drained, handed())
    if impl.sees_successors:
        assert drained["confirmed"] is True, drained
        assert drained["outcome"] == "every role was taken over", drained
    else:
        assert drained["confirmed"] is False and "cannot see" in drained["outcome"], drained


def _led_for(member: Member, seconds: float) -> bool:
    """`member` leads a role it took at least `seconds` ago (its event lines' monotonic clock is this process's)."""
    since: dict[str, float] = {}
    for line in member.log.lines:
        if line["event"] == "acquired":
            since[line["role"]] = float(line["mono"])
        else:
            since.pop(line["role"], None)
    return any(time.monotonic() - t >= seconds for t in since.values())


def _transferred(group: Group, member: Member, role: str, to: str, start: int) -> Line:
    return wait_until(lambda: [r for r in group.reports(member, TRANSFERRED)[start:] if r["role"] == role
                               and r["to"] == to], 60, what=f"{member.member_id}'s report of transferring {role}")[-1]


def _revoked_on_transfer(group: Group, old: Member, role: str, mark: int, reports: int, timeout: float) -> Line:
    """The old leader's Revoked of `role` after `transfer`; a refusal fails at once with the member's reason."""
    def outcome() -> list[Line]:
        refused = [r for r in group.reports(old, TRANSFERRED)[reports:] if r.get("error")]
        assert not refused, f"{old.member_id} refused the transfer of {role}: {refused}"
        return [x for x in old.log.lines[mark:] if is_event("revoked", role)(x)]
    return wait_until(outcome, timeout, what="revoked on transfer")[0]


def test_transfer_hands_a_role_to_the_named_member(group: Group, impl: Implementation) -> None:
    """`transfer(role, to)`: of three members, the named one takes the role (twice in a row, to each of the others
    in turn, so it is not merely "another member"), after the old leader's Revoked, and keeps it (a transfer
    overrides the method's balancing while the target leads). A member that does not lead the role is refused
    with NotLeader, a target that does not contend for it with TransferRefused. Methods that cannot direct a role
    promise nothing (`transfers` False) and raise NotSupported saying why."""
    role = NAMES[0]
    probe = group.elector("a", ROLES)  # not started: it only says what it can do
    if not probe.characteristics.transfers:
        with pytest.raises(NotSupported, match=rf"{probe.scheme}:// cannot transfer a role: .+"):
            probe.transfer(role, "b")
        return
    members = [group.start(name, ROLES) for name in ("a", "b", "c")]
    all_started(group, members, impl.timeout)
    all_led_once(members, NAMES, impl.timeout)
    first = leader_of(members, role, impl.timeout)
    second, third = (m for m in members if m is not first)
    for old, target, bystander in ((first, second, third), (second, third, first)):
        marks = {m.member_id: len(m.log.lines) for m in members}
        reports = len(group.reports(old, TRANSFERRED))
        old.transfer(role, target.member_id)
        revoked = _revoked_on_transfer(group, old, role, marks[old.member_id], reports, impl.timeout)
        acquired = target.log.wait_for(is_event("acquired", role), impl.timeout, start=marks[target.member_id],
                                       what=f"{role} acquired by the named member {target.member_id}")
        assert acquired["token"] > revoked["token"] and acquired["mono"] >= revoked["mono"], (revoked, acquired)
        done = _transferred(group, old, role, target.member_id, reports)
        assert done.get("confirmed") is True, done
        # it stays: neither the bystander took it in between, nor does balancing move it back for a while
        _holds(members, lambda target=target: holders(members, role) == [target.member_id], 2.0)
        assert not [x for x in bystander.log.lines[marks[bystander.member_id]:] if is_event("acquired", role)(x)]
    # refusals: not the leader; a target that does not contend
    start = len(group.reports(first, TRANSFERRED))
    first.transfer(role, second.member_id)
    assert _transferred(group, first, role, second.member_id, start)["error"] == "NotLeader"
    start = len(group.reports(third, TRANSFERRED))
    third.transfer(role, "nobody")
    assert _transferred(group, third, role, "nobody", start)["error"] == "TransferRefused"
    assert holders(members, role) == [third.member_id]


def _seen(group: Group, member: Member, role: str, start: int = 0) -> list[tuple[str | None, int | None]]:
    """What `member` reported seeing lead `role` (leader, token), from its `start`-th report of any role on."""
    return [(r["leader"], r["token"]) for r in group.reports(member, LEADER)[start:] if r["role"] == role]


def test_members_observe_who_leads_the_roles_they_contend_for(group: Group, impl: Implementation) -> None:
    """`observe` (`elect member --observe`): each member sees who leads a role it contends for, itself included,
    with the leader's token; when the leader leaves, the survivor sees nobody lead it, then itself. A method that
    cannot see it promises nothing (`observes_leaders` False) and refuses with NotSupported saying why."""
    role = "prices.EURUSD"
    probe = group.elector("a", [role])  # not started: it only says what it can do
    assert probe.characteristics.observes_leaders == impl.observes
    if not impl.observes:
        with pytest.raises(NotSupported, match=rf"{probe.scheme}:// cannot observe who leads: .+"):
            probe.observe(lambda changed: None)
        return
    members = [group.start(name, [role], observe=True) for name in ("a", "b")]
    all_started(group, members, impl.timeout)
    old = leader_of(members, role, impl.timeout)
    survivor = next(m for m in members if m is not old)
    token = [line for line in old.log.lines if is_event("acquired", role)(line)][-1]["token"]
    for m in members:  # the leader, as seen by the other member and by itself
        wait_until(lambda m=m: _seen(group, m, role)[-1:] == [(old.member_id, token)], impl.timeout,
                   what=f"{m.member_id} seeing {old.member_id} lead {role} under token {token}")
    mark, lines = len(group.reports(survivor, LEADER)), len(survivor.log.lines)
    old.stop()
    acquired = survivor.log.wait_for(is_event("acquired", role), impl.timeout, start=lines, what="the takeover")
    after = wait_until(lambda: (seen := _seen(group, survivor, role, mark))[-1:] == [(survivor.member_id,
                                                                                     acquired["token"])] and seen,
                       impl.timeout, what=f"{survivor.member_id} seeing itself lead {role}")
    assert (None, None) in after, after  # the role had no leader between the two, and the survivor saw it


def _samples(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(name, frozenset(labels.items())): value for name, labels, value in scrape(url, 10)}


def _led_by_gauge(url: str, member: str) -> set[str]:
    return {dict(labels)["role"] for (name, labels), value in _samples(url).items()
            if name == LEADER_GAUGE and dict(labels).get("member") == member and value == 1}


def _count(url: str, histogram: str) -> float | None:
    return next((v for (name, _), v in _samples(url).items() if name == histogram + "_count"), None)


def test_members_serve_their_metrics(group: Group, impl: Implementation) -> None:
    """`elect member --metrics-port 0`: a member's leader gauges agree with its event lines and its transitions
    are counted; it times renewals only where the method renews, failovers only where it observes leaders (a
    histogram a method cannot fill is absent, not empty)."""
    members = [group.start(name, ROLES, metrics=True) for name in ("a", "b")]
    all_started(group, members, impl.timeout)
    all_led_once(members, NAMES, impl.timeout)
    urls = {m.member_id: wait_until(lambda m=m: group.reports(m, METRICS), impl.timeout,
                                    what=f"{m.member_id}'s metrics port")[-1]["url"] for m in members}
    for m in members:
        wait_until(lambda m=m: _led_by_gauge(urls[m.member_id], m.member_id) == m.log.leading(), impl.timeout,
                   what=f"{m.member_id}'s leader gauges agreeing with its event lines")
    old = leader_of(members, NAMES[0], impl.timeout)
    survivor = next(m for m in members if m is not old)
    acquired = sum(1 for line in old.log.lines if line["event"] == "acquired")
    total = sum(v for (name, labels), v in _samples(urls[old.member_id]).items()
                if name == TRANSITIONS + "_total" and ("kind", "acquired") in labels)
    assert total >= acquired >= 1  # lines of acquisitions the gauges followed (more may have come since)
    if impl.renews:
        wait_until(lambda: (_count(urls[old.member_id], RENEWAL) or 0) > 0, impl.timeout,
                   what=f"{old.member_id}'s renewals timed")
    else:
        assert _count(urls[old.member_id], RENEWAL) is None
    if not impl.observes:
        assert _count(urls[survivor.member_id], FAILOVER) is None
        return
    mark = len(survivor.log.lines)
    before = _count(urls[survivor.member_id], FAILOVER) or 0
    old.stop()
    survivor.log.wait_for(is_event("acquired", NAMES[0]), impl.timeout, start=mark, what="the takeover")
    wait_until(lambda: (_count(urls[survivor.member_id], FAILOVER) or 0) > before, impl.timeout,
               what=f"{survivor.member_id}'s takeover timed as a failover")


# numbered roles: on raft's 16 partitions, roles 0..7 are partitions 0..7 (elect.roles.partition_of)
WEIGHED = [str(r) for r in range(8)]


def led(members: Sequence[Member]) -> dict[str, int]:
    return {m.member_id: len(m.log.leading()) for m in members if m.alive}


def _holds(members: Sequence[Member], check: Callable[[], bool], seconds: float) -> None:
    """`check()` stays true for `seconds`: an invariant over a window, not a wait for a condition."""
    try:
        holds_for(check, seconds)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {({m.member_id: sorted(m.log.leading()) for m in members})}") from None


def test_weights_set_each_members_share(group: Group, impl: Implementation) -> None:
    """`weight`: of 8 roles a member of weight 2 leads twice as many as each of two of weight 1 (4, 2, 2), and it
    stays so. The leases and memory:// by each member's fair share, raft:// by its priority table (`weights` given
    to every node). A method that cannot steer it promises nothing (`weights` False) and refuses the option with
    a ConfigError naming `weight` and saying why."""
    weights = {"a": 2.0, "b": 1.0, "c": 1.0}
    options = group.weigh(weights)
    probe = group.elector("a", WEIGHED)  # not started: it only says what it can do
    if not probe.characteristics.weights:
        with pytest.raises(ConfigError, match=rf"{probe.scheme}:// cannot weigh members: .+") as info:
            group.elector("a", WEIGHED, **options["a"])
        assert info.value.parameter == "weight"
        return
    members = [group.start(name, [int(r) for r in WEIGHED], options=options[name]) for name in ("b", "a", "c")]
    all_started(group, members, impl.timeout)
    expected = {"a": 4, "b": 2, "c": 2}

    def balanced() -> bool:
        return led(members) == expected and all(len(holders(members, r)) == 1 for r in WEIGHED)

    wait_until(balanced, 2 * impl.timeout, what=f"the weighted distribution {expected}")
    _holds(members, balanced, 2.0)


def test_max_roles_is_a_soft_cap(group: Group, impl: Implementation) -> None:
    """`max_roles`: a member capped at 1 that contends for roles 0..7, beside two that contend for 0..5, leads
    only 6 and 7: none of the roles the others can take, though it started first and led them all, and both of
    those nobody else can (the cap is soft: past it rather than leaderless). When one of the others stops, its
    roles go to the other, not to the capped member. A method that cannot cap promises nothing (`weights` False)
    and refuses the option with a ConfigError naming `max_roles` and saying why."""
    probe = group.elector("a", WEIGHED)
    if not probe.characteristics.weights:
        with pytest.raises(ConfigError, match=rf"{probe.scheme}:// cannot cap a member's roles: .+") as info:
            group.elector("a", WEIGHED, max_roles=1)
        assert info.value.parameter == "max_roles"
        return
    capped = group.start("a", list(range(8)), options={"max_roles": 1})
    others = [group.start(name, list(range(6))) for name in ("b", "c")]
    members = [capped, *others]
    all_started(group, members, impl.timeout)

    def settled(alive: Sequence[Member]) -> bool:
        return capped.log.leading() == {"6", "7"} and all(len(holders(alive, r)) == 1 for r in WEIGHED)

    def capped_and_exclusive(alive: Sequence[Member]) -> bool:
        """What must hold from then on; b and c may still even out their share between them (a role in handover
        between them is briefly unheld), so a gap is no failure here."""
        return capped.log.leading() == {"6", "7"} and all(len(holders(alive, r)) <= 1 for r in WEIGHED)

    wait_until(lambda: settled(members), 2 * impl.timeout, what="a leading only the roles nobody else can take")
    _holds(members, lambda: capped_and_exclusive(members), 2.0)
    others[1].stop()
    wait_until(lambda: settled(members[:2]) and led(members[:2]) == {"a": 2, "b": 6}, impl.timeout,
               what="the stopped member's roles taken by the uncapped one")
    _holds(members, lambda: settled(members[:2]), 1.0)  # b alone: nothing left to even out


def test_a_returning_member_gets_its_roles_back_within_the_rebalance_limit(group: Group, impl: Implementation) -> None:
    """`rebalance_limit=1&rebalance_window=W`: of two members, one stops and comes back; the other, which led
    everything meanwhile, hands roles back (raft: partitions whose primary returned, after the hysteresis; the
    leases: down to the fair share) no faster than one per W, until both lead their share again. Methods whose
    balancing is not elect's policy (kafka://: the group's assignor; pysyncobj://; memory://) have no such option
    and refuse it with a ConfigError naming it."""
    window = 2.0
    limit = {"rebalance_limit": 1, "rebalance_window": window}
    try:
        group.elector("a", NAMES, **limit)
    except ConfigError as exc:
        assert "rebalance_limit" in str(exc), exc
        return
    roles = list(range(6))
    keeper = group.start("a", roles, options=limit)
    leaver = group.start("c", roles, options=limit)
    members = [keeper, leaver]
    all_started(group, members, impl.timeout)
    all_led_once(members, [str(r) for r in roles], impl.timeout)
    leaver.stop()
    wait_until(lambda: led([keeper]) == {"a": len(roles)}, impl.timeout, what="a leading every role alone")
    back = group.start("c", roles, options=limit)
    began = time.monotonic()
    share = led([keeper])["a"]

    def settled() -> bool:
        counts = led([keeper, back])
        return counts.get("c", 0) >= 2 and all(len(holders([keeper, back], str(r))) == 1 for r in roles) and \
            counts["a"] + counts["c"] == len(roles) and counts["a"] < share
    wait_until(settled, 4 * impl.timeout, what="the returning member leading roles again")
    _holds([keeper, back], lambda: led([keeper, back]).get("c", 0) >= 2, 2.0)
    taken = [line for line in back.log.lines if line["event"] == "acquired" and line["mono"] >= began]
    assert len(taken) >= 2, back.log.lines
    # the limit is on the keeper's hand-backs, timed as it gives each up: the returning member's acquisitions after
    # them come a variable while later (a busy CI: 2.23 s then 1.79 s apart for hand-backs 2 s apart)
    shed = sorted(line["mono"] for line in keeper.log.lines if line["event"] == "revoked" and line["mono"] >= began)
    gaps = [b - a for a, b in itertools.pairwise(shed) if b - a > 0.05]  # roles of one partition: together
    assert gaps and min(gaps) >= 0.9 * window, (shed, gaps)
