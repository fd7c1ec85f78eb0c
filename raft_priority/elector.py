"""The `raft://` elector: one Raft election group per partition over static peers, talking gRPC.

    raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002,c@127.0.0.1:7003&partitions=6&priority=balanced

Roles map onto partitions (:func:`elect.roles.partition_of`); the member that leads a partition's group
leads every role of that partition it contends for, with the group's Raft term as the fencing token.

How it keeps the contract:

* **Exclusive** (check-quorum leases): a leader's lease ends ``0.9 ET`` after the send time of the last
  heartbeat round a majority acknowledged; no successor can be elected before that (voters refuse
  votes within the lease). Each leadership's deadline is the lease (renewed in quanta of ET/4, always
  at or before the core's lease end), so a frozen or cut-off leader reports not-leader on its own
  clock, at once, and emits ``Fenced`` first when it wakes.
* **Graceful handover**: ``stop()``, ``resign()`` and ``remove_roles()`` publish ``Revoked``, wait for
  the callbacks, and only then hand the partition over with a TimeoutNow transfer to the next-priority
  live node; rebalancing transfers hold their TimeoutNow back the same way. ``transfer(role, to=b)`` does
  the same towards ``b``, with a pinned TimeoutNow: ``b`` then does not rebalance the group back while it leads.
* **Interest**: a node contends for a partition only while it contends for a role on it. Its `Standing`
  (`raft_priority.interest`) carries that through the election core's log-position hook: voters
  never elect a less "up to date" candidate, so a node with no role on a partition can vote there but
  cannot win it while an interested node is reachable, and a leader that lost interest hands over
  to an interested follower.
* **Weights and caps**: `weights` (cluster-wide) shape the priority table, so a node of weight 2 is the
  primary of twice as many partitions and leads them while it lives (`raft_priority.priorities`). `max_roles`
  is a third level of interest, `Standing.CAPPED`: between the two, so a node at its cap cannot win a
  partition while a node below its cap (interested) is reachable, but beats a node with no role there, and wins
  when no interested node can (the cap is soft, as elsewhere). Which partitions a node leaves to others, and
  the hand-off of those it leads beyond its cap or without a role, are decided in the node's core
  (`raft_priority.interest`, applied by `NodeHost`), so the simulator runs them as well.

Roles that share a partition move together; a member that removes one role of a partition it leads
while it still contends for another role there revokes the removed role and keeps the partition.

Observation (`observe`): the leader of a role's partition group as this node hears it in heartbeats (the core's
``Ready.seen``), None once its election timer ran out or while it campaigns. A node leads a partition's group
but not a role it does not contend for, and hands such a group to a node that does within a quarter election
timeout; until then it is reported as the role's leader (heartbeats do not say what the leader contends for).
Renewal (`metrics`): when a role's deadline moves, the age of the heartbeat round a majority acknowledged (for the
quiet partitions, whose leaderships share one deadline per peer set: of the node beat, once per shared renewal).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import cast

from elect.base import BaseElector
from elect.contract import Characteristics, Drained
from elect.core import Acquire, ExtendShared, Fence, Ready, Revoke
from elect.driver import Driver, FunctionIO, Halted
from elect.errors import ConfigError, InfrastructureUnavailable, NotLeader, TransferRefused
from elect.roles import Role, partition_of
from elect.runtime import THREADS, Runtime
from raft_priority.config import RaftConfig
from raft_priority.core import RaftState
from raft_priority.grpc_link import Tls, Transport
from raft_priority.host import NodeHost
from raft_priority.interest import Standing, wants
from raft_priority.membership import Layout, Membership, initial
from raft_priority.messages import Conf, HardState, Message
from raft_priority.options import RaftOptions, parse_peer
from raft_priority.outbox import Outbox
from raft_priority.priorities import assign_priorities
from raft_priority.renewals import Renewals
from raft_priority.storage import HardStateLog, StateStore

log = logging.getLogger("elect.raft")

Action = Callable[[float], None]


@dataclass
class _Handover:
    """Revoked callbacks in flight for one partition, and what to do once they returned."""

    group: int
    waiting: list[threading.Event]
    deadline: float
    action: Action | None  # None: release the group's held TimeoutNow


def raft_config(options: RaftOptions) -> RaftConfig:
    """The election core's configuration for these options."""
    et, hb = options.election_timeout, options.heartbeat
    switches = {"pre_vote": options.pre_vote, "check_quorum": options.check_quorum, "quiesce": options.quiesce}
    if options.priority == "off":
        return RaftConfig.stock(election_timeout=et, heartbeat_interval=hb, election_jitter=options.election_jitter,
                                max_drift=options.max_drift, **switches)
    return RaftConfig(
        election_timeout=et,
        heartbeat_interval=hb,
        **switches,
        max_drift=options.max_drift,
        priority_mode="zeebe",
        fast_failover=options.uses_fast_failover,
        decay_interval=options.decay_round,
        rebalance=options.uses_rebalance,
        rebalance_hysteresis=options.rebalance_hysteresis if options.rebalance_hysteresis is not None else 3 * et,
        rebalance_limit=options.rebalance_limit,
        rebalance_window=options.rebalance_window if options.rebalance_window is not None else 10 * et,
        retry_jitter=0.1 if options.improvements else 0.0,
    )


class RaftElector(BaseElector):
    """One node of a raft:// cluster (see the module docstring)."""

    scheme = "raft"
    resume = True  # `Renewals(resume=...)`: False only to show, in simulation, what resuming prevents
    renewal = ("age in seconds of the heartbeat round (for quiet partitions: the node beat) a majority acknowledged, "
               "the lease's evidence, when a led partition's deadline moves on (once for all the quiet partitions "
               "sharing a deadline)")

    def __init__(self, options: RaftOptions, member: str, roles: tuple[Role, ...], *, runtime: Runtime = THREADS,
                 rng: random.Random | None = None) -> None:
        options.check_member(member)
        super().__init__(member, roles, runtime=runtime)
        self._rng = rng or random.Random()  # the election core's (seeded in the simulator)
        self.options = options
        self.revoke_timeout = options.revoke_timeout
        self.nodes = options.nodes(member)
        self.replication = options.replication_for(len(self.nodes))
        self.config = raft_config(options)
        self.assignment = assign_priorities(self.nodes, options.partitions, self.replication, options.strategy,
                                            options.weight_map() or None)
        self.cluster = options.wire_id(member)
        self._by_part: dict[int, list[Role]] = {}
        for role in self._roles:
            self._by_part.setdefault(partition_of(role, options.partitions), []).append(role)
        self.host: NodeHost | None = None
        self.driver: Driver[Message, Message, HardState] | None = None
        self._outbox: Outbox | None = None
        self._store: StateStore | None = None
        self.transport: Transport | None = None
        # driver-thread state
        self._renewals: Renewals | None = None
        self._handovers: list[_Handover] = []
        self._stopping = False
        self._linked: Conf | None = None  # the cluster configuration the transport's links were last set from
        # the addresses this node was given for its peers (URL peers, or join): how it reaches them, whatever the
        # configuration says (behind NAT, a proxy or the harness's relays, each node sees its peers elsewhere); the
        # configuration's addresses reach the members it was not given
        self._given: dict[str, str] = {}
        self._joiner: threading.Thread | None = None
        self._leave = False
        self._closing = threading.Event()  # set once stopping: the joining thread gives up
        self.left: dict[str, object] | None = None  # the configuration that left this node out (`leave`)

    # ------------------------------------------------------------------ contract

    @property
    def characteristics(self) -> Characteristics:
        o, et = self.options, self.options.election_timeout
        slack = 0.25 * et
        if o.priority == "off":
            # first timeout in [ET, ET + jitter), one more round for a split vote (not a hard bound: duels
            # repeat)
            failover = 2 * et + self.config.jitter + slack
        else:
            # one ET to notice, then decay rounds down to the lowest-priority live member: all RF - 1 of
            # them in ZEP006; with fast failover the succession skips members known dead, so only a
            # member that died with the leader costs a (short) round
            rounds = max(self.replication - 2, 0) if o.uses_fast_failover else max(self.replication - 1, 0)
            failover = et + rounds * self.config.decay_round + slack
        if not o.check_quorum:  # a cut-off leader leads on until it hears a newer term: no bound on overlap
            return Characteristics(exclusive=False, max_overlap=None, max_failover=round(failover, 3),
                                   graceful_handover=True, token="raft term of the role's partition",
                                   notes="check_quorum=off: no leader lease", observes_leaders=True, transfers=True,
                                   weights=o.priority == "balanced")
        return Characteristics(exclusive=True, max_overlap=0.0, max_failover=round(failover, 3),
                               graceful_handover=True, token="raft term of the role's partition",
                               observes_leaders=True, transfers=True, weights=o.priority == "balanced",
                               max_drift=o.max_drift)  # the leader's lease is W / (1 + max_drift): RaftConfig

    def _on_start(self) -> None:
        o = self.options
        try:
            store = HardStateLog(o.state_dir(self.member), self.member)
            states = store.load_all()  # damage no crash could leave: StateUnreadable, naming the file and line
        except OSError as exc:
            raise ConfigError(f"cannot keep Raft state in {o.state_dir(self.member)}: {exc.strerror or exc}",
                              parameter="data_dir") from None
        if o.join:
            self.cluster, addresses = self._learn_cluster(store)
            first = Conf(voters={}, learners=(self.member,))
        else:
            addresses = {self.member: o.listen, **o.peer_map()}
            self._refuse_other_peer_sets(addresses)
            first = self._first_members(addresses)
        addresses = self._begin(store, states, first, addresses)
        driver = self._require_driver()
        peers = {m: a for m, a in addresses.items() if m != self.member}
        transport = Transport(self.member, o.listen, peers, self.cluster, driver.receive,
                              election_timeout=o.election_timeout, tls=self._tls(), admin=self._admin)
        self.transport = transport
        try:
            transport.start()
        except OSError as exc:
            transport.stop(0)
            raise InfrastructureUnavailable(f"raft://{self.member}: {exc}") from exc
        driver.start()
        mine = addresses.get(self.member)
        if o.join or (mine is not None and mine != o.listen):
            # a new node asks to be added; one that moved asks for its new address (the cluster leader does both)
            self._joiner = threading.Thread(target=self._ask_to_join, name=f"raft-join-{self.member}", daemon=True)
            self._joiner.start()

    def _begin(self, store: StateStore, states: dict[int, HardState], first: Conf,
               addresses: dict[str, str]) -> dict[str, str]:
        """The node's host joins the cluster from its kept state and its first configuration, with its renewals,
        outbox and driver (not started: `_on_start` starts it with the transport, the simulator turns it); the
        addresses it knows its members by."""
        o = self.options
        host = NodeHost(self.member, self.config, self._rng, max_roles=o.max_roles)
        now = self._clock()
        layout = Layout(o.partitions, o.replication, o.strategy, tuple(o.weight_map().items()))
        self._given = {m: a for m, a in addresses.items() if m != self.member}
        host.join_cluster(layout, first, now, states)
        stored = host.membership()
        if stored is not None and isinstance(stored[0].payload, Membership):
            # what this node was given (its URL, or the members it just asked) is newer than what it kept; a member
            # that moved says so itself (`_ask_to_join`), and the configuration follows
            addresses = {**stored[0].payload.address_map(), **addresses}
        self.host = host
        self._renewals = Renewals(self.member, host, self._roles_on, self._renewed, resume=self.resume)
        host.recount(now)
        for p in host.groups:
            self._set_interest(p, now)
        self._store, self._outbox = store, Outbox(host, self._send, ack_delay=o.acks_after)
        io = FunctionIO(apply=self._on_ready, send=lambda messages, now: self._require_outbox().send(messages, now),
                        halted=self._on_halted, persist=self._persist, idle=self._on_idle)
        self.driver = Driver(host, io, name=f"raft-driver-{self.member}", granularity=o.granularity,
                             clock=self._clock, wake=self._wake_loop())
        return addresses

    def _first_members(self, addresses: Mapping[str, str]) -> Conf:
        """The first configuration of a cluster of these members (every first member computes the same)."""
        o = self.options
        membership, _ = initial(dict(addresses), o.partitions, o.replication, o.strategy, o.weight_map() or None)
        return Conf(voters=dict.fromkeys(sorted(addresses), 1), payload=membership)

    def _wake_loop(self) -> Callable[[], None] | None:
        """What the driver calls when something is queued for it (None: its own thread waits on its inbox)."""
        return None

    # ------------------------------------------------------------------ membership

    def members(self, timeout: float = 5.0) -> dict[str, object]:
        """The cluster's configuration as this node holds it: ``{"version": N, "term": T, "committed": bool,
        "leader": ID|None, "members": [{"id", "address", "voter"}]}`` (voters of both halves while a change is
        joint; learners are not voters)."""
        return self._require_driver().call(self._members_now, timeout)

    def reconfigure(self, add: Mapping[str, str] | None = None, remove: Iterable[str] = (),
                    timeout: float = 30.0) -> dict[str, object]:
        """Add members (id -> HOST:PORT; a member's id with a new address moves it) and remove members, through
        whichever node leads the cluster group; returns the committed configuration once it shows the change.
        ConfigError for a request the cluster refused, InfrastructureUnavailable when it is not committed in
        ``timeout``."""
        from raft_priority import admin

        for m, a in (add or {}).items():
            if parse_peer(f"{m}@{a}") is None:
                raise ConfigError(f"cannot add {m!r} at {a!r}: expected an id and HOST:PORT", parameter="add")
        return admin.reconfigure(self.options.listen, dict(add or {}), list(remove), timeout, self._tls(),
                                 self.member)

    def _members_now(self, now: float) -> dict[str, object]:
        state = self._host().membership()
        assert state is not None
        conf, committed = state
        addresses = conf.payload.address_map() if isinstance(conf.payload, Membership) else {}
        voters = [*conf.voters, *(m for m in (conf.old or ()) if m not in conf.voters)]
        cluster = self._host().cluster
        return {"version": conf.index, "term": conf.term, "committed": committed, "cluster": self.cluster,
                "leader": cluster.leader if cluster is not None else None,
                "members": [{"id": m, "address": addresses.get(m), "voter": True} for m in voters]
                + [{"id": m, "address": addresses.get(m), "voter": False} for m in conf.learners if m not in voters]}

    def _admin(self, request: dict[str, object]) -> dict[str, object]:
        """A membership request from `raft_priority.admin` (a gRPC thread): answered from the driver's state."""
        driver = self._require_driver()
        op = request.get("op")
        if op == "members":
            static = None if self.options.join else sorted([f"{self.member}@{self.options.listen}",
                                                            *self.options.peers])
            return {**driver.call(self._members_now, 5.0), "static": static}
        if op != "reconfigure":
            return {"error": f"unknown op {op!r} (members, reconfigure)"}
        if request.get("cluster") != self.cluster:
            return {"error": f"this node is of cluster {self.cluster}, not {request.get('cluster')!r}"}
        add, remove = request.get("add") or {}, request.get("remove") or []
        if not (isinstance(add, dict) and all(isinstance(a, str) and parse_peer(f"{m}@{a}") for m, a in add.items())):
            return {"error": f"add must map ids to HOST:PORT, got {add!r}"}
        if not (isinstance(remove, list) and all(isinstance(m, str) for m in remove)):
            return {"error": f"remove must list ids, got {remove!r}"}

        def ask(now: float) -> tuple[str | None, dict[str, object]]:
            return self._host().reconfigure(now, dict(add), set(remove)), self._members_now(now)

        leader, conf = driver.call(ask, 5.0)
        answer: dict[str, object] = {"members": conf}
        if leader is not None:
            where = {m["id"]: m["address"] for m in cast("list[dict[str, str]]", conf["members"])}
            answer.update(leader=leader or None, address=where.get(leader) if leader else None)
        return answer

    def _tls(self) -> Tls | None:
        o = self.options
        return Tls.load(o.ca, o.cert, o.key) if o.ca and o.cert and o.key else None

    def _learn_cluster(self, store: HardStateLog) -> tuple[str, dict[str, str]]:
        """A joining node: its cluster's wire name and members, from the file it kept or from a running member."""
        from raft_priority import admin

        kept = store.dir / "cluster"
        if kept.is_file():
            return kept.read_text().strip(), dict(self.options.join_map())
        errors: list[str] = []
        for peer, address in self.options.join_map().items():
            try:
                info = admin.members(address, self.options.election_timeout * 5, self._tls(), peer)
            except (InfrastructureUnavailable, ConfigError) as exc:
                errors.append(str(exc))
                continue
            cluster = str(info["cluster"])
            kept.write_text(cluster + "\n")
            found = {str(m["id"]): str(m["address"]) for m in cast("list[dict[str, str]]", info["members"])
                     if m.get("address")}
            return cluster, found
        raise InfrastructureUnavailable(f"raft://{self.member}: no member to join answered: {'; '.join(errors)}")

    def _refuse_other_peer_sets(self, addresses: Mapping[str, str]) -> None:
        """A first member whose `peers` differ from a running peer's would count other majorities: refuse at once,
        naming both sets (a peer not up yet is asked when it starts, by itself)."""
        from raft_priority import admin

        mine = sorted(f"{m}@{a}" for m, a in addresses.items())
        for peer, address in self.options.peer_map().items():
            try:
                info = admin.ask(address, {"op": "members"}, 1.0, self._tls(), peer, wait=False)
            except InfrastructureUnavailable:
                continue
            theirs = info.get("static")
            if isinstance(theirs, list) and sorted(theirs) != mine and info.get("cluster") != self.cluster:
                raise ConfigError(
                    f"raft://{self.member}: the first members disagree about the cluster: this node was given "
                    f"{', '.join(mine)}; {peer} at {address} was given {', '.join(sorted(theirs))}. Give every first "
                    f"member the same peers (or start this node with join= to join {peer}'s cluster)",
                    parameter="peers")

    def _ask_to_join(self) -> None:
        """Until the committed configuration has this node as a voter at its address (or it stops): ask."""
        from raft_priority import admin

        me = {self.member: self.options.listen}
        while not self._closing.is_set():
            places = {**self.options.join_map(), **self._known_addresses()}
            places.pop(self.member, None)
            for peer, address in places.items():
                if self._closing.is_set():
                    return
                try:
                    admin.reconfigure(address, me, [], 10 * self.options.election_timeout, self._tls(), peer)
                    return
                except (InfrastructureUnavailable, ConfigError) as exc:
                    log.info("raft://%s: joining through %s: %s", self.member, peer, exc)
            self._closing.wait(self.options.election_timeout)  # nobody answered: try the others again

    def _known_addresses(self) -> dict[str, str]:
        try:
            members = cast("list[dict[str, str]]", self.members()["members"])
        except Exception:  # stopping
            return {}
        return {m["id"]: m["address"] for m in members if m.get("address")}

    def _follow_membership(self) -> None:
        """Driver thread, after each turn: the transport's links follow the cluster configuration's addresses, and
        partitions this node began to host get its interest."""
        host = self._host()
        state = host.membership()
        if state is not None and state[0] is not self._linked and isinstance(state[0].payload, Membership):
            self._linked = state[0]
            transport = self.transport
            if transport is not None:
                addresses = state[0].payload.address_map()
                addresses.update(self._given)
                # keep links to peers any hosted group still names (an outgoing voter's address leaves first)
                for g in host.groups.values():
                    for m in g.targets:
                        if m not in addresses and m in transport.links:
                            addresses[m] = transport.links[m].address
                transport.set_peers({m: a for m, a in addresses.items() if m != self.member})
        if host.changed:
            now = self._clock()
            for p in sorted(host.changed):
                if p in host.groups:
                    self._set_interest(p, now)
                    for role in self._roles_on(p):
                        g = host.groups[p]
                        self._saw(role, g.leader, g.term)
            host.changed.clear()

    def _send(self, batches: Mapping[str, list[Message]]) -> None:
        if self.transport is not None:
            self.transport.send(batches)

    def _on_stop(self, timeout: float | None) -> None:
        self._closing.set()
        driver, transport = self.driver, self.transport
        if driver is None or transport is None:
            return
        o = self.options
        began = time.monotonic()
        overall = began + (o.revoke_timeout + o.handover + 1 if timeout is None else timeout)
        try:
            if driver.halted is not None:
                return  # nothing more is driven (`_on_halted` fenced everything)
            driver.call(self._begin_stop, timeout=5)
            # 1. the Revoked callbacks of every led partition return (bounded by revoke_timeout) ...
            self._poll_driver(lambda now: not self._handovers, overall)
            # 2. ... then successors take over (bounded by handover_timeout: if every node is stopping at
            # once, partitions would bounce between them; nobody waits for that)
            self._poll_driver(self._handed_over, min(overall, time.monotonic() + o.handover))
        except Exception as exc:  # stopping must finish whatever happened
            log.warning("raft://%s: graceful handover incomplete: %s", self.member, exc)
        finally:
            driver.stop()
            transport.stop()
            if self._store is not None:
                self._store.close()

    def _poll_driver(self, done: Callable[[float], bool], deadline: float) -> bool:
        driver = self._require_driver()
        while True:
            if driver.call(done, timeout=5):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)  # poll the driver thread's state; the deadline bounds the wait

    def _on_resign(self, role: Role) -> None:
        driver = self._require_driver()
        p = partition_of(role, self.options.partitions)
        dones = driver.call(lambda now: self._hand_over(p, now), timeout=10)
        self._wait_callbacks(dones)

    def _on_transfer(self, role: Role, to: str) -> None:
        """Refuse at once what cannot change (not leading, not a replica); give a target that has not answered
        this term's heartbeats yet (it just started, or its link is reconnecting) up to an election timeout."""
        driver = self._require_driver()
        p = partition_of(role, self.options.partitions)
        where = f"raft://{self.member}: cannot transfer {role!r} (partition {p}) to {to!r}"

        def begin(now: float) -> list[threading.Event] | str:
            g = self._host().groups.get(p)
            if g is None or g.state is not RaftState.LEADER or not g.serving or p in self._giving_up:
                raise NotLeader(f"{where}: this node does not lead the partition now")
            if to not in g.peers:
                raise TransferRefused(f"{where}: not a replica of the partition (its replicas: "
                                      f"{', '.join(sorted((self.member, *g.peers)))})")
            if g.last_heard(to) < now - self.options.election_timeout:
                return "not heard from within an election timeout"
            if not self._wants(p, to):
                return "it contends for no role on the partition"
            return self._hand_over(p, now, to, pin=True)

        limit = time.monotonic() + self.options.election_timeout
        while isinstance(begun := driver.call(begin, timeout=10), str):
            if time.monotonic() >= limit:
                raise TransferRefused(f"{where}: {begun}")
            time.sleep(0.02)  # the target's next heartbeat ack changes the answer; the limit bounds the wait
        self._wait_callbacks(begun)

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        P = self.options.partitions
        with self._lock:
            for role in added:
                self._by_part.setdefault(partition_of(role, P), []).append(role)
            for role in removed:
                roles = self._by_part.get(partition_of(role, P), [])
                if role in roles:
                    roles.remove(role)
        driver = self._require_driver()
        dones = driver.call(lambda now: self._apply_roles(added, removed, now), timeout=10)
        self._wait_callbacks(dones)

    def leave(self, timeout: float | None = None) -> Drained:
        """`drain`, and between the handover and the stop, remove this node from the cluster's configuration (through
        whichever node leads the cluster group): the others then count their majorities without it. `left` holds the
        committed configuration that no longer names it (None if the removal was not committed in time: the node is
        then stopped as by `drain`, still a member, and `elect raft remove` finishes the job)."""
        self._leave = True
        return self.drain(timeout)

    def _on_drain(self) -> bool:
        """Stop's first half: Revoked, callbacks and workers done, TimeoutNow to the next-priority live node;
        the node stays up to hear the winner's heartbeats (`_successors`). Leaving, it is removed next."""
        driver = self._require_driver()
        driver.call(self._begin_stop, timeout=5)
        self._poll_driver(lambda now: not self._handovers, time.monotonic() + self.options.revoke_timeout + 1)
        if self._leave:
            try:
                self.left = self.reconfigure(remove=[self.member], timeout=10 * self.options.election_timeout + 5)
            except (ConfigError, InfrastructureUnavailable) as exc:
                log.warning("raft://%s: could not leave the configuration: %s", self.member, exc)
        return True

    def _successors(self, roles: frozenset[Role]) -> dict[Role, str | None]:
        """The leader of each role's partition group as this node hears it: the transfer target once it won.
        None when no peer it heard within an election timeout contends for the partition."""
        P = self.options.partitions

        def look(now: float) -> dict[Role, str | None]:
            groups = self._host().groups
            live = now - self.options.election_timeout
            seen: dict[Role, str | None] = {}
            for role in roles:
                p = partition_of(role, P)
                g = groups.get(p)
                if g is None:
                    continue
                if g.leader is not None and g.leader != self.member:
                    seen[role] = g.leader
                elif not any(g.last_heard(peer) >= live and self._wants(p, peer) for peer in g.peers):
                    seen[role] = None
            return seen

        return self._require_driver().call(look, timeout=5)

    def _on_lapsed(self, role: Role) -> None:
        driver = self.driver
        if driver is not None and self.running:
            driver.post(lambda now: self._lapsed(role, now))

    # ------------------------------------------------------------------ introspection (tests, tools)

    def leaders(self, timeout: float = 5.0) -> dict[int, str | None]:
        """Per partition this node is a member of: the leader it knows of (itself included)."""
        driver = self._require_driver()
        return driver.call(lambda now: {p: g.leader for p, g in self._host().groups.items()}, timeout)

    def stats(self, timeout: float = 5.0) -> dict[str, int]:
        driver = self._require_driver()
        t = self.transport
        assert t is not None
        return {"iterations": driver.iterations, "inbox_dropped": driver.dropped, "received": t.received,
                "rejected": t.rejected, "sent_batches": sum(lk.sent for lk in t.links.values()),
                "link_dropped": sum(lk.dropped for lk in t.links.values())}

    # ------------------------------------------------------------------ driver-thread callbacks

    def _on_ready(self, ready: Ready[Message, HardState], now: float) -> None:
        """Apply each change of a partition's group to every role of that partition. The core emits no
        Extend: `Renewals` renews the deadlines from the groups' leases."""
        for c in ready.changes:
            if isinstance(c, ExtendShared):
                continue  # a Raft core renews through `Renewals`, never by this change
            p = cast(int, c.role)  # a Raft core's role is its group: the partition
            roles = self._roles_on(p)
            if isinstance(c, Acquire):
                if self._stopping or p in self._giving_up:
                    self._giving_up.add(p)
                    self._handovers.append(_Handover(p, [], now, self._transfer_action(p, None)))
                    continue
                for role in roles:
                    self._take(role, p, c.token, c.deadline, now)
            elif isinstance(c, Revoke):
                waiting = [d for role in roles if (d := self._revoke_role(role)) is not None and not d.is_set()]
                if waiting:
                    self._require_outbox().hold(p)
                    self._handovers.append(_Handover(p, waiting, now + self.options.revoke_timeout, None))
            elif isinstance(c, Fence):
                for role in roles:
                    self._forget(role)
                    self._fence(role, until=c.until)
        for seen in ready.seen:
            for role in self._roles_on(cast(int, seen.role)):
                self._saw(role, seen.leader, seen.token)
        if ready.changes:
            self._host().recount(now)

    def _on_halted(self, error: Exception) -> None:
        """The node stopped (its term and vote could not be persisted, or a turn failed): its leaderships end now,
        fenced, since no heartbeat of its will renew them and, without check_quorum, nothing else would end them."""
        for role in self.leading():
            self._forget(role)
        self._failed(str(error) if isinstance(error, Halted) else f"its driver failed: {error!r}")

    def _persist(self, states: dict[Role, HardState]) -> None:
        """Term and vote to the node's `HardStateLog` (`StateStore`), before anything of that Ready is sent
        (`elect.driver`)."""
        store = self._store
        assert store is not None
        try:
            store.save(cast("dict[int, HardState]", states))  # the host's roles are group ids
        except OSError as exc:
            raise Halted(f"cannot persist term and vote in {store}: {exc}") from exc

    def _on_idle(self, now: float) -> float:
        """After each turn: handovers whose callbacks returned, the sweep; acknowledgements and released
        TimeoutNows that are due go out (the elector closes the transport and the log once the driver stopped)."""
        if self._handovers:
            self._run_handovers(now)
        self._follow_membership()
        next_sweep = self._renewing().tick(now)
        self._apply_renewals(now)
        extra = now + 0.01 if self._handovers else next_sweep
        return min(extra, self._require_outbox().send_due(now))

    # ------------------------------------------------------------------ internals (driver thread)

    def _host(self) -> NodeHost:
        assert self.host is not None
        return self.host

    def _require_outbox(self) -> Outbox:
        assert self._outbox is not None
        return self._outbox

    def _require_driver(self) -> Driver[Message, Message, HardState]:
        if self.driver is None:
            raise RuntimeError("raft elector not started")
        return self.driver

    def _wants(self, p: int, peer: str, at_least: Standing = Standing.CAPPED) -> bool:
        """`peer` contends for a role on partition `p` (`at_least` as keen), as this node last heard it."""
        return wants(self._host().groups[p], peer, at_least)

    @property
    def _giving_up(self) -> set[int]:
        """Partitions whose handover this node began (Revoked first, then the transfer): the host's `Interest`
        leaves them out of its counts and hand-offs."""
        return self._host().interest.giving_up

    def _roles_on(self, p: int) -> list[Role]:
        with self._lock:
            return list(self._by_part.get(p, ()))

    def _set_interest(self, p: int, now: float) -> None:
        """Tell the host how many roles this node contends for on partition ``p`` (its standing follows)."""
        self._host().set_roles(p, len(self._roles_on(p)), now)

    def _renewing(self) -> Renewals:
        assert self._renewals is not None
        return self._renewals

    def _take(self, role: Role, p: int, term: int, lease: float, now: float) -> None:
        self._renewing().take(role, p, term, lease)
        self._apply_renewals(now)

    def _apply_renewals(self, now: float) -> None:
        """What `Renewals` decided, applied as every core's changes are; one that came too late (the leadership had
        lapsed) is a lapse, as its deadline timer's would be."""
        for change in self._renewing().take_changes():
            if not self._apply_change(change) and not isinstance(change, ExtendShared):
                self._lapsed(change.role, now)

    def _forget(self, role: Role) -> None:
        """Stop renewing the leadership of `role` (it ended, or starts again)."""
        self._renewing().forget(role)

    def _revoke_role(self, role: Role) -> threading.Event | None:
        """Begin the orderly end of `role`'s leadership (`Revoked`): no sweep renews it from here on."""
        self._forget(role)
        return self._begin_revoke(role)

    def _wait_callbacks(self, dones: list[threading.Event]) -> None:
        if self._dispatcher.on_dispatch_thread():
            return
        limit = time.monotonic() + self.options.revoke_timeout
        for done in dones:
            done.wait(max(0.0, limit - time.monotonic()))

    def _hand_over(self, p: int, now: float, to: str | None = None, pin: bool = False) -> list[threading.Event]:
        """Driver-initiated handover of partition ``p``: Revoked, wait for callbacks, then transfer (to ``to`` if
        named, pinned there if ``pin``)."""
        host = self._host()
        g = host.groups.get(p)
        if g is None or g.state is not RaftState.LEADER:
            return []
        dones = [d for role in self._roles_on(p) if (d := self._revoke_role(role)) is not None]
        self._giving_up.add(p)
        self._handovers.append(_Handover(p, [d for d in dones if not d.is_set()], now + self.options.revoke_timeout,
                                         self._transfer_action(p, to, pin)))
        return dones

    def _transfer_action(self, p: int, to: str | None, pin: bool = False) -> Action:
        def act(now: float) -> None:
            if not self._stopping:
                self._giving_up.discard(p)
            self._host().hand_over(p, now, to, pin)

        return act

    def _run_handovers(self, now: float) -> None:
        still: list[_Handover] = []
        for h in self._handovers:
            if now < h.deadline and not all(d.is_set() for d in h.waiting):
                still.append(h)
                continue
            if h.waiting and not all(d.is_set() for d in h.waiting):
                log.warning("raft://%s: Revoked callbacks of partition %d still running after %gs; handing over",
                            self.member, h.group, self.options.revoke_timeout)
            if h.action is None:
                self._require_outbox().release(h.group)
            else:
                h.action(now)
        self._handovers = still

    def _apply_roles(self, added: tuple[Role, ...], removed: tuple[Role, ...], now: float) -> list[threading.Event]:
        host = self._host()
        P = self.options.partitions
        touched = {partition_of(r, P) for r in (*added, *removed)}
        host.recount(now)
        for p in touched:
            self._set_interest(p, now)
        for role in added:
            p = partition_of(role, P)
            g = host.groups.get(p)
            if g is not None:
                self._saw(role, g.leader, g.term)  # observers of a new role start from what the node knows
            if g is not None and g.is_leader(now) and p not in self._giving_up and not self._stopping:
                self._take(role, p, g.term, g.lease_until, now)
        dones: list[threading.Event] = []
        for role in removed:
            done = self._revoke_role(role)
            if done is not None:
                dones.append(done)
        for p in touched:
            g = host.groups.get(p)
            if (g is not None and host.interest.uninterested(p) and g.state is RaftState.LEADER and g.serving
                    and p not in self._giving_up):
                waiting = [d for d in dones if not d.is_set()]
                self._giving_up.add(p)
                self._handovers.append(_Handover(p, waiting, now + self.options.revoke_timeout,
                                                 self._interest_action(p)))
        return dones

    def _interest_action(self, p: int) -> Action:
        def act(now: float) -> None:
            self._giving_up.discard(p)
            self._host().hand_over_unwanted(p, now)

        return act

    def _lapsed(self, role: Role, now: float) -> None:
        """A leadership's deadline passed on this node's clock while the core may still lead."""
        p = partition_of(role, self.options.partitions)
        if self._renewing().lapsed(role, p, now):
            self._hand_over(p, now)

    def _begin_stop(self, now: float) -> None:
        self._stopping = True
        self._renewing().stopping = True
        for p, g in self._host().groups.items():
            if g.state is RaftState.LEADER and p not in self._giving_up:
                self._hand_over(p, now)

    def _handed_over(self, now: float) -> bool:
        if self._handovers:
            return False
        return all(g.state is not RaftState.LEADER for g in self._host().groups.values())


def create(options: RaftOptions, member: str, roles: tuple[Role, ...]) -> RaftElector:
    return RaftElector(options, member, roles)
