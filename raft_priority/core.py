"""The pure Raft election state machine of one group on one node, with ZEP006 priority decay.

No sockets, threads, sleeps, clocks or hidden randomness: time comes in as ``now`` (seconds, one
monotonic clock per node) and randomness from the injected ``random.Random``, so the same code runs in
a real process and in the deterministic simulator. There is no replicated log: the application may
supply its log position (:meth:`RaftGroup.set_log_position`) so only an up-to-date member wins.

Leases (check-quorum on): a leader's lease ends ``W / (1 + max_drift)`` after the send time of the newest
heartbeat round a majority acknowledged (``W = lease_window``, ``leader_lease``). A voter that heard a leader,
or granted a vote, refuses every non-forced (pre-)vote for ``W`` from then, and a restarted member with a past
term refuses every (pre-)vote for ``W`` after start, forced ones too: it may have acknowledged the abandonment of
the transfer a late forced vote answers, and that is not persisted. Any later leader needs one of those voters, so
it cannot be elected before the old lease ends: an ``Acquire`` never precedes the previous leader's ``Revoke`` or
its ``Fence``'s ``until`` while no voter's clock runs more than ``1 + max_drift`` times as fast as the leader's.

Transfers (TimeoutNow) bypass leases, so the leader revokes first and only then lets the TimeoutNow
go. If the transfer does not finish, the leader abandons it, announces the abandonment in its
heartbeats (voters then refuse that transfer's forced votes), and re-acquires only once a majority has
acknowledged a heartbeat sent after the abandonment.

Quiescence (``RaftConfig.quiesce``): an idle group whose followers all answered a quiesce heartbeat stops
heartbeating; its node links carry its liveness and lease instead (`raft_priority.links`, with the argument
why leases stay as safe). Any other message for the group wakes it at the receiving end.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from enum import Enum, IntEnum

from elect.budget import HandoverBudget
from elect.core import Acquire, Fence, LeaderSeen, Ready, Revoke
from raft_priority.config import GroupSpec, RaftConfig
from raft_priority.links import Links, quiet_key
from raft_priority.messages import (
    Conf,
    HardState,
    Heartbeat,
    HeartbeatResponse,
    Message,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)

INF = math.inf


class RaftState(IntEnum):
    """Where a member stands in its group's election (not `elect.Role`, which names what is led)."""

    FOLLOWER = 0
    PRE_CANDIDATE = 1
    CANDIDATE = 2
    LEADER = 3


class Pin(Enum):
    """An operator's transfer (a pinned TimeoutNow) as this node's group lives it: its target does not rebalance the
    group back to a higher-priority member while it leads by it."""

    NONE = "no pin"
    ASKED = "campaigning on a pinned TimeoutNow"
    HELD = "leading by an operator's transfer"


class RaftGroup:
    """One member's view of one election group. Feed it messages and ticks; read ``next_tick``.

    Driver contract (`elect.core`): whatever :meth:`step` / :meth:`tick` and the commands produce
    accumulates in the ``ready`` given at construction (a node's groups share one, so the host hands
    over one `Ready` and no step allocates one); handle what :meth:`ready` takes (persist, then
    leadership changes, then send) and call :meth:`tick` again at or after ``next_tick``. Calling
    ``tick`` early is harmless, so a driver may keep one lazy timer entry per group and only re-arm it
    when ``next_tick`` moved earlier.

    Leadership changes name the group as their role and the term as token. An ``Acquire``'s deadline
    is the lease end at that moment (math.inf without check-quorum); the lease then moves on with every
    acknowledged heartbeat round without an ``Extend`` (one per round per group would cost a node of
    1000 groups more than the round itself): a driver that needs it reads :attr:`lease_until`.
    """

    __slots__ = (
        "_lease",
        "_priorities",
        "_shared_key",
        "acc",
        "acks",
        "budget",
        "campaign_due",
        "cfg",
        "closed",
        "committed",
        "conf",
        "conf_acked",
        "contact",
        "departed",
        "elected_at",
        "first_timeout",
        "group",
        "halves",
        "hb_due",
        "healthy_since",
        "heard",
        "leader",
        "learners",
        "lease_span",
        "links",
        "log_index",
        "log_term",
        "max_priority",
        "next_tick",
        "node",
        "peer_priority",
        "peers",
        "pending",
        "pin",
        "positions",
        "prioritized",
        "priority",
        "qkey",
        "quiet",
        "quiet_peers",
        "quorum",
        "quorum_ack",
        "refuse_votes_until",
        "restarted_until",
        "resume_from",
        "retry_at",
        "rng",
        "round",
        "serving",
        "simple",
        "state",
        "succession",
        "target",
        "targets",
        "term",
        "timeout_sent",
        "transfer_closed",
        "transfer_due",
        "transfer_pin",
        "transfer_seq",
        "transfer_to",
        "vote_sent_at",
        "voted_for",
        "voter",
        "votes",
        "window",
        "yield_until",
    )

    def __init__(
        self,
        spec: GroupSpec,
        node: str,
        config: RaftConfig,
        rng: random.Random,
        now: float,
        hard_state: HardState | None = None,
        ready: Ready[Message, HardState] | None = None,
        budget: HandoverBudget | None = None,
        links: Links | None = None,
    ) -> None:
        hs = hard_state or HardState()
        if hs.conf is None and node not in spec.priorities:
            raise ValueError(f"{node!r} is not a member of group {spec.group}")
        # a persisted configuration may have left this node out: it then hears, answers and never campaigns
        conf = hs.conf if hs.conf is not None else Conf(voters=dict(spec.priorities))
        self.group = spec.group
        self.node = node
        self.cfg = config
        self.rng = rng
        self.acc: Ready[Message, HardState] = ready if ready is not None else Ready()
        # rebalancing handovers are rate-limited per node: a host passes every group the same budget
        self.budget = budget if budget is not None else HandoverBudget(config.rebalance_limit, config.rebalance_window)
        self.state = RaftState.FOLLOWER
        self.committed = conf.position  # a group's first configuration is agreed by being given to every member
        self.target: Conf | None = None
        self.pending = False
        self.conf_acked: dict[str, tuple[int, int] | None] = {}
        # members the leader's entries left out, until they answer a heartbeat sent once the latest was committed
        # (from the time in the value on)
        self.departed: dict[str, float] = {}
        self.acks: dict[str, float] = {}
        self.heard: dict[str, float] = {}
        self.healthy_since: dict[str, float] = {}
        self.positions: dict[str, tuple[int, int]] = {}
        self._use_conf(conf)
        self.prioritized = config.priority_mode == "zeebe"
        self.window = config.lease_window if config.check_quorum else INF  # how long a voter refuses votes
        self.lease_span = config.leader_lease if config.check_quorum else INF  # how long a quorum ack leases
        # the node links' quorum a quiet lease rests on: (the followers that answered quiet, in one order for all
        # groups; how many of them make a quorum with this node), set when the group goes quiet (`_note_quiet`)
        self._shared_key: tuple[tuple[str, ...], int] | None = None
        self.term = hs.term
        self.voted_for = hs.voted_for
        self.leader: str | None = None
        self.log_index = 0
        self.log_term = 0
        # follower timer: the first timeout after ``contact``, then decay rounds
        self.contact = now
        self.round = 0
        self.retry_at = INF
        self.yield_until = -INF  # priority mode: this round is left to a higher-priority peer campaigning until then
        self.first_timeout = self._draw_first_timeout()
        self.succession: tuple[int, ...] = ()
        # a restarted member may have acked a leader just before it went down: honour that lease, against a stale
        # transfer's forced votes too (`_on_vote`)
        self.refuse_votes_until = now + config.lease_window if (config.check_quorum and hs.term > 0) else -INF
        self.restarted_until = self.refuse_votes_until
        self.closed = 0
        # candidate
        self.votes: set[str] = set()
        self.campaign_due = INF
        self.vote_sent_at = now
        # leader
        self.elected_at = -INF
        self.quorum_ack = -INF
        self._lease = -INF
        self.serving = False
        self.hb_due = INF
        self.transfer_to: str | None = None
        self.transfer_seq = 0
        self.transfer_closed = 0
        self.transfer_due = INF
        self.timeout_sent = False
        self.transfer_pin = False
        # an operator's transfer overrides rebalancing while its target leads (see transfer_leadership)
        self.pin = Pin.NONE
        self.resume_from = INF
        # quiescence: a leader with every follower quiet sends no heartbeats; a quiet follower times its
        # leader's node link (the host's `links`) instead of the group
        self.links = links if links is not None else Links(0)
        self.quiet = False
        self.quiet_peers: set[str] = set()
        self.qkey = 0
        self.next_tick = INF
        self._refresh_next_tick()

    # ------------------------------------------------------------------ public API

    def step(self, msg: Message, now: float) -> None:
        """Handle one message addressed to this member of this group."""
        if self.quiet and not self._keeps_quiet(msg):
            self.wake(now, notify=msg.src != self.leader)
        if self.state is RaftState.LEADER:
            self._check_lease(now)
        _HANDLERS[type(msg)](self, msg, now)
        self._refresh_next_tick()

    def tick(self, now: float) -> None:
        """Advance timers to ``now``: election timeouts, decay rounds, heartbeats, lease, transfer."""
        if self.quiet:  # nothing is timed per group (a lazy timer entry may still fire)
            self._refresh_next_tick()
            return
        state = self.state
        if state is RaftState.LEADER:
            self._leader_tick(now)
        elif state is RaftState.FOLLOWER:
            self._follower_tick(now)
        elif now >= self.campaign_due:
            self._campaign(now)
        self._refresh_next_tick()

    def set_log_position(self, last_index: int, last_term: int, now: float | None = None) -> None:
        """The application's log position; votes go only to candidates at least as up to date. A quiet follower
        whose position changes wakes and tells its leader (its heartbeat answers carry the position); ``now``
        is needed for that."""
        changed = (last_index, last_term) != (self.log_index, self.log_term)
        self.log_index = last_index
        self.log_term = last_term
        if changed and self.quiet and now is not None and self.state is not RaftState.LEADER:
            self.wake(now, notify=True)

    def last_heard(self, peer: str) -> float:
        """When this leader last heard ``peer``: its answers to this group, or while the group is quiet its node
        link's acks (their send time: a little early, never late)."""
        heard = self.heard.get(peer, -INF)
        if self.quiet:
            acked = self.links.acked.get(peer, -INF)
            if acked > heard:
                return acked
        return heard

    def transfer_leadership(self, to: str | None, now: float, pin: bool = False) -> bool:
        """Hand leadership to ``to`` (None: the best live, caught-up follower). False if impossible.

        ``pin``: an operator asked for this member; it does not rebalance the group back to a higher priority
        while it leads (the next failover restores the priorities' say)."""
        if self.quiet:
            self.wake(now)
        if self.state is RaftState.LEADER:
            self._check_lease(now)
        if self.state is not RaftState.LEADER or not self.serving or self.transfer_to is not None:
            return False
        if to is None:
            live = now - self.cfg.election_timeout
            to = next((p for p in self.peers if self.heard[p] >= live and self._caught_up(p)), None)
        if to is None or to not in self.heard:
            return False
        self.serving = False
        self.acc.changes.append(Revoke(self.group, f"transfer to {to}"))
        self.transfer_seq += 1
        self.transfer_to = to
        self.transfer_pin = pin
        self.transfer_due = now + self.cfg.transfer_deadline
        self.timeout_sent = False
        if self._caught_up(to):
            self._send_timeout_now()
        self._refresh_next_tick()
        return True

    def resign(self, now: float) -> None:
        """Give leadership up: transfer if a follower can take it, else step down and stay back."""
        if self.state is not RaftState.LEADER or not self.serving:
            return
        if not self.transfer_leadership(None, now):
            self._step_down(now, "resign")
            # let the others elect first (their timeouts run out within ET + jitter); take it back only if
            # nobody did
            self.retry_at = now + self.cfg.election_timeout + self.cfg.jitter
        self._refresh_next_tick()

    def campaign(self, now: float) -> None:
        """Start an election now (tests, or an operator); ignored while leading."""
        if self.quiet:
            self.wake(now)
        if self.state is not RaftState.LEADER:
            self._campaign(now)
            self._refresh_next_tick()

    def ready(self) -> Ready[Message, HardState]:
        """Take everything produced since the last call (of every group sharing the accumulator)."""
        return self.acc.take()

    # ------------------------------------------------------------------ membership

    def set_target(self, target: Conf | None, now: float) -> None:
        """The configuration this group should reach (its voters and priorities, learners, payload; its position is
        ignored). Whoever leads it gets there one committed entry at a time (`_advance`): new voters join as learners
        and are made voters once they hold the leader's configuration; voters change through a joint configuration;
        a leader that is not among the new voters hands over before the joint one is left. None: stay."""
        self.target = target
        self.pending = target is not None or self.conf.joint
        if self.state is RaftState.LEADER:
            if self.quiet:
                self.wake(now)
            self._advance(now)
            self._refresh_next_tick()

    @property
    def settled(self) -> bool:
        """One voter set that includes this member, no learners, and the latest configuration committed."""
        return self.simple and not self.learners and self.committed == self.conf.position

    def at_target(self) -> bool:
        """The configuration is the target (voters, priorities, learners, payload), committed and not joint."""
        t, c = self.target, self.conf
        if c.joint or self.committed != c.position:
            return False
        return t is None or (dict(t.voters) == dict(c.voters) and set(t.learners) == set(c.learners)
                             and t.payload == c.payload)

    def _use_conf(self, conf: Conf) -> None:
        """Make ``conf`` this member's configuration: whom it counts, heartbeats and asks for votes. Raft uses the
        latest configuration a member holds, committed or not. An entry of the same members as the current one (a new
        leader's own, a follower adopting it: nearly every entry) only takes its place."""
        current: Conf | None = getattr(self, "conf", None)  # (none yet while the group is made)
        if current is not None and current.same_members(conf):
            self.conf = conf
            return
        before: set[str] = self.conf.members() if self.state is RaftState.LEADER else set()
        self.conf = conf
        node = self.node
        prios: dict[str, int] = {m: 0 for m in (conf.old or ())}
        prios.update(conf.voters)  # outgoing voters weigh nothing: they should not attract leadership
        order = {m: i for i, m in enumerate(prios)}
        peers = sorted((m for m in prios if m != node), key=lambda m: (-prios[m], order[m]))
        self.peers: tuple[str, ...] = tuple(peers)
        self.peer_priority: tuple[int, ...] = tuple(prios[p] for p in peers)
        self.learners: tuple[str, ...] = tuple(m for m in conf.learners if m != node and m not in prios)
        self.targets: tuple[str, ...] = self.peers + self.learners
        self.priority = conf.voters.get(node, 0)
        self._priorities = prios
        self.max_priority = max(conf.voters.values(), default=0)
        self.halves = conf.halves()
        self.voter = conf.votes_in(node)
        self.simple = len(self.halves) == 1 and node in self.halves[0]
        self.quorum = len(self.halves[0]) // 2 + 1 if self.simple else 0
        if self.state is RaftState.LEADER:
            for p in self.targets:
                if p not in self.heard:
                    self.acks[p] = -INF
                    self.heard[p] = -INF
                    self.healthy_since[p] = INF
                    self.positions[p] = (-1, -1)
                    self.conf_acked[p] = None
            for d in (self.acks, self.heard, self.healthy_since, self.positions, self.conf_acked):
                for p in [p for p in d if p not in prios and p not in self.learners]:
                    del d[p]
            # a member left out hears the entry that did so: it then knows not to campaign (and its host, to leave)
            members = conf.members()
            for p in before - members - {node}:
                self.departed[p] = INF
            for p in [p for p in self.departed if p in members]:
                del self.departed[p]

    def _won(self, votes: set[str]) -> bool:
        """A majority of every half of the configuration is in ``votes``."""
        return all(2 * len(votes & half) > len(half) for half in self.halves)

    def _append(self, conf: Conf, now: float) -> None:
        """The leader's next configuration entry: used at once, persisted, sent with the next heartbeats."""
        self._use_conf(conf)
        self._persist()
        self._recompute_lease()
        self.hb_due = now  # tell the followers now
        self._check_lease(now)  # a half whose majority has not answered lately leases nothing
        if self.state is RaftState.LEADER:
            self._check_commit(now)

    def _check_commit(self, now: float) -> None:
        """The leader's latest entry is committed once a majority of every half holds it; then the next step."""
        pos = self.conf.position
        if self.committed == pos:
            return
        acked, node = self.conf_acked, self.node
        for half in self.halves:
            n = sum(1 for m in half if m == node or acked.get(m) == pos)
            if 2 * n <= len(half):
                return
        self.committed = pos
        for p in self.departed:
            self.departed[p] = now  # heartbeats from now on say it is committed
        self._advance(now)

    def _advance(self, now: float) -> None:
        """One step towards the target, by the leader, once its latest entry is committed (its own election's
        entry first: the rule that designs out the single-server change bug, docs/architecture.md)."""
        conf = self.conf
        if self.state is not RaftState.LEADER or self.committed != conf.position or conf.term != self.term:
            return
        if self.transfer_to is not None or not self.serving:
            return
        t = self.target
        if conf.joint:
            if self.node in conf.voters:
                if self._holds_lease(conf.next(self.term, old=None), now):
                    self._append(conf.next(self.term, old=None), now)
            else:  # not a voter of what comes next: a new voter leaves the joint configuration
                live = now - self.cfg.election_timeout
                to = next((p for p in self.peers if p in conf.voters and self.heard[p] >= live
                           and self._caught_up(p)), None)
                if to is not None:
                    self.transfer_leadership(to, now)
            return
        if t is None:
            self.pending = False
            return
        cur, want = set(conf.voters), set(t.voters)
        if cur != want:
            joining = want - cur
            learners = set(conf.learners)
            if not joining <= learners:  # new voters hear the leader first
                self._append(conf.next(self.term, learners=tuple(sorted(learners | joining | set(t.learners))),
                                       payload=t.payload if t.payload is not None else conf.payload), now)
                return
            pos = conf.position
            if any(self.conf_acked.get(m) != pos for m in joining):
                return  # not caught up yet: asked again at their next answer
            joint = conf.next(self.term, voters=dict(t.voters), old=dict(conf.voters),
                              learners=tuple(sorted(set(t.learners) - want)), payload=t.payload)
            if self._holds_lease(joint, now):
                self._append(joint, now)
            return
        if dict(conf.voters) != dict(t.voters) or set(conf.learners) != set(t.learners) or conf.payload != t.payload:
            self._append(conf.next(self.term, voters=dict(t.voters), learners=tuple(sorted(t.learners)),
                                   payload=t.payload), now)
            return
        self.pending = False

    def learn_committed(self, conf: Conf, now: float) -> None:
        """Take ``conf`` as committed, from whoever holds it committed (`ConfNews`): a committed entry is the same
        everywhere, so this is what the group's leader would send. A leader steps down first (a later committed entry
        means a later leader)."""
        if conf.position <= self.conf.position:
            return
        if self.state is RaftState.LEADER:
            self._step_down(now, "a later configuration")
        self._adopt_conf(conf)
        self.committed = conf.position
        self._refresh_next_tick()

    def _holds_lease(self, conf: Conf, now: float) -> bool:
        """Whether this leader's lease would outlast the next heartbeat round under ``conf``: a majority of each of
        its halves answered lately. A change whose new voters have not (one restarted, not heard yet this term)
        waits, re-asked every round, instead of fencing the leader the moment it is made."""
        if self.lease_span == INF:
            return True
        return self._quorum_ack(conf.halves()) + self.lease_span > now + 2 * self.cfg.heartbeat_interval

    def _quorum_ack(self, halves: tuple[frozenset[str], ...]) -> float:
        """The newest acknowledgement a majority of every half has given (this member's own: now and for ever)."""
        acks, node, q = self.acks, self.node, INF
        for half in halves:
            values = sorted((INF if m == node else acks.get(m, -INF) for m in half), reverse=True)
            q = min(q, values[len(half) // 2])
        return q

    def _adopt_conf(self, conf: Conf) -> None:
        """A follower takes its leader's latest entry: Raft's log matching, for a log of one whole entry. The
        leader's entry is of its own term (it made one on election), so positions only grow."""
        self._use_conf(conf)
        self.committed = (-1, -1)
        self._persist()
        self.pending = self.target is not None or conf.joint

    def is_leader(self, now: float) -> bool:
        """Leading, not handing over, and the lease has not run out."""
        return self.state is RaftState.LEADER and self.serving and now < self.lease_until

    @property
    def hard_state(self) -> HardState:
        return HardState(self.term, self.voted_for)

    @property
    def lease_until(self) -> float:
        """The leader's lease end (-inf when not leading). A quiet leader's moves on with its followers' node
        acks (`raft_priority.links`), computed when asked: no per-group work while idle."""
        if self.quiet and self.state is RaftState.LEADER:
            return self._quiet_lease()
        return self._lease

    def shared_lease(self) -> tuple[tuple[str, ...], int] | None:
        """The node-link quorum a quiet leader's lease rests on, as ``(peers, need)`` for `Links.quorum`: its lease
        is that quorum + W, as is the lease of every quiet group this node leads with the same peers, so a driver
        may renew all their leaderships with one deadline. None while the lease is the group's own (leading aloud,
        not leading, no leases, or the acks of its group before it went quiet still carry it further)."""
        key = self._shared_key
        if key is None or not self.quiet or self.state is not RaftState.LEADER:
            return None
        return key if self.links.quorum(*key) + self.lease_span >= self._lease else None

    def wake(self, now: float, notify: bool = False) -> None:
        """Leave quiescence: a leader folds what its node links proved into its acks and heartbeats again at
        once; a follower times the group again from its leader's last node beat, and refuses votes for the
        lease window after it (the host calls this when a link goes silent, and `step` for any message that is
        not part of the quiet exchange). ``notify``: a follower tells its leader, which then heartbeats the
        group again (else the leader learns it only from the links' digests, for all its groups at once)."""
        links = self.links
        if self.state is RaftState.LEADER:
            if self.quiet:
                self._leave_quiet()
                acked, acks, seen = links.acked, self.acks, self.heard
                for p in self.peers:
                    a = acked.get(p, -INF)
                    if a > acks[p]:
                        acks[p] = a
                    if a > seen[p]:
                        self._hear(p, a)  # a primary back from the dead may be first heard here
                self.hb_due = now
            self._forget_quiet_peers()  # followers answering quiet again are counted afresh
        elif self.quiet:
            self.quiet = False
            leader = self.leader
            if leader is not None:
                links.follow_awake(leader, self.group, self.qkey)
                heard = links.heard.get(leader, -INF)
                if heard > self.contact:
                    self.contact = heard
                if self.window != INF and self.refuse_votes_until < heard + self.window:
                    self.refuse_votes_until = heard + self.window
                if notify:
                    self.acc.messages.append(HeartbeatResponse(self.group, self.node, leader, self.term, -INF,
                                                               self.log_index, self.log_term, False,
                                                               *self.conf.position))
        self._refresh_next_tick()

    def _keeps_quiet(self, msg: Message) -> bool:
        """Messages of the quiet exchange itself, which leave a quiet group quiet."""
        t = type(msg)
        if self.state is RaftState.LEADER:
            return t is HeartbeatResponse and msg.quiet and msg.term == self.term  # type: ignore[attr-defined]
        return t is Heartbeat and msg.quiesce and msg.src == self.leader and msg.term == self.term  # type: ignore[attr-defined]

    def _quiet_lease(self) -> float:
        """The lease its followers' node acks prove (every follower answered quiet, so each ack counts; a lower
        bound of the per-follower newest of group and node acks, which are older while quiet), or the lease the
        group's own acks proved, whichever is later."""
        key = self._shared_key
        if key is None:
            return self._lease
        q = self.links.quorum(*key)
        if q > self.quorum_ack:
            self.quorum_ack = q
        lease = q + self.lease_span
        return lease if lease > self._lease else self._lease

    def _leave_quiet(self) -> None:
        """A quiet leader's lease is its own again, from what the node links proved so far; the driver hears of
        it (`Links.woke`), as leaderships renewed with the quorum's shared deadline must leave it."""
        self._lease = self._quiet_lease()
        self.quiet = False
        self.links.woke.add(self.group)

    def _forget_quiet_peers(self) -> None:
        links, group, key = self.links, self.group, self.qkey
        for p in self.quiet_peers:
            links.lead_awake(p, group, key)
        self.quiet_peers.clear()

    def _may_quiesce(self, now: float) -> bool:
        """A leader may let this group go quiet: serving, no transfer under way or abandoned, enough live
        followers for a quorum (the quiet lease rests on them), and nothing to rebalance (a live higher-priority
        peer it might hand over to needs heartbeats to be judged). A dead follower does not keep the group loud:
        with thousands of groups, every one heartbeating to a dead peer for as long as it stays dead is more than
        a node can send (the spiral a kill caused at 6,000 partitions); it rejoins through its first vote
        request, which wakes the group."""
        if not (self.cfg.quiesce and self.serving and self.transfer_to is None and self.resume_from == INF
                and self.settled and not self.pending and not self.departed):
            return False
        live = self._live_peers(now)
        if len(live) < self.quorum - 1:
            return False
        if len(live) < len(self.peers) and now < self.elected_at + self.cfg.election_timeout:
            # a follower not heard yet since the election is not dead until it has had ET to answer (unless its
            # node fell silent): quiet before that, the succession the followers keep would leave it out
            silent = self.links.silent_at
            if any(p not in live and p not in silent for p in self.peers):
                return False
        if self.cfg.rebalance and self.prioritized and self.pin is not Pin.HELD:
            return not any(pr > self.priority and p in live for p, pr in zip(self.peers, self.peer_priority,
                                                                            strict=True))
        return True

    def _live_peers(self, now: float) -> list[str]:
        """The followers this leader counts as alive: heard within the election timeout, and since their node last
        fell silent (`Links.silent_at`: a node that stopped acking is dead to quiescence until it answers again,
        so groups woken by its silence go quiet again without it in one round)."""
        live = now - self.cfg.election_timeout
        heard, silent = self.heard, self.links.silent_at
        if not silent:
            return [p for p in self.peers if heard[p] >= live]
        return [p for p in self.peers if heard[p] >= live and heard[p] > silent.get(p, -INF)]

    @property
    def leader_lease_until(self) -> float:
        """Until when the leader we follow (or we, leading) is known to hold its lease."""
        if self.state is RaftState.LEADER:
            return self.lease_until if self.serving else -INF
        return self.contact + self.window if self.leader is not None else -INF

    def target_priority(self) -> int:
        """ZEP006 ``targetPriority`` of the current decay round (introspection and tests)."""
        return self._target(self.round)

    # ------------------------------------------------------------------ timers

    def _draw_first_timeout(self) -> float:
        et = self.cfg.election_timeout
        return et if self.prioritized else et + self.rng.random() * self.cfg.jitter

    def _campaign_timeout(self) -> float:
        et = self.cfg.election_timeout
        if not self.prioritized:
            return et + self.rng.random() * self.cfg.jitter
        jitter = self.cfg.retry_jitter
        return et + self.rng.random() * jitter * et if jitter > 0 else et

    def _target(self, k: int) -> int:
        """targetPriority after ``k`` decay rounds since the last leader contact."""
        decay = self.cfg.priority_decay
        s = self.succession
        if s and self.cfg.fast_failover:
            if k < len(s):
                return s[k]
            return s[-1] - (k - len(s) + 1) * decay
        return self.max_priority - k * decay

    def _follower_tick(self, now: float) -> None:
        if self.retry_at < INF:
            if now >= self.retry_at:
                self.retry_at = INF
                self._campaign(now)
            return
        first = self.contact + self.first_timeout
        if now < first:
            return
        if self.leader is not None:
            self._set_leader(None)
        if not self.voter:  # a learner, or no longer a member: it never campaigns
            self.contact = now
            return
        if not self.prioritized:
            self._campaign(now)
            return
        step = self.cfg.decay_round
        while first + self.round * step <= now:
            if self.priority >= self._target(self.round):
                if now < self.yield_until:
                    return  # a higher-priority peer is campaigning: its round first (`_on_pre_vote`)
                self._campaign(now)
                return
            self.round += 1

    def _refresh_next_tick(self) -> None:
        state = self.state
        if state is RaftState.LEADER:
            if self.quiet:  # the host watches the links; nothing per group is due
                self.next_tick = INF
                return
            d = self.hb_due
            if self._lease < d:
                d = self._lease if self._lease > -INF else self.elected_at  # no lease at all: at once
            if self.transfer_due < d:
                d = self.transfer_due
            self.next_tick = d
        elif state is RaftState.FOLLOWER:
            if self.quiet:
                self.next_tick = INF
            elif self.retry_at < INF:
                self.next_tick = self.retry_at
            else:
                due = self.contact + self.first_timeout + self.round * self.cfg.decay_round
                self.next_tick = due if due >= self.yield_until else self.yield_until
        else:
            self.next_tick = self.campaign_due

    # ------------------------------------------------------------------ elections

    def _refusing_votes(self, now: float) -> bool:
        """Inside a lease: refuse non-forced (pre-)votes."""
        if not self.cfg.check_quorum:
            return False
        if self.state is RaftState.LEADER or now < self.refuse_votes_until:
            return True
        # a quiet follower has heard its leader as recently as its node link (a woken one folded that in)
        return self.quiet and self.leader is not None and now < self.links.heard.get(self.leader, -INF) + self.window

    def _log_ok(self, last_index: int, last_term: int) -> bool:
        return (last_term, last_index) >= (self.log_term, self.log_index)

    def _campaign(self, now: float, force: bool = False, seq: int = 0, pin: bool = False) -> None:
        if not self.voter:  # a configuration it took while campaigning left it out: it stops
            if self.state is not RaftState.FOLLOWER:
                self._become_follower(now, None)
            return
        self._set_leader(None)
        self.pin = Pin.ASKED if pin else Pin.NONE
        self.retry_at = INF
        if self.cfg.pre_vote and not force:
            self.state = RaftState.PRE_CANDIDATE
            self.votes = {self.node}
            self.campaign_due = now + self._campaign_timeout()
            proposed = self.term + 1
            ct, ci = self.conf.position
            for p in self.peers:
                self.acc.messages.append(
                    PreVoteRequest(self.group, self.node, p, proposed, self.log_index, self.log_term, ct, ci)
                )
            if self._won(self.votes):
                self._start_election(now, False, 0)
        else:
            self._start_election(now, force, seq)

    def _start_election(self, now: float, force: bool, seq: int) -> None:
        self.term += 1
        self.voted_for = self.node
        self.closed = 0
        self._persist()
        self.state = RaftState.CANDIDATE
        self.votes = {self.node}
        self.vote_sent_at = now
        self.campaign_due = now + self._campaign_timeout()
        ct, ci = self.conf.position
        for p in self.peers:
            self.acc.messages.append(
                VoteRequest(self.group, self.node, p, self.term, self.log_index, self.log_term, force, seq, ct, ci)
            )
        if self._won(self.votes):
            self._become_leader(now)

    def _become_leader(self, now: float) -> None:
        self.state = RaftState.LEADER
        self.elected_at = now
        self.serving = True
        self.pin = Pin.HELD if self.pin is Pin.ASKED else Pin.NONE
        self._set_leader(self.node)
        sent = self.vote_sent_at
        self.acks.clear()
        self.heard.clear()
        self.healthy_since.clear()
        self.positions.clear()
        self.conf_acked.clear()
        self.departed = {}
        for p in self.targets:
            voted = p in self.votes
            self.acks[p] = sent if voted else -INF
            self.heard[p] = now if voted else -INF
            self.healthy_since[p] = now if voted else INF
            self.positions[p] = (-1, -1)
            self.conf_acked[p] = None
        # the leader's own entry: committing it is what lets it change the configuration
        self._use_conf(self.conf.next(self.term))
        self._persist()
        self.transfer_to = None
        self.transfer_due = INF
        self.transfer_closed = 0
        self.transfer_seq = 0
        self.resume_from = INF
        self._recompute_lease()
        if now >= self.lease_until:
            # the votes are older than a lease (this process was paused): they prove nothing now
            self.serving = False
            self._step_down(now, "stale election", fenced=True)
            return
        self._acquire()
        self._check_commit(now)  # a member alone commits at once
        self._broadcast(now)

    def _step_down(self, now: float, reason: str, fenced: bool = False) -> None:
        """Stop leading: an orderly Revoke, or a Fence at the lease end (the lease ran out)."""
        if self.quiet:
            self._leave_quiet()
        self._forget_quiet_peers()  # followers still quiet under us see the digests disagree, and wake
        if self.serving:
            change = Fence(self.group, self.lease_until, reason) if fenced else Revoke(self.group, reason)
            self.acc.changes.append(change)
        self.serving = False
        self.pin = Pin.NONE
        self.transfer_to = None
        self.transfer_due = INF
        self.resume_from = INF
        self.hb_due = INF
        self._lease = -INF
        self._become_follower(now, None)

    def _become_follower(self, now: float, leader: str | None) -> None:
        if self.state is not RaftState.FOLLOWER:
            self.state = RaftState.FOLLOWER
            self.first_timeout = self._draw_first_timeout()
        self._set_leader(leader)
        self.contact = now
        self.round = 0
        self.retry_at = INF
        self.succession = ()

    def _adopt_term(self, term: int) -> None:
        self.term = term
        self.voted_for = None
        self.closed = 0
        self._persist()

    def _higher_term(self, now: float, term: int) -> None:
        """A message revealed a newer term: stop leading or campaigning in the old one."""
        state = self.state
        if state is RaftState.LEADER:
            self._step_down(now, "higher term")
        elif state is not RaftState.FOLLOWER:
            # still due to retry when the campaign would have timed out (ZEP006 keeps its target)
            due = self.campaign_due
            self._become_follower(now, None)
            self.retry_at = due
        else:
            self._set_leader(None)  # whoever we followed led an older term
        self._adopt_term(term)

    # ------------------------------------------------------------------ leader

    def _check_lease(self, now: float) -> None:
        if now >= self.lease_until:
            self._step_down(now, "check quorum", fenced=True)

    def _recompute_lease(self) -> None:
        if not (self.simple and not self.learners):
            self._recompute_joint_lease()
            return
        need = self.quorum - 1
        if need <= 0:
            self.quorum_ack = INF
        elif need == 1:
            self.quorum_ack = max(self.acks.values())
        else:
            self.quorum_ack = sorted(self.acks.values(), reverse=True)[need - 1]
        self._lease = INF if self.lease_span == INF else self.quorum_ack + self.lease_span

    def _recompute_joint_lease(self) -> None:
        """The lease while the configuration has two halves, learners, or leaves this member out: the earliest of
        each half's quorum acknowledgement (this member's own counts as now and for ever, where it votes)."""
        q = self._quorum_ack(self.halves)
        self.quorum_ack = q
        self._lease = INF if self.lease_span == INF else q + self.lease_span

    def _leader_tick(self, now: float) -> None:
        self._check_lease(now)
        if self.state is not RaftState.LEADER:
            return
        if now >= self.transfer_due:
            self._abandon_transfer(now)
        if now >= self.hb_due:
            if self.pending:
                self._advance(now)
            resend = self.timeout_sent and self.transfer_to is not None
            if self.cfg.rebalance and self.serving and self.prioritized and self.pin is not Pin.HELD:
                self._maybe_rebalance(now)
            self._broadcast(now)
            if resend:
                self._send_timeout_now()  # the first may have been lost; the target dedups by term

    def _broadcast(self, now: float) -> None:
        if not self.targets and not self.departed:
            self.hb_due = INF
            return
        succession: tuple[int, ...] = ()
        if self.cfg.fast_failover and self.prioritized:
            live = self._live_peers(now)
            succession = tuple(pr for p, pr in zip(self.peers, self.peer_priority, strict=True) if p in live)
        term, group, node, closed = self.term, self.group, self.node, self.transfer_closed
        quiesce = self._may_quiesce(now)
        if not quiesce and self.quiet_peers:
            self._forget_quiet_peers()  # they wake on this round's heartbeats
        msgs = self.acc.messages
        conf = self.conf
        pos = conf.position
        ct, ci = pos
        committed = self.committed == pos
        acked = self.conf_acked
        for p in self.targets:
            msgs.append(Heartbeat(group, node, p, term, now, succession, closed, quiesce, ct, ci, committed,
                                  None if acked.get(p) == pos else conf))
        for p in self.departed:
            msgs.append(Heartbeat(group, node, p, term, now, (), closed, False, ct, ci, committed, conf))
        self.hb_due = now + self.cfg.heartbeat_interval

    def _caught_up(self, peer: str) -> bool:
        if self.conf_acked.get(peer) != self.conf.position or peer not in self.positions:
            return False  # it would not win: voters holding the leader's configuration refuse it
        t, i = self.positions[peer]
        return (t, i + self.cfg.rebalance_max_lag) >= (self.log_term, self.log_index)

    def _maybe_rebalance(self, now: float) -> None:
        steady = now - self.cfg.rebalance_hysteresis
        live = now - self.cfg.ack_gap
        for p, pr in zip(self.peers, self.peer_priority, strict=True):
            if pr <= self.priority:
                return
            if self.heard[p] < live:
                continue  # gone: the next one down may take the partition
            steady_and_caught_up = self.healthy_since[p] <= steady and self._caught_up(p)
            if steady_and_caught_up and self.budget.left(now) > 0 and self.transfer_leadership(p, now):
                self.budget.spend(now)  # out of budget: asked again at the next heartbeat round
            # A live node that outranks the rest but is not yet steady (it has just joined, or come back) is waited
            # for: handing the partition to one ranked between it and this leader would move it twice.
            return

    def _send_timeout_now(self) -> None:
        assert self.transfer_to is not None
        self.timeout_sent = True
        self.acc.messages.append(TimeoutNow(self.group, self.node, self.transfer_to, self.term, self.transfer_seq,
                                            self.transfer_pin))

    def _abandon_transfer(self, now: float) -> None:
        to = self.transfer_to
        self.transfer_closed = self.transfer_seq
        self.transfer_to = None
        self.transfer_due = INF
        if to is not None:
            self.healthy_since[to] = now  # start its hysteresis again: no flapping
        self.resume_from = now
        self._broadcast(now)
        if self._won({self.node}):
            self.resume_from = INF
            self.serving = True
            self._acquire()  # the transfer was abandoned

    # ------------------------------------------------------------------ handlers

    def _on_heartbeat(self, m: Heartbeat, now: float) -> None:
        if m.term < self.term:  # a deposed leader: tell it the newer term
            self.acc.messages.append(
                HeartbeatResponse(self.group, self.node, m.src, self.term, m.sent_at, self.log_index, self.log_term,
                                  False, *self.conf.position)
            )
            return
        if m.term == self.term and self.state is RaftState.LEADER:
            return  # cannot happen (one leader per term); never ack it
        if m.term > self.term:
            self._higher_term(now, m.term)
        if self.state is not RaftState.FOLLOWER or self.leader != m.src:
            self._become_follower(now, m.src)
        else:
            self.contact = now
            self.round = 0
            self.retry_at = INF
        self.succession = m.succession
        self.closed = m.transfer_closed
        conf = m.conf
        if conf is not None and conf.position > self.conf.position:
            self._adopt_conf(conf)
        if m.committed and (m.conf_term, m.conf_index) == self.conf.position:
            self.committed = self.conf.position
        if self.refuse_votes_until < now + self.window:
            self.refuse_votes_until = now + self.window
        if m.quiesce and not self.quiet:
            self.quiet = True
            self.qkey = quiet_key(self.group, self.term)
            self.links.follow_quiet(m.src, self.group, self.qkey)
        self.acc.messages.append(
            HeartbeatResponse(self.group, self.node, m.src, self.term, m.sent_at, self.log_index, self.log_term,
                              self.quiet, *self.conf.position)
        )

    def _on_heartbeat_response(self, m: HeartbeatResponse, now: float) -> None:
        if m.term > self.term:
            self._higher_term(now, m.term)
            return
        if self.state is not RaftState.LEADER or m.term != self.term:
            return
        p = m.src
        if p not in self.heard:
            if (m.conf_term, m.conf_index) == self.conf.position and m.echo >= self.departed.get(p, INF):
                del self.departed[p]  # it knows it is out, for good
            return  # not a member of this configuration (any more)
        self._hear(p, now)
        self.positions[p] = (m.last_log_term, m.last_log_index)
        if m.quiet != (p in self.quiet_peers):
            self._note_quiet(p, m.quiet, now)
        if m.echo > self.acks[p]:
            self.acks[p] = m.echo
            if m.echo > self.quorum_ack:
                self._recompute_lease()
                if self.resume_from <= self.quorum_ack:
                    self.resume_from = INF
                    self.serving = True
                    self._acquire()  # the transfer was abandoned
        pos = (m.conf_term, m.conf_index)
        if pos != self.conf_acked[p]:
            self.conf_acked[p] = pos
            if pos == self.conf.position:
                if self.committed != pos:
                    self._check_commit(now)  # and the next step: the configuration may change under us here
                elif self.pending:
                    self._advance(now)  # a learner caught up
        if p == self.transfer_to and not self.timeout_sent and self._caught_up(p):
            self._send_timeout_now()

    def _hear(self, p: str, at: float) -> None:
        """Follower ``p`` was heard from at ``at``: after a gap longer than `ack_gap` (or never heard this term) its
        rebalancing hysteresis starts again from here. Every way word of a follower reaches the leader goes through
        this, so none can leave the hysteresis unstarted (a wake folding a node-link ack in did, and the group was
        never handed back to its returning primary)."""
        if at - self.heard[p] > self.cfg.ack_gap:
            self.healthy_since[p] = at
        self.heard[p] = at

    def _note_quiet(self, p: str, quiet: bool, now: float) -> None:
        """Follower ``p`` answered (not) quiet: keep the links' digest for it in step, and go quiet once every live
        follower is (at least a quorum's worth), if this leader still may."""
        if not quiet:
            self.quiet_peers.discard(p)
            self.links.lead_awake(p, self.group, self.qkey)
            return
        if self.quiet:
            # a follower back from the dead answered after the group went quiet without it: one more round, so the
            # succession the followers keep names it, and a live follower that outranks this leader is rebalanced to
            self.wake(now)
            return
        if not self.quiet_peers:
            self.qkey = quiet_key(self.group, self.term)
        answered = self.quiet_peers
        answered.add(p)
        self.links.lead_quiet(p, self.group, self.qkey)
        if (len(answered) >= self.quorum - 1 and answered.issuperset(self._live_peers(now))
                and self._may_quiesce(now)):
            self.quiet = True
            self.hb_due = INF
            if self.window != INF and self.quorum > 1:  # the lease rests on the node links of these followers
                self._shared_key = (tuple(sorted(answered)), self.quorum - 1)

    def _on_pre_vote(self, m: PreVoteRequest, now: float) -> None:
        if m.term < self.term or self._refusing_votes(now):
            return
        ok = (
            (self.voted_for == m.src or m.term > self.term or (self.voted_for is None and self.leader is None))
            and (m.conf_term, m.conf_index) >= self.conf.position
            and self._log_ok(m.last_log_index, m.last_log_term)
        )
        if ok and self.prioritized and self.cfg.fast_failover and self.state in (RaftState.FOLLOWER,
                                                                                 RaftState.PRE_CANDIDATE):
            ok = self._rival(m.src, now, (m.conf_term, m.conf_index) > self.conf.position)
        self.acc.messages.append(
            PreVoteResponse(self.group, self.node, m.src, m.term if ok else self.term, ok)
        )

    def _rival(self, peer: str, now: float, later: bool = False) -> bool:
        """Priority mode with fast failover: `peer` asks for a pre-vote while this member has no leader. Two members
        campaigning at once grant each other's pre-votes, both become candidates for the same term and split the
        votes (at a short ET the decay rounds are a few ms apart, seen on a busy 2-core machine as a failover of
        3 ET). So the higher priority campaigns and the lower yields: a member grants a higher-priority peer
        (leaving it this decay round, and stepping back if it was campaigning itself), and refuses a lower one
        while it campaigns itself. Only liveness is at stake (a pre-vote decides nothing); a peer that yields
        campaigns one round later if the other did not win. ``later``: the peer holds a later configuration, so this
        member cannot win while the peer's supporters hold it (they refuse it): it yields whatever the priorities."""
        theirs, mine = (self._priorities.get(peer, 0), peer), (self.priority, self.node)
        if later or theirs > mine:
            self.yield_until = max(self.yield_until, now + self.cfg.decay_round)
            if self.state is RaftState.PRE_CANDIDATE:
                self.state = RaftState.FOLLOWER
                self.votes = set()
                self.campaign_due = INF
            return True
        return self.state is not RaftState.PRE_CANDIDATE

    def _on_pre_vote_response(self, m: PreVoteResponse, now: float) -> None:
        if m.granted:
            if self.state is RaftState.PRE_CANDIDATE and m.term == self.term + 1:
                self.votes.add(m.src)
                if self._won(self.votes):
                    self._start_election(now, False, 0)
        elif m.term > self.term:
            self._higher_term(now, m.term)

    def _on_vote(self, m: VoteRequest, now: float) -> None:
        if m.term < self.term:
            self.acc.messages.append(VoteResponse(self.group, self.node, m.src, self.term, False))
            return
        if m.force:
            closed = self.transfer_closed if self.state is RaftState.LEADER else self.closed
            if m.term - 1 == self.term and m.transfer_seq <= closed:
                return  # that transfer was abandoned; its leader is serving again
            if now < self.restarted_until:
                # restarted: whether that transfer was abandoned (and its leader re-acquired on this member's ack)
                # was forgotten with the process; refuse as inside a lease (seed 55638 of `elect bench sim-raft`)
                return
        elif self._refusing_votes(now) and not (m.term == self.term and self.voted_for == m.src):
            return
        if m.term > self.term:
            self._higher_term(now, m.term)
        ok = (self.voted_for in (None, m.src) and (m.conf_term, m.conf_index) >= self.conf.position
              and self._log_ok(m.last_log_index, m.last_log_term))
        if ok:
            self.voted_for = m.src
            self._persist()
            if self.state is not RaftState.FOLLOWER:
                self._become_follower(now, None)
            else:
                self.contact = now
                self.round = 0
                self.retry_at = INF
            if self.refuse_votes_until < now + self.window:
                self.refuse_votes_until = now + self.window
        self.acc.messages.append(VoteResponse(self.group, self.node, m.src, self.term, ok))

    def _on_vote_response(self, m: VoteResponse, now: float) -> None:
        if m.term > self.term:
            self._higher_term(now, m.term)
            return
        if self.state is RaftState.CANDIDATE and m.term == self.term and m.granted:
            self.votes.add(m.src)
            if self._won(self.votes):
                self._become_leader(now)

    def _on_timeout_now(self, m: TimeoutNow, now: float) -> None:
        if m.term < self.term or self.state is RaftState.LEADER:
            return
        if m.term == self.term and m.transfer_seq <= self.closed:
            return
        if m.term > self.term:
            self._adopt_term(m.term)
        self._campaign(now, force=True, seq=m.transfer_seq, pin=m.pin)

    # ------------------------------------------------------------------ outputs

    def _persist(self) -> None:
        conf = self.conf
        self.acc.persist[self.group] = HardState(self.term, self.voted_for, conf if conf.index else None)

    def _acquire(self) -> None:
        """Lead until the lease end known now; the lease moves on without an Extend (see the class)."""
        self.acc.changes.append(Acquire(self.group, self.term, self.lease_until))

    def _set_leader(self, leader: str | None) -> None:
        if leader != self.leader:
            self.leader = leader
            self.acc.seen.append(LeaderSeen(self.group, leader, self.term))


_HANDLERS: dict[type, Callable[[RaftGroup, object, float], None]] = {
    Heartbeat: RaftGroup._on_heartbeat,  # type: ignore[dict-item]
    HeartbeatResponse: RaftGroup._on_heartbeat_response,  # type: ignore[dict-item]
    PreVoteRequest: RaftGroup._on_pre_vote,  # type: ignore[dict-item]
    PreVoteResponse: RaftGroup._on_pre_vote_response,  # type: ignore[dict-item]
    VoteRequest: RaftGroup._on_vote,  # type: ignore[dict-item]
    VoteResponse: RaftGroup._on_vote_response,  # type: ignore[dict-item]
    TimeoutNow: RaftGroup._on_timeout_now,  # type: ignore[dict-item]
}
