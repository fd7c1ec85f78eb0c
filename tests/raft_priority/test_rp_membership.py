"""Membership changes in the pure core and the host: the rules that keep two leaders out of one term while the
voters change (docs/architecture.md, "Membership"), and add / remove / replace at the host level."""

from __future__ import annotations

import random
from dataclasses import replace

from hosts_harness import Hosts, address
from rp_harness import Bench

from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.membership import CLUSTER, Membership, partition_voters, sticky_primaries
from raft_priority.messages import Conf, HardState, HeartbeatResponse, PreVoteRequest, VoteRequest
from raft_priority.storage import HardStateLog

P3 = {"a": 3, "b": 2, "c": 1}
ZEP = RaftConfig.zep006()


def elected() -> Bench:
    b = Bench(P3, ZEP)
    b.run_to(1.0)
    assert b.leaders() == ["a"]
    return b


def test_a_new_leader_changes_nothing_before_an_entry_of_its_own_term_is_committed() -> None:
    b = Bench(P3, ZEP)
    b.drop = lambda m: isinstance(m, HeartbeatResponse)  # elected, but nobody's answer says it holds a's entry
    b.run_to(1.2)
    a = b["a"]
    assert a.state is RaftState.LEADER and a.conf.position == (1, 1) and a.committed != a.conf.position
    a.set_target(Conf(voters={"a": 3, "b": 2}), b.now)
    assert a.conf.position == (1, 1)  # nothing proposed on top of an uncommitted entry
    b.drop = lambda m: False
    b.run_to(1.8)
    assert a.committed == a.conf.position and set(a.conf.voters) == {"a", "b"} and not a.conf.joint


def test_voters_refuse_a_candidate_whose_configuration_is_older() -> None:
    b = elected()
    b.run_to(1.5)
    voter = b["b"]
    assert voter.conf.position == (1, 1)
    voter.step(PreVoteRequest(0, "c", "b", 2, 0, 0, 0, 0), 5.0)  # c's leader is long silent: only the entry decides
    assert [m.granted for m in b.collect("b").messages] == [False]  # type: ignore[attr-defined]
    voter.step(PreVoteRequest(0, "c", "b", 2, 0, 0, 1, 1), 5.0)
    assert [m.granted for m in b.collect("b").messages] == [True]  # type: ignore[attr-defined]
    voter.step(VoteRequest(0, "c", "b", 2, 0, 0, False, 0, 0, 0), 5.0)
    assert [m.granted for m in b.collect("b").messages] == [False]  # type: ignore[attr-defined]


def test_a_joint_configuration_needs_a_majority_of_each_half() -> None:
    conf = Conf(1, 2, {"c": 1, "d": 1, "e": 1}, {"a": 1, "b": 1, "c": 1})
    g = RaftGroup(GroupSpec(0, P3), "c", ZEP, random.Random(0), 0.0, HardState(1, None, conf))
    assert not g._won({"a", "b", "c"})  # the old half only
    assert not g._won({"c", "d", "e"})  # the new half only
    assert g._won({"b", "c", "d"})
    assert g.peers == ("d", "e", "a", "b")  # outgoing voters last: they weigh nothing


def test_learners_never_campaign_and_are_not_counted() -> None:
    g = RaftGroup(GroupSpec(0, P3), "d", ZEP, random.Random(0), 0.0, HardState(conf=Conf(voters={}, learners=("d",))))
    for t in range(1, 30):
        g.tick(float(t))
    assert g.state is RaftState.FOLLOWER and g.term == 0 and not g.ready().messages


def test_the_single_server_change_schedule_elects_nobody_twice() -> None:
    """raft-dev 2015: a leader's change reaches only itself; the next leader, on the old configuration, makes
    another; the first comes back with its own. Here the second leader's change waits for its own entry, which
    reaches d, and d then refuses the first leader's older configuration."""
    b = Bench({"a": 4, "b": 3, "c": 2, "d": 1}, ZEP)
    e = RaftGroup(GroupSpec(0, {"e": 1}), "e", ZEP, random.Random(9), 0.0,
                  HardState(conf=Conf(voters={}, learners=("e",))))
    b.nodes["e"] = e
    b.run_to(1.5)
    a = b["a"]
    assert b.leaders() == ["a"]
    b.drop = lambda m: m.src == "a"  # a's next entry reaches nobody
    a._append(a.conf.next(a.term, voters={**a.conf.voters, "e": 1}), b.now)  # the change that stays on a
    b.collect("a")
    b.crash("a")
    b.drop = lambda m: False
    b.run_to(4.0)
    leader = b.leaders()
    assert leader and leader[0] != "a"
    second = b[leader[0]]
    b.run_to(4.5)
    assert second.committed == second.conf.position and second.conf.term == second.term
    second.set_target(Conf(voters={m: p for m, p in second.conf.voters.items() if m != "d"}), b.now)
    b.run_to(6.0)
    assert "d" not in second.conf.voters and not second.conf.joint
    b.down.discard("a")  # a comes back with its own configuration, and campaigns on it
    b.crash(leader[0])
    b.run_to(12.0)
    a_won = [x for x in b.events("acquired") if x[0] == "a" and x[3] > 4.0]
    assert not a_won, a_won  # d and the others hold later entries: a's older one wins no vote of theirs
    terms = [(x[2], x[0]) for x in b.events("acquired")]
    assert len({t for t, _ in terms}) == len(terms)  # one leader per term


def test_sticky_primaries_move_one_share_to_the_new_node() -> None:
    first = [("a", "b", "c")[i % 3] for i in range(12)]
    four = sticky_primaries(first, ["a", "b", "c", "d"])
    assert sum(x != y for x, y in zip(first, four, strict=True)) == 3 and four.count("d") == 3
    three = sticky_primaries(four, ["b", "c", "d"])
    assert sum(x != y for x, y in zip(four, three, strict=True)) == 3 and "a" not in three
    weighted = sticky_primaries(first, ["a", "b", "c", "d"], {"d": 2})
    assert weighted.count("d") == 5 and sum(x != y for x, y in zip(first, weighted, strict=True)) == 5
    table = partition_voters(["a", "b", "c", "d"], four, None, "balanced")
    assert [max(t, key=lambda m: t[m]) for t in table] == four


def test_the_configuration_survives_a_restart(tmp_path: object) -> None:
    conf = Conf(3, 4, {"a": 2, "b": 1}, None, ("c",), Membership.of({"a": "h:1", "b": "h:2"}, ["a", "b"]))
    log = HardStateLog(str(tmp_path), "a")
    log.save({CLUSTER: HardState(3, "a", conf), 0: HardState(2, None)})
    log.save({CLUSTER: HardState(4, None, conf)})
    log.close()
    assert HardStateLog(str(tmp_path), "a").load_all() == {CLUSTER: HardState(4, None, conf), 0: HardState(2, None)}


def test_a_fourth_node_joins_takes_its_share_and_three_partitions_move() -> None:
    h = Hosts("abc", 12)
    h.run_to(8.0)
    before = h.leaders()
    assert sorted(h.counts().values()) == [4, 4, 4]
    h.join("d")
    h.run_to(16.0)
    after = h.leaders()
    assert h.voters("a") == h.voters("d") == ["a", "b", "c", "d"]
    assert h.counts() == {"a": 3, "b": 3, "c": 3, "d": 3}
    assert sum(before[p] != after[p] for p in range(12)) == 3
    assert not h.violations


def test_replacing_every_node_one_at_a_time_keeps_one_leader_per_partition() -> None:
    h = Hosts("abc", 12)
    h.run_to(8.0)
    t = 8.0
    for new, old in (("d", "a"), ("e", "b"), ("f", "c")):
        h.join(new)
        t += 4
        h.run_to(t)
        h.ask(remove={old})
        t += 6
        h.run_to(t)
        assert old not in h.voters(new)
        assert not [g for g in h.hosts[old].groups if g != CLUSTER]  # it left every partition
    assert h.counts()["d"] == h.counts()["e"] == h.counts()["f"] == 4
    for old in "abc":
        h.crash(old)
    h.run_to(t + 5)
    assert sum(h.counts().values()) == 12 and not h.violations


def test_a_removed_node_that_restarts_disturbs_nobody() -> None:
    h = Hosts("abcd", 12)
    h.run_to(8.0)
    h.ask(remove={"d"})
    h.run_to(14.0)
    assert h.voters("a") == ["a", "b", "c"]
    terms = {p: g.term for p, g in h.hosts["a"].groups.items()}
    h.crash("d")
    h.run_to(15.0)
    h.restart("d")  # with what it persisted: configurations that still name it
    h.run_to(30.0)
    assert {p: g.term for p, g in h.hosts["a"].groups.items()} == terms
    assert not h.violations and sorted(h.counts().values())[1:] == [4, 4, 4]


def test_the_cluster_leader_removing_itself_hands_over_first() -> None:
    h = Hosts("abcd", 12)
    h.run_to(8.0)
    leader = next(n for n, x in h.hosts.items() if x.cluster is not None and x.cluster.state is RaftState.LEADER)
    h.ask(remove={leader})
    h.run_to(14.0)
    rest = [n for n in "abcd" if n != leader]
    assert h.voters(rest[0]) == rest
    assert not h.violations and sum(h.counts().values()) == 12


def test_a_moved_node_gets_its_new_address() -> None:
    h = Hosts("abc", 6)
    h.run_to(6.0)
    h.ask(add={"c": "elsewhere:7001"})
    h.run_to(8.0)
    m = h.hosts["a"].membership()
    assert m is not None and isinstance(m[0].payload, Membership)
    assert m[0].payload.address_map() == {"a": address("a"), "b": address("b"), "c": "elsewhere:7001"}
    assert h.voters("a") == ["a", "b", "c"]


def test_a_restarted_joiner_invents_no_configuration() -> None:
    """Seed 3945 of `elect bench sim-raft-members`: a node that joined restarts without an entry for a partition; it
    must not take the table it derives for one (its peer would derive the same and both would win term 1)."""
    h = Hosts("abc", 6)
    h.run_to(6.0)
    h.join("d")
    h.run_to(14.0)
    h.crash("d")
    h.disk["d"] = {g: hs for g, hs in h.disk["d"].items() if g == CLUSTER}  # as if it had heard no partition
    h.restart("d")
    g = h.hosts["d"].groups[0]
    assert not g.voter and g.conf.position == (0, 0)
    h.run_to(20.0)
    assert h.hosts["d"].groups[0].voter and not h.violations


def test_a_restarted_member_hosts_the_groups_that_still_count_it() -> None:
    """Seed 3524: a removed node that restarts while a partition's configuration still counts it hosts that partition
    (its vote may be what the change needs), and leaves it once the partition lets it go."""
    h = Hosts("abc", 6)
    h.run_to(6.0)
    h.crash("c")
    kept = dict(h.disk["c"])
    h.run_to(9.0)
    h.ask(remove={"c"})
    h.run_to(14.0)
    h.disk["c"] = kept  # what it persisted before it was removed: configurations that count it
    h.restart("c")
    assert set(h.hosts["c"].groups) >= set(range(6))
    h.run_to(24.0)
    assert [g for g in h.hosts["c"].groups if g != CLUSTER] == [] and not h.violations


def test_a_joined_node_beats_for_the_groups_it_leads_quietly() -> None:
    """A joining node's partitions are added before they name any peer, so adding them armed no node beats; once it
    led some quietly, their leases rested on node acks that no beat asked for, and lapsed (a leadership fenced
    3.7-10 s after a hand-over, in 2 of 18 real runs). Its host must beat, be acked, and keep those leases."""
    h = Hosts("abc", 6, cfg=replace(RaftConfig.improved(election_timeout=1.0, heartbeat_interval=0.1), quiesce=True))
    h.run_to(6.0)
    h.join("d")
    h.run_to(20.0)
    d = h.hosts["d"]
    quiet = [p for p, g in d.groups.items() if p != CLUSTER and g.state is RaftState.LEADER and g.quiet]
    assert quiet, "d leads no partition quietly: the test proves nothing"
    followers = {p for p, led in d.links.led.items() if led}
    assert followers and all(d.links.acked.get(p, -1.0) > h.now - 1.0 for p in followers), dict(d.links.acked)
    assert all(d.groups[p].is_leader(h.now) for p in quiet)
    assert not h.violations


def test_a_restarted_primary_is_heard_at_once_and_handed_its_share_after_the_hysteresis() -> None:
    """A node back from a restart leads nothing its peers follow quietly, so only its greeting (a node beat to each
    peer) tells the leaders of its quiet partitions that it is back; without it they heard it at its first vote
    request, ET and more later, and handed back that much later."""
    cfg = RaftConfig.improved(election_timeout=1.0, heartbeat_interval=0.1, quiesce=True, rebalance_hysteresis=3.0)
    h = Hosts("abc", 6, cfg)
    h.run_to(8.0)
    own = {p for p, n in h.leaders().items() if n == "a"}
    assert len(own) == 2 and any(g.quiet for g in h.hosts["b"].groups.values())
    h.crash("a")
    h.run_to(12.0)  # its partitions led elsewhere, and quiet again without it
    assert "a" not in h.leaders().values() and len(h.leaders()) == 6
    h.restart("a")
    back = h.now
    h.run_to(back + cfg.rebalance_hysteresis + 0.5)
    assert {p for p, n in h.leaders().items() if n == "a"} == own
    assert not h.violations
