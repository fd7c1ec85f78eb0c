"""etcd:// and zookeeper:// against the real stores, members as separate processes, real faults."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
from lease_helpers import Spawn, counts, holders, settled, unique

import elect
from cas_lease.driver import Listener
from elect_bench.members import Line, MemberProcess
from elect_cluster.endpoints import Endpoints
from elect_cluster.local import LocalCluster
from elect_cluster.ports import free_ports
from elect_cluster.waiting import holds_for, wait_until

if TYPE_CHECKING:
    from cas_lease.etcd import EtcdStore
    from cas_lease.zookeeper import ZooKeeperStore

pytestmark = pytest.mark.infra

TTL = 1.0
STORES = ["etcd", "zookeeper"]


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, infra: Endpoints) -> Callable[[str], str]:
    """`url(name)`: a fresh group on the session's etcd or ZooKeeper, TTL 1 s."""
    scheme = request.param

    def make(name: str) -> str:
        address = infra.etcd[0] if scheme == "etcd" else infra.zookeeper[0]
        ttl = "ttl" if scheme == "etcd" else "session_timeout"
        return f"{scheme}://{address}/{unique(name)}?{ttl}={TTL}"

    return make


def first_after(member: MemberProcess, mark: int) -> Line:
    return member.log.wait_for(lambda line: True, 10.0, start=mark, what=f"an event of {member.member_id}")


def test_sigkill_hands_the_leaders_roles_to_survivors_after_about_the_ttl(url: Callable[[str], str],
                                                                          spawn: Spawn) -> None:
    roles = [str(r) for r in range(6)]
    group = url("kill")
    members = [spawn(group, name, roles) for name in "abc"]
    wait_until(lambda: settled(members, roles, per_member=2), 30.0, what="2 roles per member")
    victim = members[0]
    led = sorted(victim.log.leading())
    killed = time.monotonic()
    victim.kill()
    survivors = members[1:]
    wait_until(lambda: all(holders(survivors, r) for r in led), 15.0, what=f"survivors leading {led}")
    for role in led:
        acquired = min(line["mono"] for m in survivors for line in m.log.lines
                       if line["event"] == "acquired" and line["role"] == role and line["mono"] > killed)
        failover = acquired - killed
        assert 0.5 * TTL <= failover <= TTL + 1.5, (role, failover)
    wait_until(lambda: settled(survivors, roles, per_member=3), 15.0, what="3 roles per survivor")


def test_frozen_leader_reports_fenced_first_and_stopped_before_its_successor(url: Callable[[str], str],
                                                                             spawn: Spawn) -> None:
    roles = ["x", "y"]
    group = url("freeze")
    a = spawn(group, "a", roles)
    wait_until(lambda: settled([a], roles), 20.0, what="a leading both roles")
    b = spawn(group, "b", roles)
    wait_until(lambda: settled([a, b], roles, per_member=1), 20.0, what="one role each")
    led = sorted(a.log.leading())
    mark = len(a.log.lines)
    paused = time.monotonic()
    a.pause()
    try:
        wait_until(lambda: all(r in b.log.leading() for r in led), 15.0, what=f"b taking over {led}")
        wait_until(lambda: time.monotonic() - paused >= 2 * TTL, 5.0, interval=0.05, what="a frozen for 2 TTL")
    finally:
        a.resume()
    woke = [first_after(a, mark + i) for i in range(len(led))]
    assert all(line["event"] == "fenced" for line in woke), woke  # nothing before the fenced lines
    assert sorted(line["role"] for line in woke) == led
    for line in woke:
        successor = next(s for s in b.log.lines if s["event"] == "acquired" and s["role"] == line["role"]
                         and s["mono"] > paused)
        assert paused - TTL < line["until"] < successor["mono"], (line, successor)
        assert line["mono"] >= successor["mono"]  # reported on waking, dated by its own deadline
    # a rejoins: fair sharing gives it one role back
    wait_until(lambda: settled([a, b], roles, per_member=1), 20.0, what="one role each again")


def test_fair_share_20_roles_over_4_members(url: Callable[[str], str], spawn: Spawn) -> None:
    roles = [str(r) for r in range(20)]
    group = url("fair")
    members = [spawn(group, name, roles) for name in "abcd"]
    wait_until(lambda: settled(members, roles, per_member=5), 30.0, what="5 roles per member")
    began = time.monotonic()
    wait_until(lambda: time.monotonic() - began > 1.0 or not settled(members, roles, per_member=5), 5.0,
               what="a second of steady state")
    assert settled(members, roles, per_member=5), counts(members)


@pytest.mark.parametrize("scheme", STORES)
def test_unreachable_store_fails_fast_with_a_clear_error(scheme: str) -> None:
    port = free_ports(1)[0]
    elector = elect.connect(f"{scheme}://127.0.0.1:{port}/nowhere?connect_timeout=1", ["x"], member="m")
    began = time.monotonic()
    with pytest.raises(elect.InfrastructureUnavailable, match=r"127\.0\.0\.1"):
        elector.start()
    assert time.monotonic() - began < 5.0
    assert not elector.is_leader("x")


@pytest.mark.parametrize("scheme", STORES)
def test_start_passes_over_a_store_member_that_accepts_and_never_answers(scheme: str, infra: Endpoints) -> None:
    """A store member that is restarting (or has lost its leader) accepts connections and does not answer; a
    member starting then must reach the next endpoint within its connect budget, not spend it all waiting."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes connections into the backlog; nothing ever reads them
    try:
        real = infra.etcd[0] if scheme == "etcd" else infra.zookeeper[0]
        hosts = f"127.0.0.1:{silent.getsockname()[1]},{real}"
        ttl = "ttl" if scheme == "etcd" else "session_timeout"
        elector = elect.connect(f"{scheme}://{hosts}/{unique('silent')}?{ttl}={TTL}&connect_timeout=10", ["x"],
                                member="m")
        try:
            elector.start()
            wait_until(lambda: elector.leading() == {"x"}, 20.0, what="leading through the answering endpoint")
        finally:
            elector.stop()
    finally:
        silent.close()


@pytest.mark.parametrize("scheme", STORES)
def test_stop_returns_while_the_store_is_frozen(scheme: str, infra_cluster: LocalCluster) -> None:
    """Every store request has a time limit: a member stops in bounded time even when the server
    never answers (SIGSTOPped), fencing what it could not hand over."""
    address = getattr(infra_cluster.endpoints, scheme)[0]
    ttl = "ttl" if scheme == "etcd" else "session_timeout"
    elector = elect.connect(f"{scheme}://{address}/{unique('frozen')}?{ttl}={TTL}", ["x", "y"], member="m")
    elector.start()
    try:
        wait_until(lambda: elector.leading() == {"x", "y"}, 20.0, what="leading both roles")
        infra_cluster.pause_member(scheme, 0)
        try:
            began = time.monotonic()
            elector.stop(timeout=20.0)
            took = time.monotonic() - began
        finally:
            infra_cluster.resume_member(scheme, 0)
        assert took < 15.0, took
        assert not elector.leading()
    finally:
        elector.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # kazoo's thread dies: the point
def test_a_zookeeper_member_whose_kazoo_connection_loop_dies_comes_back(infra: Endpoints) -> None:
    """kazoo's connection thread can end on an exception of its own ("xids do not match", seen under load in a
    soak) while the client is not stopped; nothing then reconnects it. The member must notice, fence what it
    led, and come back on a new client and session rather than stay leaderless for good."""
    elector = elect.connect(f"zookeeper://{infra.zookeeper[0]}/{unique('loop')}?session_timeout={TTL}", ["x"],
                            member="m")
    events: list[elect.Event] = []
    elector.subscribe(events.append)
    elector.start()
    try:
        wait_until(lambda: elector.leading() == {"x"}, 20.0, what="leading x")
        connection = elector._store._client._connection  # type: ignore[attr-defined]
        first = elector._store.session  # type: ignore[attr-defined]

        def broken(*_args: object) -> None:
            raise RuntimeError("xids do not match, expected 42 received 43")  # what kazoo raised in the soak

        connection._read_socket = broken  # the next read inside kazoo's own loop fails as it did there
        wait_until(lambda: connection.connection_stopped.is_set(), 20.0, what="kazoo's connection loop to end")
        # events reach the subscriber on a thread of their own, after leading() shows them: wait for both
        wait_until(lambda: elector._store.session not in ("", first) and elector.leading() == {"x"}  # type: ignore[attr-defined]
                   and type(events[-1]).__name__ == "Acquired", 30.0, what="a new session leading x again")
        kinds = [type(e).__name__ for e in events]
        assert kinds[0] == "Acquired" and kinds[-1] == "Acquired" and ("Fenced" in kinds or "Revoked" in kinds)
    finally:
        elector.stop()


def test_etcd_lease_revoked_under_a_live_holder_frees_no_role_before_the_ttl(infra: Endpoints) -> None:
    """etcd before 3.4.31 / 3.5.13 lets a leader resumed after a pause revoke leases that are still kept alive
    (etcd-io/etcd#15247). Such a revoke, which the holder cannot foresee, must not free its role: the key
    stays until a contender has seen the holder's directory entry gone for the TTL."""
    import json
    import urllib.request

    from elect.etcd_gateway import b64, range_end, unb64

    address = infra.etcd[0]
    prefix = unique("revoked")

    def call(path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(f"http://{address}/v3/{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5.0) as response:
            return json.loads(response.read())

    def keys(under: str) -> dict[str, str]:
        key = f"/{prefix}/{under}/"
        kvs = call("kv/range", {"key": b64(key), "range_end": b64(range_end(key))}).get("kvs", [])
        return {unb64(kv["key"]).decode(): unb64(kv.get("value")).decode() for kv in kvs}  # type: ignore[index]

    url = f"etcd://{address}/{prefix}?ttl={TTL}&fair=false"
    first = elect.connect(url, ["x"], member="m0")
    first.start()
    second = elect.connect(url, ["x"], member="m1")
    try:
        wait_until(lambda: first.leading() == {"x"}, 20.0, what="m0 leading x")
        second.start()
        wait_until(lambda: any('"m1"' in v for v in keys("members").values()), 20.0, what="m1 registered")
        lease = next(k.rsplit("/", 1)[1] for k, v in keys("members").items() if '"m0"' in v)
        call("lease/revoke", {"ID": int(lease, 16)})  # what the deposed etcd leader's lessor does
        holds_for(lambda: keys("roles") and not second.leading(), 0.9 * TTL, 0.02,
                  what="the role key kept and m1 not leading before the TTL passed")
        wait_until(lambda: first.leading() == {"x"} or second.leading() == {"x"}, 10.0, what="x led again")
    finally:
        second.stop()
        first.stop()


def test_a_zookeeper_holder_whose_session_the_server_ends_keeps_its_role_until_its_silence_is_timed(
        infra: Endpoints) -> None:
    """Found by the soak (infra-pause): a ZooKeeper leader woken from a freeze may expire a session whose holder
    is alive and still inside its own deadline. The session's end may then remove only its member node; the
    role node stays, and a contender takes it over only after `session_timeout` of the holder's silence counted
    from that deletion (by then the holder, whose renewals fail from the deletion on, has stopped). The session
    end is stood in for by a client that closes its session at once."""
    from kazoo.client import KazooClient

    from cas_lease.model import MemberRecord
    from cas_lease.names import encode_holder, encode_record

    address = infra.zookeeper[0]
    path = "/" + unique("premature")
    holder = KazooClient(hosts=address, timeout=4 * TTL)
    holder.start(10)
    try:
        session = f"{holder.client_id[0]:x}"
        holder.create(f"{path}/members/{session}", encode_record(MemberRecord("h", frozenset({"r"}))),
                      ephemeral=True, makepath=True)
        _, stat = holder.create(f"{path}/roles/r", encode_holder("h", session), makepath=True, include_data=True)
        elector = elect.connect(f"zookeeper://{address}{path}?session_timeout={TTL}", ["r"], member="c")
        leaders: list[str | None] = []
        elector.start()
        try:
            elector.observe(lambda change: leaders.append(change.leader))
            wait_until(lambda: "h" in leaders, 10.0, what="the contender seeing h hold r")
            ended = time.monotonic()
            holder.stop()  # the server deletes the member node at once; the role node stays
            wait_until(lambda: elector.is_leader("r"), 10.0, what="the contender taking r over")
            took = time.monotonic() - ended
            assert took >= TTL, took  # not at the session's end: TTL of silence after it
            assert elector.leading() == {"r"}
            taken = elector.leadership("r")
            assert taken is not None and taken.token > int(stat.mzxid), taken
        finally:
            elector.stop()
    finally:
        holder.stop()
        holder.close()


def test_a_zookeeper_renewal_fails_while_a_role_it_holds_has_changed(infra: Endpoints) -> None:
    """Found by the soak (infra-pause, lossy): a member cut off from ZooKeeper for longer than `session_timeout`
    but not its session comes back, renews, and would adopt again the role its stale view still shows as its own,
    which a contender had meanwhile taken over. A renewal therefore checks, in the same `multi` as its write, that
    every role node last seen as this member's is unchanged: if one changed, nothing is renewed, and what changed
    is reported; the next renewal leaves it out. The lagging watch is stood in for by stopping it."""
    from kazoo.client import KazooClient

    from cas_lease.driver import Refuted
    from cas_lease.model import Create, MemberRecord, Renew, RoleSeen
    from cas_lease.names import encode_holder
    from cas_lease.options import ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    address = infra.zookeeper[0]
    options = ZooKeeperOptions(hosts=(address,), path="/" + unique("reread"), session_timeout=TTL)
    store = ZooKeeperStore(options, "m")
    store.open(MemberRecord("m", frozenset({"r", "s"})), Listener(lambda seen: None), 10.0)
    other = KazooClient(hosts=address, timeout=4 * TTL)
    other.start(10)
    try:
        for role in ("r", "s"):
            created = store.execute(Create(role), 5.0)
            assert isinstance(created[0], RoleSeen) and created[0].holder is not None
            assert created[0].holder.session == store.session
        def holders(seen: list[object]) -> dict[object, str]:
            return {o.role: o.holder.member for o in seen if isinstance(o, RoleSeen) and o.holder is not None}

        assert holders(store.execute(Renew(), 5.0)) == {"r": "m", "s": "m"}  # both still ours, as reported
        # at rest a renewal reports nothing: only what changed since the last one (a watch's first report may
        # still be on its way, so one more renewal may carry it)
        wait_until(lambda: store.execute(Renew(), 5.0) == [], 5.0, what="a renewal with nothing new to report")
        store._tracked["r"].stopped = True  # the watch lags: it reports nothing more
        other.set(f"{options.root}/roles/r", encode_holder("o", "other-session"))  # taken over meanwhile
        with pytest.raises(Refuted) as refused:
            store.execute(Renew(), 5.0)
        taken = [o for o in refused.value.observations if isinstance(o, RoleSeen) and o.role == "r"]
        assert taken and taken[-1].holder is not None and taken[-1].holder.member == "o", refused.value.observations
        # it goes through ("r" is no longer checked), reporting what changed since the last report: "r" (and "s"
        # only if its watch's first report came after the first renewal was made)
        seen = holders(store.execute(Renew(), 5.0))
        assert seen.get("r") == "o" and seen.get("s", "m") == "m", seen
        assert store._held["s"][1] is not None and store._held["s"][1].member == "m"
    finally:
        other.stop()
        other.close()
        store.close(5.0)


def test_zookeeper_reports_a_leaving_holders_new_record_before_its_freed_role(infra: Endpoints) -> None:
    """A member that stops rewrites its record (contending for nothing) and then frees its role nodes; the
    record's watch reads the new data in a round trip of its own, so the role's deletion may be seen first. The
    store reads the holder's record before it reports the role free, so the survivors never see it as a live
    member that wants the role (and leave it free for `fair_delay` on every graceful handover)."""
    from kazoo.client import KazooClient

    from cas_lease.model import MemberRecord, MemberSeen, RoleSeen
    from cas_lease.names import encode_holder, encode_record
    from cas_lease.options import ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    address = infra.zookeeper[0]
    options = ZooKeeperOptions(hosts=(address,), path="/" + unique("leave"), session_timeout=TTL)
    seen: list[object] = []
    store = ZooKeeperStore(options, "observer")
    store.open(MemberRecord("observer", frozenset({"r"})), Listener(seen.append), 10.0)
    holder = KazooClient(hosts=address, timeout=TTL)
    holder.start(10)
    try:
        session = f"{holder.client_id[0]:x}"
        member = f"{options.root}/members/{session}"
        holder.create(member, encode_record(MemberRecord("h", frozenset({"r"}))), ephemeral=True)
        holder.ensure_path(f"{options.root}/roles/r")
        for attempt in range(10):
            holder.set(member, encode_record(MemberRecord("h", frozenset({"r"}))))
            holder.set(f"{options.root}/roles/r", encode_holder("h", session))
            wait_until(lambda: any(isinstance(o, RoleSeen) and o.holder is not None  # type: ignore[misc]
                                   and o.holder.session == session for o in seen),
                       10.0, what="the observer seeing the role held")
            mark = len(seen)
            holder.set(member, encode_record(MemberRecord("h", frozenset())))  # stopping: contends for nothing
            holder.set(f"{options.root}/roles/r", b"")  # freed: the node stays, empty
            wait_until(lambda mark=mark: any(isinstance(o, RoleSeen) and o.holder is None  # type: ignore[misc]
                                             for o in seen[mark:]), 10.0, what="the observer seeing the role freed")
            after = seen[mark:]
            freed = next(i for i, o in enumerate(after) if isinstance(o, RoleSeen) and o.holder is None)
            assert any(isinstance(o, MemberSeen) and o.session == session and o.record is not None
                       and o.record.roles == frozenset() for o in after[:freed]), (attempt, after)
            del seen[:]
    finally:
        holder.stop()
        holder.close()
        store.close(5.0)


def test_a_zookeeper_member_asks_one_request_per_change_of_a_node_it_watches(infra: Endpoints) -> None:
    """Every member watches every other member's node, which each renewal rewrites: that is most of what a member
    asks of ZooKeeper, so a change costs one request (the read after the persistent watch's event), not an
    `exists` watch and a read (`elect bench load`: 100 requests/s per member at 12 members, with two). Every version
    is still seen."""
    from kazoo.client import KazooClient

    from cas_lease.model import MemberRecord, MemberSeen
    from cas_lease.names import encode_record
    from cas_lease.options import ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    address = infra.zookeeper[0]
    options = ZooKeeperOptions(hosts=(address,), path="/" + unique("watchcost"), session_timeout=TTL)
    seen: list[object] = []
    store = ZooKeeperStore(options, "observer")
    store.open(MemberRecord("observer", frozenset({"r"})), Listener(seen.append), 10.0)
    other = KazooClient(hosts=address, timeout=4 * TTL)
    other.start(10)
    try:
        session = f"{other.client_id[0]:x}"
        node = f"{options.root}/members/{session}"
        record = encode_record(MemberRecord("o", frozenset({"r"})))
        other.create(node, record, ephemeral=True)

        def version_seen() -> int:
            return max((o.version for o in seen if isinstance(o, MemberSeen) and o.session == session
                        and o.record is not None), default=-1)

        wait_until(lambda: version_seen() >= 0, 10.0, what="the observer watching the new member")
        before, renewals, first = store.requests, 20, version_seen()
        for version in range(first + 1, first + renewals + 1):
            other.set(node, record)  # what a renewal does to the member's node
            wait_until(lambda version=version: version_seen() == version, 10.0, what=f"version {version} seen")
        assert store.requests - before <= renewals + 2, store.requests - before
    finally:
        other.stop()
        other.close()
        store.close(5.0)


@pytest.mark.parametrize("scheme", STORES)
def test_a_transfer_to_a_member_not_yet_watched_is_confirmed_by_a_fresh_read(scheme: str, infra: Endpoints) -> None:
    """A member that started a moment ago may not have reached the transferring member's watch: the transfer reads
    the membership directory before it refuses (the conformance suite saw TransferRefused for a member that had
    started). The lagging watch is stood in for by a core that has seen no other member contend."""
    address = infra.etcd[0] if scheme == "etcd" else infra.zookeeper[0]
    ttl = "ttl" if scheme == "etcd" else "session_timeout"
    where = f"{scheme}://{address}/{unique('transfer-fresh')}?{ttl}={TTL}"
    a = elect.connect(where, ["x"], member="a")
    b = elect.connect(where, ["x"], member="b")
    try:
        a.start()
        wait_until(lambda: a.leading() == {"x"}, 20.0, what="a leading x")
        b.start()
        a._core.can_take = lambda role, member, now: False  # type: ignore[attr-defined]  # its watch lags
        done = a.transfer("x", "b", timeout=20.0)
        assert done.confirmed, done
        # a sees b's key at once; b leads once its own request's answer reached it (on a busy machine, later)
        wait_until(lambda: b.leading() == {"x"}, 20.0, what="b leading x")
        b._core.can_take = lambda role, member, now: False  # type: ignore[attr-defined]
        with pytest.raises(elect.TransferRefused, match="no live member of that id contends"):
            b.transfer("x", "nobody")
    finally:
        for e in (a, b):
            e.stop()


def test_a_dropped_zookeeper_connection_ends_leadership_on_the_thread_that_hears_it(infra: Endpoints) -> None:
    """kazoo reports SUSPENDED on its connection thread while the lease loop may be waiting on a request: the
    leadership ends there and then, not when the loop gets to it (a woken ZooKeeper leader may expire the
    session on its stale clock; see cas_lease.zookeeper). The member leads again once it has renewed."""
    e = elect.connect(f"zookeeper://{infra.zookeeper[0]}/{unique('suspended')}?session_timeout={TTL}", ["x"],
                      member="a")
    fenced: list[object] = []
    e.subscribe(lambda event: fenced.append(event) if isinstance(event, elect.Fenced) else None)
    try:
        e.start()
        wait_until(lambda: e.leading() == {"x"}, 20.0, what="leading x")
        e._store_suspended()  # type: ignore[attr-defined]  # as kazoo's connection thread does
        assert not e.is_leader("x")  # at once, before the loop has seen the notice
        wait_until(lambda: fenced, 10.0, what="the Fenced event")
        wait_until(lambda: e.leading() == {"x"}, 20.0, what="leading x again after renewing")
    finally:
        e.stop()


def bare_store(scheme: str, infra: Endpoints, path: str, member: str) -> EtcdStore | ZooKeeperStore:
    """A lease store of `scheme` on the session's infrastructure, not opened: to drive by hand."""
    from cas_lease.etcd import EtcdStore
    from cas_lease.options import EtcdOptions, ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    if scheme == "etcd":
        return EtcdStore(EtcdOptions(endpoints=(infra.etcd[0],), prefix=path, ttl=TTL), member)
    return ZooKeeperStore(ZooKeeperOptions(hosts=(infra.zookeeper[0],), path=path, session_timeout=TTL), member)


@pytest.mark.parametrize("scheme", STORES)
def test_a_batch_of_role_actions_answers_each_on_its_own(scheme: str, infra: Endpoints) -> None:
    """A member takes hundreds of roles at once as one batch (etcd: one transaction of nested ones; ZooKeeper: one
    `multi`, halved where it is refused): each action succeeds or fails on its own, and one that another member
    got to first is answered with that member as the holder. etcd's batch goes past `--max-txn-ops` (128) by
    halving itself."""
    from cas_lease.driver import Outcome
    from cas_lease.model import Create, Delete, MemberRecord, RoleSeen
    from cas_lease.zookeeper import ZooKeeperStore

    roles = list(range(150))
    path = unique("batch")
    stores: list[EtcdStore | ZooKeeperStore] = []

    def store(member: str) -> EtcdStore | ZooKeeperStore:
        made = bare_store(scheme, infra, path, member)
        made.open(MemberRecord(member, frozenset(roles)), Listener(lambda seen: None), 10.0)
        stores.append(made)
        return made

    def last(outcome: Outcome) -> RoleSeen:
        answered, seen = outcome
        assert answered
        return [o for o in seen if isinstance(o, RoleSeen)][-1]

    def holder(outcome: Outcome) -> str | None:
        held = last(outcome).holder
        return None if held is None else held.member

    def seen_by(watcher: EtcdStore | ZooKeeperStore) -> bool:
        return not isinstance(watcher, ZooKeeperStore) or \
            all(watcher._held.get(r, (0, None, 0))[1] is not None for r in range(0, 150, 10))

    try:
        first, second = store("b"), store("a")
        taken = first.execute_batch([Create(r) for r in range(0, 150, 10)], 5.0)
        assert [holder(o) for o in taken] == ["b"] * 15
        wait_until(lambda: seen_by(second), 5.0, what="a's watches seeing b's roles")
        outcomes = second.execute_batch([Create(r) for r in roles], 5.0)
        assert [holder(o) for o in outcomes] == ["b" if r % 10 == 0 else "a" for r in roles]
        mine = [last(o) for o in outcomes if holder(o) == "a"]
        freed = second.execute_batch([Delete(o.role, o.holder.token) for o in mine if o.holder is not None], 5.0)
        assert [holder(o) for o in freed] == [None] * len(mine)
    finally:
        for made in stores:
            made.close(5.0)


@pytest.mark.parametrize("scheme", STORES)
def test_a_takeover_is_one_conditional_write_refused_once_the_holder_renewed(scheme: str, infra: Endpoints) -> None:
    """`Take`: a contender writes itself in place of a silent holder in one conditional write (an expiry and a
    create in one), so a dead member's roles cost the store one write each; its token is that write's revision,
    above the holder's. Once the holder's member entry has changed (it renewed: not silent after all) the same
    takeover is refused, and answered with what the store holds: the holder, and its member entry's new version."""
    from cas_lease.model import Create, MemberRecord, MemberSeen, Observation, Publish, RoleSeen, Snapshot, Take

    path = unique("take")
    stores: list[EtcdStore | ZooKeeperStore] = []
    seen: dict[str, list[Observation]] = {}

    def store(member: str) -> EtcdStore | ZooKeeperStore:
        made = bare_store(scheme, infra, path, member)
        seen[member] = []
        opened = made.open(MemberRecord(member, frozenset(range(4))), Listener(seen[member].append), 10.0)
        for o in opened.observations:  # what it saw at once, as later reports say it
            if isinstance(o, Snapshot):
                seen[member] += [MemberSeen(s, record, version, o.rev) for s, (record, version) in o.members.items()]
            else:
                seen[member].append(o)
        made.track(range(4))
        stores.append(made)
        return made

    def version_of(session: str) -> int:
        return max((o.version for o in list(seen["b"]) if isinstance(o, MemberSeen) and o.session == session),
                   default=0)

    def held(outcome: tuple[bool, list[Observation]]) -> RoleSeen:
        answered, observed = outcome
        assert answered
        return [o for o in observed if isinstance(o, RoleSeen)][-1]

    try:
        a, b = store("a"), store("b")
        created = [held(o) for o in a.execute_batch([Create(r) for r in range(4)], 5.0)]
        assert all(c.holder is not None and c.holder.member == "a" for c in created)
        wait_until(lambda: version_of(a.session) > 0 and all(
            any(isinstance(o, RoleSeen) and o.role == c.role and o.holder == c.holder for o in seen["b"])
            for c in created), 10.0, what="b seeing a's member entry and roles")
        version = version_of(a.session)
        taken = [held(o) for o in b.execute_batch([Take(c.role, c.holder, version) for c in created[:2]
                                                   if c.holder is not None], 5.0)]
        for before, after in zip(created, taken, strict=False):
            assert after.holder is not None and after.holder.member == "b", after
            assert before.holder is not None and after.holder.token > before.holder.token
        a.execute(Publish(MemberRecord("a", frozenset(range(4)))), 5.0)  # a is alive after all: its entry moves on
        refused = b.execute_batch([Take(c.role, c.holder, version) for c in created[2:] if c.holder is not None],
                                  5.0)
        for c, (answered, observed) in zip(created[2:], refused, strict=True):
            assert answered
            role = [o for o in observed if isinstance(o, RoleSeen)][-1]
            assert role.holder == c.holder, role  # still a's
            member = [o for o in observed if isinstance(o, MemberSeen)]
            assert member and member[-1].version > version, observed
    finally:
        for made in stores:
            made.close(5.0)


def test_a_zookeeper_member_watches_the_whole_group_with_one_request(infra: Endpoints) -> None:
    """One persistent recursive watch (ZooKeeper 3.6+) on the group's node, not a watch per node: a member starting
    in a new group of 500 roles asks a handful of requests (no node exists yet: nothing to read), and still hears of
    a role node another client creates, and of a member joining and leaving."""
    from kazoo.client import KazooClient

    from cas_lease.model import MemberRecord, MemberSeen, RoleSeen
    from cas_lease.names import encode_holder, encode_record, role_name
    from cas_lease.options import ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    address = infra.zookeeper[0]
    options = ZooKeeperOptions(hosts=(address,), path="/" + unique("onewatch"), session_timeout=TTL)
    seen: list[object] = []
    roles = frozenset(range(500))
    store = ZooKeeperStore(options, "watcher")
    store.open(MemberRecord("watcher", roles), Listener(seen.append), 10.0)
    other = KazooClient(hosts=address, timeout=4 * TTL)
    other.start(10)
    try:
        assert store.requests <= 12, store.requests  # paths, ACLs, the watch, two listings, its own node
        other.create(f"{options.root}/roles/{role_name(7)}", encode_holder("o", "feed"))
        wait_until(lambda: any(isinstance(o, RoleSeen) and o.role == 7 and o.holder is not None and
                               o.holder.member == "o" for o in seen), 10.0, what="the watcher seeing role 7 taken")
        member = f"{options.root}/members/{other.client_id[0]:x}"
        other.create(member, encode_record(MemberRecord("o", roles)), ephemeral=True)
        wait_until(lambda: any(isinstance(o, MemberSeen) and o.record is not None and o.record.member == "o"
                               for o in seen), 10.0, what="the watcher seeing a member join")
        other.delete(member)
        wait_until(lambda: any(isinstance(o, MemberSeen) and o.record is None for o in seen), 10.0,
                   what="the watcher seeing the member leave")
    finally:
        other.stop()
        other.close()
        store.close(5.0)


def test_a_zookeeper_member_reads_many_changed_nodes_in_few_requests(infra: Endpoints) -> None:
    """Thousands of role nodes change at once when a member stops or dies (its holder frees them, the survivors
    write them again): the watches' reads go many to one request (ZooKeeper's multiRead), so 400 nodes changed in
    one transaction cost a handful of requests, and each node is still seen as it is now. A multiRead answers each
    read on its own: a node that does not exist fails its read alone."""
    from kazoo.client import KazooClient

    from cas_lease.kazoo_wire import MultiRead, send
    from cas_lease.model import MemberRecord, RoleSeen
    from cas_lease.names import encode_holder, role_name
    from cas_lease.options import ZooKeeperOptions
    from cas_lease.zookeeper import ZooKeeperStore

    address = infra.zookeeper[0]
    options = ZooKeeperOptions(hosts=(address,), path="/" + unique("manyreads"), session_timeout=TTL)
    n = 400
    other = KazooClient(hosts=address, timeout=4 * TTL)
    other.start(10)
    other.ensure_path(f"{options.root}/roles")
    paths = [f"{options.root}/roles/{role_name(r)}" for r in range(n)]
    setup = other.transaction()
    for path in paths:
        setup.create(path, b"")
    setup.commit()
    seen: list[object] = []
    store = ZooKeeperStore(options, "reader")
    store.open(MemberRecord("reader", frozenset(range(n))), Listener(seen.append), 10.0)

    def holders() -> dict[int, str | None]:
        found: dict[int, str | None] = {}
        for o in list(seen):
            if isinstance(o, RoleSeen) and isinstance(o.role, int):
                found[o.role] = None if o.holder is None else o.holder.member
        return found

    try:
        wait_until(lambda: len(holders()) == n, 10.0, what="every role node read")
        before = store.requests
        change = other.transaction()
        for path in paths[1:]:
            change.set_data(path, encode_holder("o", "feed"))
        change.delete(paths[0])
        assert all(result is True or hasattr(result, "mzxid") for result in change.commit())
        wait_until(lambda: all(holders()[r] == "o" for r in range(1, n)), 10.0, what="every changed node seen")
        assert holders()[0] is None  # the deleted one: reported freed
        assert store.requests - before <= n // 10, store.requests - before
        answered = send(store.client, MultiRead([paths[1], paths[0], paths[2]]))
        first, missing, third = answered.get(timeout=10.0)
        assert first[0] == third[0] == encode_holder("o", "feed") and missing == MultiRead.NO_NODE
    finally:
        other.stop()
        other.close()
        store.close(5.0)
