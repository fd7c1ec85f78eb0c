"""NELI as a pure state machine following `elect.core`'s protocol: no I/O, threads, sleeps or clock reads.

`step(message, now)` takes the consumer group's verdicts (`Assigned`, `Unassigned`, lost partitions
included) and the heartbeat records read back from the leader topic (`Received`); `tick(now)` says time
passed; `set_roles`, `resign` and `stop` are the application's commands. What they produce, the
leadership changes per role and the heartbeats to publish (`Publish`), the driver takes with `ready()`.
The only wall clock the core sees is in the messages: a record's sender's (`HeartbeatRecord.wall`) and
the receiver's at receipt (`Received.wall`). The Kafka driver feeds it from one poll thread; the unit
tests feed it on virtual time.

Both variants of the paper share the machine and differ in three rules:

- evidence: fast mode counts only the member's *own current* heartbeats (its member id, this run's
  instance, the epoch of the current assignment); full mode keeps a leadership alive on any record of
  the group on the partition, dated by the sender's wall clock (own records by the exact monotonic send
  time).
- publishing: fast mode publishes to the partitions it owns; full mode to every partition.
- orderly revocation: exclusive configurations end leadership in the rebalance callback (`Revoke`, so a
  blocking callback holds the successor back); full mode with T above the exclusivity bound keeps
  leading until its evidence is T old, the paper's overlap that avoids a gap.

A fast-mode owner leads only once every other member's heartbeats on its partition are `claim_timeout` old (a
member the group dropped may not have noticed yet). After an orderly handover that wait is needless, and it was most of
a graceful handover (0.6-0.7 s of a 1 s session, where the group itself moves the partition in 0.1 s): so a
member that gives a partition up in order publishes a `released` record there once the partition's `Revoke` is
out (the driver publishes after it has applied the changes, the Revoked callbacks included), and a successor
does not wait for that sender's records sent before its release. A member that lost a partition (its session
expired behind its back) publishes nothing: a successor waits it out as before.

Every rule above assumes the member reads each of its partitions' records in order, none left out: a claim
never read holds nobody back. So the driver hands on every record it reads (one that is no heartbeat as `Foreign`), and
the core checks that offsets follow on, from where the driver said it starts reading (`Assigned.starts`); when they
jump (librdkafka moved its position, as an offset reset does) the member treats the partition as contested for
`claim_timeout` (`skipped` says so, for the driver's log).

A partition is led from the first evidence after its assignment until `evidence + timeout` passes
without newer evidence. Evidence is dated by when it was *sent*, so records that sat in a frozen
process's socket buffer cannot extend a leadership that already lapsed, and a lapsed leadership resumes
only on evidence sent after it lapsed.

The token of a leadership is the offset of the member's own heartbeat record, sent after its
assignment (or after its lapse), that started it: offsets in a partition only grow, so tokens strictly
increase across the owners of a partition whatever the group's generation does (cooperative rebalances
advance it without moving partitions; an emptied group may even restart it). In both modes a
leadership therefore starts only on the member's own current record, never on another's: two members
reading the same record would otherwise lead under one token, and a member reading the topic late would
lead under a token older than one already taken (both found by the full-mode soak). A leadership also starts
only on a record read at the partition's end as last fetched: the log's order is not the order records were sent
in (a broker frozen for seconds appends what its sockets held, every sender's, in any order; a member lagging
behind the topic reads its own older record first), so another owner's fresh claim may wait unread behind the
own record. Fast mode waits for the end; full mode, where every member writes every partition, at most one
heartbeat interval after its first own record read short of it (an unbounded wait cost seconds of failover
there). For the same reason a fast-mode leader fences on a fresh claim appended after the record that started
its leadership, whenever it was sent. Full mode adds one
rule the paper lacks: its leaders' records carry their token, a new leadership publishes one at once, and a
member leading on an older token stands down on reading a fresh newer one (`Revoke` if its partition was taken
from it in order, else `Fence`), and does not take the partition back while that claim stays fresh. The paper's
overlap then lasts until the old leader reads its successor's first record, not a whole T.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from elect.core import Acquire, Extend, Fence, Ready, Revoke
from elect.roles import Role, partition_of
from neli.heartbeat import Heartbeat, HeartbeatRecord

Mode = Literal["fast", "full"]
READ_BACK = 100
"""A driver reads a newly assigned partition from this many records before its end (the first own heartbeat may
land before its first fetch; older records are harmless, see `neli.elector.KafkaElector._start_offsets`)."""


@dataclass(frozen=True, slots=True)
class Assigned:
    """The group gave this member `partitions` (in the order given: each assignment takes the next epoch); `starts`:
    the offset the driver reads each from, where it knows it (None, or missing: the first record read sets it)."""

    partitions: tuple[int, ...]
    starts: tuple[int | None, ...] = ()


@dataclass(frozen=True, slots=True)
class Unassigned:
    """The group took `partitions` away: in order (the rebalance callback) or behind our back (`lost`)."""

    partitions: tuple[int, ...]
    lost: bool = False


@dataclass(frozen=True, slots=True)
class Received:
    """`heartbeat` was read back from `partition` at `offset`; `wall` is the receiver's wall clock then,
    which dates the record against its sender's wall clock. `caught_up`: no later record of the partition was
    known to exist when it was read (the driver's last fetch reported nothing beyond it)."""

    partition: int
    offset: int
    heartbeat: HeartbeatRecord
    wall: float
    caught_up: bool = True


@dataclass(frozen=True, slots=True)
class Foreign:
    """A record read from `partition` at `offset` that is no NELI heartbeat (the topic may be shared): its offset
    counts all the same (`NeliCore._follows`)."""

    partition: int
    offset: int


NeliInput = Assigned | Unassigned | Received | Foreign
"""What `NeliCore.step` takes."""


@dataclass(frozen=True, slots=True)
class Publish:
    """Send `heartbeat` to `partition` (the driver stamps the sender's wall clock on it as it sends)."""

    partition: int
    heartbeat: Heartbeat


@dataclass
class _Ownership:
    """One partition this member owns (or, in overlap mode, still leads after an orderly revoke)."""

    epoch: int
    token: int | None = None  # offset of the own record that started the leadership; None while not leading
    deadline: float = -math.inf
    fenced_at: float = -math.inf  # a lapsed leadership resumes only on evidence sent after this
    roles: list[Role] = field(default_factory=list)  # the roles acquired under this leadership
    orderly: bool = True  # released by a revoke (Revoke just before the deadline) or lost (Fence at it)
    since: float = -math.inf  # when the current leadership began (this member's clock)
    # fast mode: another member's heartbeats here are fresh until then; full mode: a newer leader's claim
    contested_until: float = -math.inf
    claims: dict[tuple[str, str], float] = field(default_factory=dict)  # fast mode: other sender -> fresh until
    claimed: dict[tuple[str, str], float] = field(default_factory=dict)  # fast mode: sender -> its newest claim sent
    released: dict[tuple[str, str], float] = field(default_factory=dict)  # fast mode: sender -> its release's `sent`
    last_token: int | None = None  # this ownership's latest token: full mode yields to newer claims only once it led
    behind_since: float = math.inf  # full mode: since when its own records were read short of the partition's end
    read_at: float = -math.inf  # when a record of the partition was last read
    unled_since: float = -math.inf  # since when it has been owned and not led (assigned, or its leadership ended)
    blind_until: float = -math.inf  # records skipped unread may hold claims fresh until then (`_skipped`)
    next_offset: int | None = None  # the offset the next record read must have (None: any, the first)

    @property
    def leading(self) -> bool:
        return self.token is not None


class NeliCore:
    """The NELI state of one member for one group.

    `timeout` is fast mode's heartbeat timeout or full mode's threshold T; `claim_timeout` (fast mode, default
    `timeout`) how long another member's heartbeat holds an owner back, longer than `timeout` by the clock-rate and
    wall-clock differences tolerated (`KafkaOptions.claim_timeout`). `overlap` (full mode above
    the exclusivity bound) keeps leading after an orderly revoke until the evidence is `timeout` old;
    the `Revoke` then comes `release_margin` before that, ahead of the elector's own deadline timer.
    Every input first fences the leaderships whose deadline has passed, so nothing is decided on them.
    """

    def __init__(self, *, group: str, member: str, instance: str, mode: Mode, partitions: int, interval: float,
                 timeout: float, claim_timeout: float | None = None, overlap: bool = False,
                 release_margin: float = 0.1, roles: Iterable[Role] = ()):
        if mode == "fast" and overlap:
            raise ValueError("fast mode is exclusive; overlap is a full-mode behaviour")
        self.group, self.member, self.instance, self.mode = group, member, instance, mode
        self.partitions, self.interval, self.timeout = partitions, interval, timeout
        self.claim_timeout = timeout if claim_timeout is None else claim_timeout
        if self.claim_timeout < timeout:
            raise ValueError("claim_timeout below timeout would let an owner lead while another still may")
        self.overlap, self.release_margin = overlap, release_margin
        self._roles: list[Role] = list(dict.fromkeys(roles))
        self._owned: dict[int, _Ownership] = {}
        self._released: dict[int, _Ownership] = {}
        self._epoch = 0
        self._next_beat = -math.inf
        self._publishing = True
        self._ready: Ready[Publish, None] = Ready()
        self.skipped: list[tuple[int, int, int]] = []  # (partition, offset read, offset expected): for the driver's log

    # ----------------------------------------------------------------- views
    @property
    def owned(self) -> frozenset[int]:
        return frozenset(self._owned)

    def leading_partitions(self) -> frozenset[int]:
        return frozenset(k for k, o in self._all() if o.leading)

    def leading_roles(self) -> frozenset[Role]:
        return frozenset(r for _, o in self._all() for r in o.roles)

    def token(self, partition: int) -> int | None:
        own = self._owned.get(partition) or self._released.get(partition)
        return None if own is None else own.token

    def unled(self, now: float, longer_than: float) -> list[tuple[int, str]]:
        """Owned partitions with roles to lead that nobody here has led for over `longer_than` (a stuck partition is
        an operator's question: the elector logs it), each with what holds it back."""
        found = []
        for k, own in self._owned.items():
            if own.leading or not self._roles_of(k) or now - own.unled_since <= longer_than:
                continue
            claims = ", ".join(f"{m}/{i} fresh for {until - now:.2f} s" for (m, i), until in own.claims.items()
                               if until > now)
            contested = max(0.0, own.contested_until - now, own.blind_until - now)
            found.append((k, f"epoch {own.epoch}, unled for {now - own.unled_since:.1f} s, last fenced "
                             f"{now - own.fenced_at:.1f} s ago, contested for {contested:.2f} s more"
                             f"{f' ({claims})' if claims else ''}, {len(own.released)} released senders"))
        return found

    def next_wakeup(self) -> float:
        """The next time `tick` has something to do (a heartbeat due, a deadline, a release)."""
        times = [self._next_beat] if self._publishing and (self._owned or self.mode == "full") else []
        times += [o.deadline for _, o in self._all() if o.leading]
        times += [o.deadline - self.release_margin for o in self._released.values() if o.orderly]
        return min(times, default=math.inf)

    def has_ready(self) -> bool:
        """Something was produced since the last `ready()`."""
        return bool(self._ready)

    def ready(self) -> Ready[Publish, None]:
        """Everything produced since the last call: leadership changes, then heartbeats to publish."""
        return self._ready.take()

    # ----------------------------------------------------------------- inputs
    def step_all(self, messages: Iterable[NeliInput], now: float) -> None:
        """Inputs that arrived together, in order (`elect.driver`)."""
        for message in messages:
            self.step(message, now)

    def step(self, message: NeliInput, now: float) -> None:
        """A verdict of the group or a record read back arrived at `now`."""
        self._expire(now)
        if isinstance(message, Received):
            self._received(message, now)
        elif isinstance(message, Assigned):
            self._assign(message.partitions, now, message.starts)
        elif isinstance(message, Foreign):
            self._follows(message.partition, message.offset, now)
        else:
            self._unassign(message.partitions, now, lost=message.lost)

    def tick(self, now: float) -> None:
        """Time passed: fence lapsed leaderships, end released ones, publish heartbeats that are due."""
        self._expire(now)
        for k, own in list(self._released.items()):
            if own.orderly and now >= own.deadline - self.release_margin:
                del self._released[k]
                self._end(own, fence=False, until=now)
        if self._publishing and now >= self._next_beat:
            if self.mode == "fast":
                self._ready.messages += [Publish(k, self._beat(o.epoch, now)) for k, o in self._owned.items()]
            else:
                self._ready.messages += [Publish(k, self._full_beat(k, now)) for k in range(self.partitions)]
            self._next_beat = now + self.interval

    # ----------------------------------------------------------------- commands
    def set_roles(self, roles: Iterable[Role], now: float) -> None:
        """The roles this member contends for changed: acquire added ones it leads, revoke removed ones."""
        self._expire(now)
        new = list(dict.fromkeys(roles))
        self._roles = new
        for k, own in self._all():
            token = own.token
            if token is None:
                continue
            for role in [r for r in own.roles if r not in new]:
                own.roles.remove(role)
                self._ready.changes.append(Revoke(role))
            if k in self._owned:  # a released leadership takes on no new roles
                for role in self._roles_of(k):
                    if role not in own.roles:
                        own.roles.append(role)
                        self._ready.changes.append(Acquire(role, token, own.deadline))

    def resign(self, roles: Iterable[Role], now: float) -> None:
        """End `roles` now while the rest of their partition's leadership carries on (a member cannot give
        one partition back: the driver hands all of them over to let another member take these roles)."""
        self._expire(now)
        for role in roles:
            for _, own in self._all():
                if role in own.roles:
                    own.roles.remove(role)
                    self._ready.changes.append(Revoke(role))

    def beat_now(self, now: float) -> None:
        """Publish this round of heartbeats now rather than at its time (see `_assign`); the rounds after it keep the
        interval from now. A heartbeat early is evidence like any."""
        self._next_beat = -math.inf
        self.tick(now)

    def stop(self) -> None:
        """Publish no more heartbeats: what is still led ends with the group's revoke or by its deadline."""
        self._publishing = False

    # ----------------------------------------------------------------- rules
    def _assign(self, partitions: Iterable[int], now: float, starts: tuple[int | None, ...] = ()) -> None:
        """The group gave this member `partitions`; it heartbeats to each at once, to lead without waiting for
        the next round. A member that held others before heartbeats to those too (`beat_now`): the consumer's fetch
        waiting on them returns once they have a record, and the next fetch reads the new partitions (the driver sets
        their start offsets before it publishes)."""
        partitions = tuple(partitions)
        held = frozenset(self._owned)
        for i, k in enumerate(partitions):
            if k in self._owned:
                continue
            released = self._released.pop(k, None)
            if released is not None:  # back before its release ran out: end it, start afresh
                self._end(released, fence=not released.orderly, until=now)
            self._epoch += 1
            self._owned[k] = _Ownership(epoch=self._epoch, unled_since=now,
                                        next_offset=starts[i] if i < len(starts) else None)
            if self._publishing:
                self._ready.messages.append(Publish(k, self._beat(self._epoch, now)))
        if held and not held.issuperset(partitions):
            self.beat_now(now)

    def _unassign(self, partitions: Iterable[int], now: float, *, lost: bool) -> None:
        for k in partitions:
            own = self._owned.pop(k, None)
            if own is None:
                continue
            if self.mode == "fast" and not lost:  # after the Revoke below: the driver publishes after the changes
                self._ready.messages.append(Publish(k, self._beat(own.epoch, now, released=True)))
            if not own.leading:
                continue
            if self.overlap:
                own.orderly = not lost
                self._released[k] = own
            else:
                self._end(own, fence=lost, until=min(now, own.deadline))

    def _received(self, msg: Received, now: float) -> None:
        self._follows(msg.partition, msg.offset, now)
        hb = msg.heartbeat
        if hb.group != self.group:
            return
        if self.mode == "full" and hb.token is not None and not self._mine(hb):
            self._claimed(msg, now)
        own = self._owned.get(msg.partition)
        if own is None:
            return
        if now - own.read_at > 2 * self.interval:  # its reads stalled (a cut, a pause): a wait for the end starts anew
            own.behind_since = math.inf
        own.read_at = now
        mine_now = self._mine(hb) and hb.epoch == own.epoch
        if self.mode == "fast" and not self._mine(hb):
            self._contest(own, msg, now)
            return
        sent = self._evidence(own, hb, now, msg.wall)
        if sent is None or sent <= own.fenced_at:
            return
        deadline = sent + self.timeout
        if deadline <= now:
            return  # stale: it says nothing about now
        if not own.leading:
            if not mine_now or now < max(own.contested_until, own.blind_until) or self._behind(own, msg, now):
                return  # leaderships start on own records only; nor while another's claim is (or may be) fresh
            own.token, own.deadline, own.since, own.last_token = msg.offset, deadline, now, msg.offset
            own.roles = self._roles_of(msg.partition)
            self._ready.changes += [Acquire(role, msg.offset, deadline) for role in own.roles]
            self._announce(msg.partition, now)
        elif deadline > own.deadline:
            own.deadline = deadline
            self._ready.changes += [Extend(role, deadline) for role in own.roles]

    def _behind(self, own: _Ownership, msg: Received, now: float) -> bool:
        """An own record read short of the partition's end waits, so that a claim already appended after it is read
        first: the log's order is not the order records were sent in (a broker that was frozen appends what its
        sockets held, every sender's, in any order), so a claim sent before the own record may sit after it, and
        its sender may be leading on it. Full mode waits one heartbeat interval at most: every member writes every
        partition there, so a consumer behind librdkafka's prefetch may stay short of the end for long (unbounded,
        the wait cost seconds of failover). Fast mode waits for the end: only owners write there, so whatever
        follows the own record is a claim to read first (found by the KIP-848 soak: two owners led 2-83 ms
        together after a broker was frozen 3 s, the later one on its own record appended after the other's).

        Full mode also counts an own record read more than one heartbeat interval after it was sent as short of the
        end: the fetch answer that carried it waited (the member was paused with it in its socket), so the end it
        knew of is stale, and another owner may have led meanwhile on a later record. Fast mode needs no such rule:
        an own record that old has nearly run out of evidence, and no successor leads before the member's last
        claim is `timeout` old. (Found in simulation: kafka-full, seed 155 of `elect bench sim-neli`, a member
        resumed from a pause on its own record at offset 115 after another had led on offset 123.) The one interval
        counts from the first record read short of the end since the member's reads of the partition last stalled for
        more than two intervals (`_received`): counted from before a cut, it let a member back from the cut lead at
        once on its own old record, under a token older than one another member took meanwhile (seed 811: 63 after
        70)."""
        late = self.mode == "full" and now - msg.heartbeat.sent > self.interval
        if msg.caught_up and not late:
            own.behind_since = math.inf
            return False
        if own.behind_since == math.inf:
            own.behind_since = now
        return self.mode == "fast" or now < own.behind_since + self.interval

    def _claimed(self, msg: Received, now: float) -> None:
        """Full mode: another member leads `msg.partition` with the record's token. If that is newer than
        this member's leadership there, this one stands down at once and stays down while the claim is
        fresh: it is the stale side of an overlap (a member the group dropped that has not noticed yet, or
        a released leadership whose successor has started)."""
        hb = msg.heartbeat
        claim = hb.token
        sent = now - max(0.0, msg.wall - hb.wall)
        if claim is None or sent + self.timeout <= now:
            return
        released = self._released.get(msg.partition)
        if released is not None and released.token is not None and released.token < claim:
            del self._released[msg.partition]  # handed over in order: it ends as it would have at T, revoked
            self._end(released, fence=not released.orderly, until=now)
        own = self._owned.get(msg.partition)
        if own is None or own.last_token is None or own.last_token >= claim:
            return  # (a fresh assignment is not held back: its first own record is newer than any claim read)
        own.contested_until = max(own.contested_until, sent + self.timeout)
        if own.leading:
            self._fence_now(own, now)

    def _announce(self, partition: int, now: float) -> None:
        """Full mode: publish a new leadership's claim (a record carrying its token) as it begins, not at the next
        beat. The owner it succeeds, if the group dropped that one behind its back, leads on until it reads the claim
        (`_claimed`), extending its leadership on every member's records meanwhile: a claim one beat late costs an
        interval of overlap, and a successor paused or cut right after it began leaves its claim unwritten for as
        long, while the third member's records keep the old owner leading (found in simulation: kafka-full, seed
        4775 of `elect bench sim-neli`, the successor paused 0.1 s after it began, 2.59 s of overlap against the
        stated T + interval, 2.2 s). Published at once, the claim is in the log ahead of any record sent later than
        a network delay after the leadership began, which bounds what the old owner can still extend on."""
        if self.mode == "full" and self._publishing:
            self._ready.messages.append(Publish(partition, self._full_beat(partition, now)))

    def _follows(self, partition: int, offset: int, now: float) -> None:
        """`offset` was read from `partition`: it must follow the last record read there. Offsets of the leader topic
        follow on one by one (no transactions, no compaction), so a jump forward means the consumer moved past records
        nobody here read (`_skipped`); a jump back (a re-read after a log truncation) is harmless."""
        own = self._owned.get(partition)
        if own is None:
            return
        expected, own.next_offset = own.next_offset, offset + 1
        if expected is not None and offset > expected:
            self.skipped.append((partition, offset, expected))
            self._skipped(partition, now)

    def _skipped(self, partition: int, now: float) -> None:
        """Records of `partition` went unread: the rules above hold only for a member that reads every record of
        its partitions in order (a claim it never read cannot hold it back). A skipped record was sent by `now` at
        the latest, so a claim in it is fresh until `now + timeout` at most: the member treats the partition as
        contested until then, and a leadership there ends, since the claim may be newer than its start."""
        own = self._owned.get(partition)
        if own is None:
            return
        own.blind_until = max(own.blind_until, now + self.claim_timeout)
        if own.leading:
            self._fence_now(own, now)

    def _mine(self, hb: Heartbeat) -> bool:
        return hb.member == self.member and hb.instance == self.instance

    def _contest(self, own: _Ownership, msg: Received, now: float) -> None:
        """Fast mode: another member heartbeats on a partition this one owns, so it believes it owns it
        too (a member the group dropped that has not noticed yet, or an assignment handed over without
        this member's revoke). Nobody leads on a contested claim: a leader fences at once on a claim sent after its
        leadership began or appended after the record that began it (and fresh: the log's order is not the send
        order, so a claim sent earlier may still land later, its sender leading on it), and an owner acquires only
        once the other's heartbeats are `claim_timeout` old. The record's age comes from its sender's wall clock (as
        in full mode); a sender whose clock runs ahead only makes the wait longer, and `claim_timeout` over `timeout`
        is the margin for one that runs behind or slower. A sender's `released` record ends its
        claim: its records sent before it (on its own clock, whatever order they are read in) hold nobody back."""
        hb, wall = msg.heartbeat, msg.wall
        sender = (hb.member, hb.instance)
        if hb.released:
            own.released[sender] = max(own.released.get(sender, -math.inf), hb.sent)
            if own.claimed.get(sender, -math.inf) <= hb.sent:  # a claim sent after the release (read before it,
                own.claims.pop(sender, None)                   # the log's order not the send order) still stands
                own.claimed.pop(sender, None)
                own.contested_until = max(own.claims.values(), default=-math.inf)
            return
        if hb.sent <= own.released.get(sender, -math.inf):
            return  # a claim its sender has given up
        sent = now - max(0.0, wall - hb.wall)
        own.claimed[sender] = max(own.claimed.get(sender, -math.inf), hb.sent)
        own.claims[sender] = max(own.claims.get(sender, -math.inf), sent + self.claim_timeout)
        own.contested_until = max(own.contested_until, sent + self.claim_timeout)
        later = own.token is not None and msg.offset > own.token and sent + self.claim_timeout > now
        if own.leading and (sent >= own.since or later):
            self._fence_now(own, now)

    def _evidence(self, own: _Ownership, hb: HeartbeatRecord, now: float, wall: float) -> float | None:
        """When the record was sent, on this member's monotonic clock, if it counts as evidence (`wall`:
        this member's wall clock when it was read)."""
        mine = self._mine(hb)
        if self.mode == "fast":
            return hb.sent if mine and hb.epoch == own.epoch else None
        if mine:
            return hb.sent
        return now - max(0.0, wall - hb.wall)

    def _expire(self, now: float) -> None:
        for own in self._owned.values():
            if own.leading and own.deadline <= now:
                own.fenced_at = own.deadline
                self._end(own, fence=True, until=own.deadline)
        for k, own in list(self._released.items()):
            if own.deadline <= now:
                del self._released[k]
                self._end(own, fence=True, until=own.deadline)

    def _fence_now(self, own: _Ownership, now: float) -> None:
        """End a leadership at once on doubt about it; it resumes only on evidence sent after `now`."""
        own.fenced_at = now
        self._end(own, fence=True, until=now)

    def _end(self, own: _Ownership, *, fence: bool, until: float) -> None:
        self._ready.changes += [Fence(r, until) if fence else Revoke(r) for r in own.roles]
        own.roles, own.token, own.unled_since = [], None, until

    def _roles_of(self, partition: int) -> list[Role]:
        return [r for r in self._roles if partition_of(r, self.partitions) == partition]

    def _all(self) -> list[tuple[int, _Ownership]]:
        return [*self._owned.items(), *self._released.items()]

    def _full_beat(self, partition: int, now: float) -> Heartbeat:
        """Full mode's record for `partition`: the epoch of this member's ownership (0 if none) and, while it
        leads there, its token (released leaderships claim nothing: their successor is meant to take over)."""
        own = self._owned.get(partition)
        if own is None:
            return self._beat(0, now)
        return Heartbeat(group=self.group, member=self.member, instance=self.instance, epoch=own.epoch, sent=now,
                         token=own.token)

    def _beat(self, epoch: int, now: float, *, released: bool = False) -> Heartbeat:
        return Heartbeat(group=self.group, member=self.member, instance=self.instance, epoch=epoch, sent=now,
                         released=released)
