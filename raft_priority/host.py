"""All election groups of one node behind one timer heap: routing by group id, lazy re-arming.

Still pure (time comes in as ``now``). A driver with 1000 groups keeps a single wake-up at
:meth:`NodeHost.next_wakeup`; each group has at most one live heap entry, re-armed only when its
next tick moves *earlier* (a follower's steady heartbeats push it later and cost no heap operation: the
old entry fires, the tick finds nothing due and re-arms at the new one).

With quiescence (``RaftConfig.quiesce``) the host also runs the node links (`raft_priority.links`): one
`NodeBeat` per peer node per heartbeat interval, answered by a `NodeBeatAck`, and the watch on them that wakes
quiet groups (a leader's node silent for the election timeout, its process restarted, digests that disagree;
a follower's acks missing for half the lease window). Its link timers use the same lazy heap entries.

The node's `Interest` (which partitions it wants, its `max_roles` cap) is applied here too: its standing in each
group, and every quarter election timeout the hand-off of groups it leads but should not, from `tick`.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable
from dataclasses import replace

from elect.budget import HandoverBudget
from elect.core import Ready
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.interest import Interest, Standing, standing_of
from raft_priority.links import Links
from raft_priority.membership import CLUSTER, Layout, Membership, sticky_primaries
from raft_priority.messages import NODE, Conf, ConfNews, HardState, Heartbeat, Message, NodeBeat, NodeBeatAck

INF = math.inf


class NodeHost:
    """The groups one node is a member of: the node's `elect.core.Core`.

    Every group writes into the host's one accumulator, so :meth:`ready` hands over what all of them
    produced (``persist`` keyed by group) without merging per-group output.
    """

    __slots__ = ("_acc", "_add", "_beat_due", "_budget", "_followed", "_greet", "_heap", "_leaving", "_link_heap",
                 "_link_scheduled", "_members", "_peers", "_remove", "_scheduled", "_stored", "_told", "changed",
                 "cluster", "config", "groups", "interest", "layout", "links", "node", "rng")

    def __init__(self, node: str, config: RaftConfig, rng: random.Random, max_roles: int | None = None) -> None:
        self.node = node
        self.config = config
        self.rng = rng
        self.groups: dict[int, RaftGroup] = {}
        self._acc: Ready[Message, HardState] = Ready()
        self._heap: list[tuple[float, int]] = []
        self._scheduled: dict[int, float] = {}
        self._budget = HandoverBudget(config.rebalance_limit, config.rebalance_window)  # shared by every group
        # node links (quiescence only; drawn only then, so a run without it replays as before)
        self.links = Links(rng.getrandbits(62) if config.quiesce else 0)
        self._peers: dict[str, None] = {}  # peer nodes, in the order groups named them
        self._greet: dict[str, float] = {}  # peer -> until when this node beats it unasked (`_meet`)
        self._beat_due = INF
        self._link_heap: list[tuple[float, str, bool]] = []  # (due, peer, leader side?)
        self._link_scheduled: dict[tuple[str, bool], float] = {}
        self.interest = Interest(config.election_timeout, max_roles)
        # membership (`join_cluster`): the cluster group, and what this node asked of it or, leading it, was asked
        self.cluster: RaftGroup | None = None
        self.layout: Layout | None = None
        self._followed: tuple[int, int] | None = None
        self._stored: dict[int, HardState] = {}
        self._add: dict[str, str] = {}
        self._remove: set[str] = set()
        self._leaving: set[int] = set()
        self._members: frozenset[str] = frozenset()  # of the cluster configuration followed last
        self._told: dict[str, float] = {}  # node -> when it was last sent the committed configuration (`ConfNews`)
        self.changed: set[int] = set()
        """Partitions whose group this node began or stopped hosting since the driver last cleared it."""

    def add_group(self, spec: GroupSpec, now: float, hard_state: HardState | None = None) -> RaftGroup:
        if spec.group in self.groups:
            raise ValueError(f"group {spec.group} already hosted")
        g = RaftGroup(spec, self.node, self.config, self.rng, now, hard_state, self._acc, self._budget, self.links)
        self.groups[spec.group] = g
        self._meet(g.peers, now)
        if self.config.quiesce and self._beat_due == INF and self._peers:
            self._beat_due = now
        self._arm(g)
        return g

    def _meet(self, peers: Iterable[str], now: float) -> None:
        """Note peer nodes named for the first time; with quiescence, greet each with a `NodeBeat` of this
        incarnation until it acks (for ET at most). A node that has just started leads nothing its peers follow,
        so nothing else would tell them it is back, and a quiet group whose leader counted it dead would hear it
        only at its first vote request, ET later (raft's hand-back after a rolling restart waited for that)."""
        greet = self.config.quiesce
        for p in peers:
            if p not in self._peers:
                self._peers[p] = None
                if greet:
                    self._greet[p] = now + self.config.election_timeout
                    self._beat_due = min(self._beat_due, now)

    # ------------------------------------------------------------------ membership

    def join_cluster(self, layout: Layout, first: Conf, now: float, states: dict[int, HardState]) -> None:
        """Host the cluster group and the partitions its configuration gives this node. ``first``: the cluster's
        configuration as this node is given it (the static `peers` form, the same on every first member), or, for a
        node joining a running cluster, one that makes it a learner only; a persisted one wins either way.
        ``states``: what this node persisted, for every group it may come to host."""
        self.layout = layout
        self._stored = dict(states)
        stored = states.get(CLUSTER)
        hs = stored if stored is not None and stored.conf is not None else HardState(
            stored.term if stored else 0, stored.voted_for if stored else None, first)
        # never quiet (its heartbeats are what a joining node hears first), and no rebalancing between equals
        loud = replace(self.config, quiesce=False, rebalance=False)
        g = RaftGroup(GroupSpec(CLUSTER, {self.node: 1}), self.node, loud, self.rng, now, hs, self._acc,
                      HandoverBudget(None, 1.0), Links(0))
        self.cluster = g
        self.groups[CLUSTER] = g
        self._meet(g.peers, now)
        self._arm(g)
        for gid, kept in sorted(states.items()):
            if gid != CLUSTER and kept.conf is not None and kept.conf.votes_in(self.node):
                # whatever the membership says now, a group whose own configuration counts this node may need its
                # vote (to finish a change under way): hosted until that configuration lets it go (`_drop_left`)
                self.add_group(GroupSpec(gid, dict(kept.conf.voters)), now, self._stored.pop(gid))
                self.changed.add(gid)
        self._follow(now, force=True)

    def membership(self) -> tuple[Conf, bool] | None:
        """The cluster group's latest configuration, and whether it is committed (None: no cluster group)."""
        c = self.cluster
        if c is None:
            return None
        return c.conf, c.committed == c.conf.position

    def reconfigure(self, now: float, add: dict[str, str] | None = None, remove: set[str] | None = None) -> str | None:
        """Ask for members to be added (id -> HOST:PORT; a known id with a new address moves it) or removed. Taken
        when this node leads the cluster group (None returned), which then makes the changes one committed entry at a
        time; otherwise the leader this node knows of is returned ('' when none), to ask there. Asking again for
        what is under way, or done, changes nothing."""
        c = self.cluster
        if c is None or c.state is not RaftState.LEADER:
            return (c.leader or "") if c is not None else ""
        self._add.update(add or {})
        self._remove |= remove or set()
        for m in remove or ():
            self._add.pop(m, None)
        self._manage(now)
        return None

    def _follow(self, now: float, force: bool = False) -> None:
        """After every step: the partitions follow the cluster group's committed configuration, and its leader
        works through what it was asked."""
        c = self.cluster
        if c is None:
            return
        if c.state is RaftState.LEADER and (self._add or self._remove):
            self._manage(now)
        pos = c.committed
        if not force and (pos == self._followed or pos != c.conf.position or c.conf.joint):
            self._drop_left(now)
            return
        if c.conf.joint or not isinstance(c.conf.payload, Membership):
            return
        self._followed = pos
        self._members = frozenset(c.conf.members())
        layout = self.layout
        assert layout is not None
        table = layout.table(list(c.conf.voters), c.conf.payload)
        for p, prios in enumerate(table):
            g = self.groups.get(p)
            if self.node in prios and g is None:
                stored = self._stored.pop(p, None)
                first = HardState(stored.term if stored else 0, stored.voted_for if stored else None,
                                  Conf(voters={}, learners=(self.node,)))
                hs = stored if stored is not None and stored.conf is not None else first
                if c.conf.position == (0, 0) and (stored is None or stored.conf is None):
                    # the static form: every first member derives this same table from the same first membership, so
                    # it may be the group's first entry; once the membership has changed, a new group is a learner
                    # until its leader's entry reaches it (a table derived later is no agreement: seed 3945)
                    hs = HardState(hs.term, hs.voted_for, None)
                g = self.add_group(GroupSpec(p, prios), now, hs)
                self.changed.add(p)
            if g is not None:
                g.set_target(Conf(voters=prios), now)
                self._arm(g)
                if self.node not in prios:
                    self._leaving.add(p)
        self._drop_left(now)

    def _tell(self, peer: str, now: float) -> None:
        """Send ``peer`` the committed cluster configuration, at most once per election timeout: it leads a group
        here while the cluster no longer has it, so it has missed the entries that left it out (it was down when
        they were made) and would lead on to an old target."""
        c = self.cluster
        if c is None or c.committed != c.conf.position:
            return
        if now < self._told.get(peer, -INF) + self.config.election_timeout:
            return
        self._told[peer] = now
        self._acc.messages.append(ConfNews(CLUSTER, self.node, peer, 0, c.conf))

    def _on_news(self, m: ConfNews, now: float) -> None:
        """A committed cluster configuration from another node: taken if later than this node's."""
        c = self.cluster
        if c is None or m.conf is None or m.conf.position <= c.conf.position:
            return
        c.learn_committed(m.conf, now)
        self._arm(c)

    def _drop_left(self, now: float) -> None:
        """Groups of partitions this node is no longer given, once it neither leads them (a leader hands over first)
        nor votes in their configuration."""
        if not self._leaving:
            return
        for gid in list(self._leaving):
            g = self.groups.get(gid)
            if g is None or g.target is None or self.node in g.target.voters:
                self._leaving.discard(gid)
            elif g.state is not RaftState.LEADER and not g.conf.votes_in(self.node):
                # only once the group's own configuration no longer counts it: until then its vote may be what the
                # group needs to leave a joint configuration
                self.remove_group(gid, now)
                self._leaving.discard(gid)
                self.changed.add(gid)

    def _manage(self, now: float) -> None:
        """The cluster group's leader: the next entry for what it was asked, once the last one is committed. A new
        node is a learner until it holds the leader's configuration, then a voter with its share of primaries."""
        c = self.cluster
        assert c is not None
        conf = c.conf
        if c.committed != conf.position or conf.joint or not isinstance(conf.payload, Membership):
            return
        voters = set(conf.voters)
        addresses = conf.payload.address_map()
        moved = {m: a for m, a in self._add.items() if addresses.get(m) != a}
        learners = set(conf.learners)
        done_add = {m for m in self._add if m in voters and m not in moved}
        for m in done_add:
            del self._add[m]
        self._remove -= {m for m in self._remove if m not in voters and m not in learners}
        if not self._add and not self._remove:
            if set(addresses) - voters - learners:  # a removed node's address, kept while it was outgoing
                c.set_target(conf.next(conf.term, payload=Membership.of(
                    {m: a for m, a in addresses.items() if m in voters or m in learners}, conf.payload.primaries)),
                    now)
            return
        new = [m for m in self._add if m not in voters]
        if moved or any(m not in learners for m in new):  # addresses first: new nodes as learners
            addresses.update(moved)
            c.set_target(conf.next(conf.term, learners=tuple(sorted(learners | set(new))),
                                   payload=Membership.of(addresses, conf.payload.primaries)), now)
            return
        live = now - self.config.election_timeout
        ready = [m for m in new if c.conf_acked.get(m) == conf.position and c.heard.get(m, -INF) >= live]
        going = self._remove & voters
        if not ready and not going:
            return  # the learners are not caught up yet
        after = (voters | set(ready)) - going
        if not after:
            return
        layout = self.layout
        assert layout is not None
        primaries = sticky_primaries(conf.payload.primaries, sorted(after), dict(layout.weights) or None)
        c.set_target(conf.next(conf.term, voters={m: 1 for m in sorted(after)},
                               learners=tuple(sorted(learners - set(ready) - going)),
                               payload=Membership.of(addresses, primaries)), now)

    def remove_group(self, group: int, now: float) -> None:
        """Leave a group (a leader resigns first so its successor need not wait a timeout)."""
        g = self.groups.get(group)
        if g is not None:
            g.resign(now)
            g.wake(now)  # out of the links' digests
            del self.groups[group]
            self._scheduled.pop(group, None)
            self.interest.roles.pop(group, None)

    def step(self, msg: Message, now: float) -> None:
        self.step_all((msg,), now)

    def step_all(self, msgs: Iterable[Message], now: float) -> None:
        """Handle messages addressed to this node: the groups' first, then the node links' (a batch's change
        of a group's quiet state comes before the digests that reflect it)."""
        groups, node = self.groups, self.node
        links: list[Message] | None = None
        members = self._members
        for msg in msgs:
            g = groups.get(msg.group)
            if g is not None and msg.dst == node:
                if type(msg) is ConfNews:
                    self._on_news(msg, now)
                    continue
                if members and type(msg) is Heartbeat and msg.src not in members:
                    self._tell(msg.src, now)  # a leader the cluster no longer has acts on an older configuration
                g.step(msg, now)
                self._arm(g)
            elif msg.group == NODE and msg.dst == node:
                if links is None:
                    links = []
                links.append(msg)
        if links is not None:
            for msg in links:
                if type(msg) is NodeBeat:
                    self._acc.messages.append(self._on_beat(msg, now))
                elif type(msg) is NodeBeatAck:
                    self._on_beat_ack(msg, now)
        if self.links.fresh:
            self._schedule_links(now)
        if self.cluster is not None:
            self._follow(now)

    def beat(self, m: NodeBeat, now: float) -> NodeBeatAck | None:
        """A batch that is one `NodeBeat`: ``step_all([m], now)`` in effect. Between nodes whose quiet groups agree
        (the beat's incarnation known, its digest equal to ours) the only answer is the ack and nothing else
        changes (no group wakes, no timer moves): the ack is then returned instead of accumulated, so a driver
        sends it without taking a `Ready` or re-arming its timer -- at 100 nodes nearly every message is a beat
        or its ack. Otherwise None, everything accumulated as `step_all` would. Call it with nothing accumulated
        (right after taking the last `Ready`), so that the ack is all this step produced."""
        links, peer = self.links, m.src
        if (m.dst == self.node and links.incarnation_of.get(peer) == m.incarnation and not links.fresh
                and m.digest == links.follow_digest.get(peer, 0)):
            return self._on_beat(m, now)
        self.step_all((m,), now)
        return None

    def beat_ack(self, m: NodeBeatAck, now: float) -> bool:
        """A batch that is one `NodeBeatAck`: ``step_all([m], now)`` in effect. True when it only counted (its
        digest agrees with ours: nothing to send, no timer moved), so a driver need neither take a `Ready` nor
        re-arm; else False, handled as `step_all` would."""
        links = self.links
        if (m.dst == self.node and m.incarnation == links.incarnation and not links.fresh
                and m.digest == links.lead_digest.get(m.src, 0)):
            self._on_beat_ack(m, now)
            return True
        self.step_all((m,), now)
        return False

    def tick(self, now: float) -> None:
        """Tick every group whose next tick is at or before ``now``, the node links, and the interest."""
        if self.config.quiesce:
            self._tick_links(now)
        if now >= self.interest.next_due:
            self._hand_over_all_unwanted(now)
        heap, scheduled, groups = self._heap, self._scheduled, self.groups
        while heap and heap[0][0] <= now:
            at, gid = heapq.heappop(heap)
            if scheduled.get(gid) != at:
                continue  # stale entry
            del scheduled[gid]
            g = groups[gid]
            g.tick(now)
            self._arm(g)
        if self.links.fresh:
            self._schedule_links(now)
        if self.cluster is not None:
            self._follow(now)

    def next_wakeup(self) -> float:
        heap, scheduled = self._heap, self._scheduled
        at = INF
        while heap:
            at, gid = heap[0]
            if scheduled.get(gid) == at:
                break
            heapq.heappop(heap)
            at = INF
        if self.config.quiesce:
            links, sched = self._link_heap, self._link_scheduled
            while links:
                due, peer, side = links[0]
                if sched.get((peer, side)) == due:
                    break
                heapq.heappop(links)
            if links and links[0][0] < at:
                at = links[0][0]
            if self._beat_due < at:
                at = self._beat_due
        return min(at, self.interest.next_due)

    def has_ready(self) -> bool:
        return bool(self._acc)

    def ready(self) -> Ready[Message, HardState]:
        return self._acc.take()

    def resign(self, group: int, now: float) -> None:
        g = self.groups[group]
        g.resign(now)
        self._arm(g)

    def transfer(self, group: int, to: str | None, now: float, pin: bool = False) -> bool:
        g = self.groups[group]
        ok = g.transfer_leadership(to, now, pin)
        self._arm(g)
        return ok

    def hand_over(self, group: int, now: float, to: str | None = None, pin: bool = False) -> None:
        """Stop leading `group`, if this node leads it: a transfer to `to` (else to the best live successor,
        `Interest.best_successor`) or, with nobody to take it, a resignation."""
        g = self.groups[group]
        if g.state is not RaftState.LEADER or not g.serving:
            return
        target = to if to is not None else self.interest.best_successor(g, now)
        if target is None or not self.transfer(group, target, now, pin):
            self.resign(group, now)

    def set_log_position(self, group: int, last_index: int, last_term: int, now: float | None = None) -> None:
        g = self.groups[group]
        g.set_log_position(last_index, last_term, now)
        self._arm(g)

    def set_roles(self, group: int, count: int, now: float) -> None:
        """This node contends for `count` roles on `group`'s partition: its standing there follows (`Interest`)."""
        if group not in self.groups:
            return
        interest = self.interest
        interest.roles[group] = count
        self._publish(group, now)
        if interest.next_due == INF and interest.active():
            interest.next_due = now

    def recount(self, now: float) -> None:
        """Which partitions to leave to nodes below their cap, as leaderships stand now (`Interest.recount`)."""
        for p in self.interest.recount(self.groups, now):
            self._publish(p, now)

    def standing(self, group: int, peer: str) -> Standing | None:
        """`peer`'s standing in `group` as this node (its leader) last heard it; None: not heard yet."""
        return standing_of(self.groups[group], peer)

    def _publish(self, group: int, now: float) -> None:
        """Tell the group's peers how much this node wants its partition (`Standing`)."""
        self.set_log_position(group, *self.interest.standing(group).position, now)

    def hand_over_unwanted(self, group: int, now: float) -> None:
        """Hand `group` to a follower if this node leads it but should not (`Interest.successor`): the elector's, once
        the Revoked callbacks of the roles it removed there returned."""
        g = self.groups.get(group)
        if g is None or not g.is_leader(now) or g.transfer_to is not None:
            return
        found = self.interest.successor(g, group, now)
        if found is not None:
            to, over = found
            if g.transfer_leadership(to, now) and over:
                g.budget.spend(now)
            self._arm(g)

    def _hand_over_all_unwanted(self, now: float) -> None:
        """Groups this node leads without a role there go to a follower that has one; those beyond its cap to one
        below its own, within the rebalancing budget."""
        interest = self.interest
        interest.next_due = now + self.config.election_timeout / 4 if interest.active() else INF
        self.recount(now)
        for g, to, over in interest.unwanted(self.groups, now):
            if g.transfer_leadership(to, now) and over:
                g.budget.spend(now)
            self._arm(g)

    def leading(self, now: float) -> list[int]:
        return [gid for gid, g in self.groups.items() if g.is_leader(now)]

    # ------------------------------------------------------------------ node links

    def _tick_links(self, now: float) -> None:
        links = self.links
        if now >= self._beat_due:  # to the peers following a group of ours quietly (or answering quiet)
            msgs, node, inc, digest = self._acc.messages, self.node, links.incarnation, links.lead_digest
            for p, led in links.led.items():
                if led:
                    msgs.append(NodeBeat(NODE, node, p, 0, now, inc, digest.get(p, 0)))
            if self._greet:
                for p, until in list(self._greet.items()):
                    if until < now:
                        del self._greet[p]  # not there: it will hear of this node the usual ways when it comes
                    elif not links.led.get(p):
                        msgs.append(NodeBeat(NODE, node, p, 0, now, inc, digest.get(p, 0)))
            self._beat_due = now + self.config.heartbeat_interval
        heap, sched = self._link_heap, self._link_scheduled
        patience, et = self._ack_patience, self.config.election_timeout
        while heap and heap[0][0] <= now:
            due, peer, leading = heapq.heappop(heap)
            if sched.get((peer, leading)) != due:
                continue
            del sched[(peer, leading)]
            if leading:
                if not links.led.get(peer):
                    continue
                again = links.acked.get(peer, due - patience) + patience
                if again <= now:
                    links.silent_at[peer] = now  # dead to quiescence until it answers (`RaftGroup._live_peers`)
                    self._wake_led(peer, now)  # a follower's node stopped acking: its groups heartbeat again
                    continue
            else:
                if not links.followers.get(peer):
                    continue
                again = links.heard.get(peer, due - et) + et
                if again <= now:
                    self._wake_followers(peer, now, notify=False)  # the leader's node fell silent: time them
                    continue
            sched[(peer, leading)] = again  # alive: due again later
            heapq.heappush(heap, (again, peer, leading))

    @property
    def _ack_patience(self) -> float:
        return self.config.lease_window / 2

    def _schedule_links(self, now: float) -> None:
        """One lazy timer per peer and side while any group is quiet with it, armed when its first group goes
        quiet (a timer that fires while its link is alive re-arms itself at the new due time). It counts from now
        at the earliest: the quiet exchange that just happened was itself word from that node, whose link may not
        have been heard (acked) yet, or not since it was last silent (a node back from the dead, whose last ack
        would fire the timer at once and wake its groups again, for ever)."""
        links, sched, heap = self.links, self._link_scheduled, self._link_heap
        if not links.fresh:
            return
        for peer, leading in links.fresh:
            if leading and self._beat_due == INF:
                # the first group led quietly: beats start now. `add_group` starts them only for a group that names
                # peers when added, and a joining node's partitions are added before they have any: without this its
                # quiet groups' leases rested on node acks no beat ever asked for, and lapsed
                self._beat_due = now
            if (peer, leading) in sched:
                continue
            if leading:
                due = max(links.acked.get(peer, now), now) + self._ack_patience
            else:
                due = max(links.heard.get(peer, now), now) + self.config.election_timeout
            sched[(peer, leading)] = due
            heapq.heappush(heap, (due, peer, leading))
        links.fresh.clear()

    def _on_beat(self, m: NodeBeat, now: float) -> NodeBeatAck:
        """Note a peer's beat; the ack to send back."""
        links, peer = self.links, m.src
        known = links.incarnation_of.get(peer)
        if known != m.incarnation:
            if known is not None:
                self._wake_followers(peer, now, notify=False)  # restarted: it leads nothing it led before
                links.mismatch_in[peer] = 0
            self._wake_naming(peer, now)
        links.incarnation_of[peer] = m.incarnation
        if now > links.heard.get(peer, -INF):
            links.heard[peer] = now
        if m.digest != links.follow_digest.get(peer, 0):
            misses = links.mismatch_in.get(peer, 0) + 1
            if misses >= 2:  # not a change in flight: the leader stepped down or woke a group, unheard
                self._wake_followers(peer, now, notify=True)
                misses = 0
            links.mismatch_in[peer] = misses
        else:
            links.mismatch_in[peer] = 0
        return NodeBeatAck(NODE, self.node, peer, 0, m.sent_at, m.incarnation, links.follow_digest.get(peer, 0))

    def _on_beat_ack(self, m: NodeBeatAck, now: float) -> None:
        links, peer = self.links, m.src
        if m.incarnation != links.incarnation:
            return
        if self._greet:
            self._greet.pop(peer, None)
        if m.digest == links.lead_digest.get(peer, 0):
            links.ack(peer, m.echo)
            links.mismatch_out[peer] = 0
            return
        misses = links.mismatch_out.get(peer, 0) + 1
        if misses >= 3:  # the follower left groups quiet here without a word (or the word was lost)
            self._wake_led(peer, now)
            misses = 0
        links.mismatch_out[peer] = misses

    def _wake_followers(self, peer: str, now: float, notify: bool) -> None:
        groups = self.groups
        for gid in list(self.links.followers.get(peer, ())):
            g = groups[gid]
            g.wake(now, notify)
            self._arm(g)

    def _wake_naming(self, peer: str, now: float) -> None:
        """Wake every quiet group this node leads that names ``peer``, a node new or started again: it follows none
        of them yet, and their heartbeats are how it catches up and how its hand-back hysteresis starts."""
        for g in self.groups.values():
            if g.quiet and g.state is RaftState.LEADER and peer in g.targets:
                g.wake(now)
                self._arm(g)

    def _wake_led(self, peer: str, now: float) -> None:
        groups = self.groups
        for gid in list(self.links.led.get(peer, ())):
            g = groups[gid]
            g.wake(now)
            self._arm(g)

    def _arm(self, g: RaftGroup) -> None:
        d = g.next_tick
        if d < self._scheduled.get(g.group, INF):
            self._scheduled[g.group] = d
            heapq.heappush(self._heap, (d, g.group))
