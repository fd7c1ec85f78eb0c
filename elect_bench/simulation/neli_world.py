"""Deterministic simulation of a NELI group (kafka://) on virtual time: the real core and driver against a broker.

Every member runs `neli.core.NeliCore` on `elect.driver.Driver` (its `turn` called on virtual time, no thread), as
`neli.elector.KafkaElector` does, against one simulated broker: the leader topic's partitions as logs (offsets,
high watermarks) and the group's coordinator (`elect_bench.simulation.kafka_group`: classic eager or cooperative
rounds, or KIP-848). What the elector and librdkafka do around the core is done here the same way:

- **The group client** (librdkafka's thread) heartbeats to the coordinator every group heartbeat interval and runs
  the protocol: joins (classic) or heartbeats its owned partitions (KIP-848), and hands the verdicts to the core as
  the rebalance callbacks do (`Assigned`, `Unassigned`, `lost` when the coordinator no longer knows it). A
  revocation in an exclusive mode holds the client until the Revoked callbacks returned (`revoke_delay`: the
  barrier), so the group cannot move the partition before. A client that hears nothing for the session timeout
  counts its partitions lost (librdkafka's session timeout check) and joins afresh.
- **The consumer** reads each newly assigned partition from `READ_BACK` records before its end, in order, one fetch
  in flight: the broker answers at once when there are records, else when one is appended or after the fetch wait.
  As librdkafka's fetcher, it fetches again as soon as an answer arrives and caches each partition's high
  watermark from the newest answer at once, while the answer's records reach the application's queue up to
  `FORWARD` later; the poll loop takes that queue a drawn moment after records arrive (a busy loop, now and then,
  much later). A record taken is `Received`, `caught_up` when the cached high watermark then showed nothing after
  it (the elector's `_at_end`): a newer answer may have moved it while its records are still on their way. With
  `prefetch=False` an answer's records are read as it arrives, against its own high watermark (a consumer that
  fetches only when the last answer was read: the model before 2026-11-28, kept for the seeds it found).
- **The producer** appends each heartbeat the core publishes, stamped with the sender's wall clock, and the poll
  loop hands each record on with the receiver's: true time here, as NTP keeps machines' wall clocks within
  milliseconds (a `drift` runs a member's monotonic clock at another rate). With `skewed_walls` a member's wall
  clock is its drifting clock, as under the harness's libfaketime: an offset that grows with the hold, which fast
  mode tolerates only up to `T x max_drift` (docs/clocks.md). A record sent while the member is cut waits in its queue
  until the link heals or its message timeout passes (the heartbeat timeout), then goes out late.
- **Leaderships** are kept by `elect.leaderships`, as every elector keeps them.

Faults (`kill`, `restart`, `stop`, `pause`, `cut`/`heal`, `freeze_store`: the broker, `set_rate`: a member's clock)
are scheduled with `at`. A member's clock times its core, deadlines, group heartbeats and session check, and its
producer's message timeout; the broker times sessions and fetch waits on its own (true) clock. A
frozen broker serves nothing until it wakes; then it serves the requests its sockets held in a drawn order and
expires the sessions it had not heard from, in an order drawn among them (a real one races the two).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from elect.core import Ready, Revoke
from elect.driver import Driver, FunctionIO
from elect.roles import Role
from elect_bench.simulation.kafka_group import Answer, Assigned, GroupCoordinator, Protocol, Rebalancing, Unknown
from elect_bench.simulation.linked import LinkedWorld, ServerLink, SimMember
from elect_bench.simulation.recorded import Recorder
from neli import core as neli
from neli.core import READ_BACK, NeliCore, NeliInput, Publish, Received
from neli.heartbeat import HeartbeatRecord
from neli.membership import Membership, Move
from neli.options import KafkaOptions

INF = math.inf
WAKE_SPREAD = 0.005
"""Seconds within which a woken broker serves what its sockets held, in a drawn order."""
FORWARD = 0.002
"""Longest time a fetch answer's records take from librdkafka's fetcher to the application's queue (drawn)."""


@dataclass
class _Member(SimMember):
    core: NeliCore | None = None
    membership: Membership | None = None
    # the group client
    member_id: str | None = None
    generation: int = 0
    in_group: bool = False
    joining: bool = False
    join_sent: float = -INF
    requests: int = 0  # join (classic) or first heartbeat (KIP-848) requests sent: answers to older ones are stale
    heard_at: float = 0.0  # the coordinator's last answer
    blocked_until: float = -INF  # the Revoked callbacks of a revocation run until then (the barrier)
    # the consumer and the producer
    positions: dict[int, int] = field(default_factory=dict)  # partition -> offset of the next record to fetch
    high: dict[int, int] = field(default_factory=dict)  # partition -> high watermark of the newest fetch answer
    fetched: list[tuple[float, int, int, HeartbeatRecord]] = field(default_factory=list)  # (pollable at, p, offset, r)
    polling: bool = False  # the poll loop will take what was fetched
    fetching: bool = False
    unsent: list[tuple[float, int, HeartbeatRecord]] = field(default_factory=list)  # (expires, partition, record)
    stopping: bool = False


class NeliWorld(LinkedWorld[_Member]):
    """Members of one NELI group on one simulated broker (see the module docstring)."""

    def __init__(self, options: KafkaOptions, protocol: Protocol, members: Mapping[str, Sequence[Role]], seed: int,
                 link: ServerLink | None = None, *, partitions: int = 12, revoke_delay: float = 0.002,
                 start_jitter: float = 0.1, local_session_check: bool = True, prefetch: bool = True,
                 skewed_walls: bool = False) -> None:
        super().__init__(seed, link or ServerLink(), wake_spread=WAKE_SPREAD)
        self.options = options
        self.protocol = protocol
        self.partitions = partitions
        self.revoke_delay = revoke_delay
        self.local_session_check = local_session_check
        self.prefetch = prefetch
        self.skewed_walls = skewed_walls
        self.group = GroupCoordinator(protocol, partitions, options.session_timeout)
        self.log: list[list[HeartbeatRecord]] = [[] for _ in range(partitions)]
        self.members = {name: _Member(name, tuple(roles), Recorder(name, self.history))
                        for name, roles in members.items()}
        self._parked: dict[str, tuple[_Member, int, dict[int, int]]] = {}  # fetches waiting for records
        self._expiry_check = False
        self._answers_to: dict[str, tuple[_Member, int, int]] = {}  # member id -> (member, incarnation, request)
        self.start_all(start_jitter)

    @property
    def fetch_wait(self) -> float:
        """librdkafka's fetch.wait.max.ms as the elector sets it."""
        return max(1, min(100, round(self.options.interval * 500))) / 1000

    # ------------------------------------------------------------------ faults
    def kill(self, name: str) -> None:
        """The process dies: its leaderships end now; the group hears of it when its session expires."""
        m = self.members[name]
        if not m.up:
            return
        m.keeper.fence_all(self.local(m), "killed")
        self._parked.pop(name, None)
        m.up, m.core, m.driver, m.membership, m.stopping = False, None, None, None, False
        m.member_id, m.in_group, m.joining, m.fetching, m.polling = None, False, False, False, False
        m.positions.clear()
        m.high.clear()
        m.fetched.clear()
        m.unsent.clear()
        m.wake_at = INF
        m.incarnation += 1

    def stop(self, name: str, limit: float = 5.0) -> None:
        """A graceful stop (SIGTERM) as the elector makes it on Apache Kafka: no more heartbeats, every partition given
        up in order, the group left; the process exits once it leads nothing (or after `limit` seconds)."""
        m = self.members[name]
        if not m.up:
            return
        if self.held(m, partial(self.stop, name, limit)):
            return
        core, membership = m.core, m.membership
        assert core is not None and membership is not None
        m.stopping = True
        core.stop()
        self.after(m, limit, partial(self._exit, m, m.incarnation))
        if membership.stop(self.local(m), m.in_group, None) is Move.LEAVE:
            self._leave(m)
        self._turn(m, [])

    def _healed(self, m: _Member) -> None:
        """Queued records go out, the consumer fetches again (a cut member's producer keeps its records queued)."""
        self.at(self.now, partial(self._reconnect, m, m.incarnation))

    def freeze_store(self, duration: float) -> None:
        """The broker stops for `duration` (SIGSTOP): nothing is appended, fetched or answered until it wakes."""
        self.frozen_until = max(self.frozen_until, self.now + duration)

    # ------------------------------------------------------------------ observation
    def _start(self, name: str) -> None:
        m = self.members[name]
        o = self.options
        m.up = True
        m.incarnation += 1
        m.paused_until = m.blocked_until = -INF
        m.heard_at = self.local(m)
        m.core = NeliCore(group=o.group_id, member=m.name, instance=f"{m.name}.{m.incarnation}",
                          partitions=self.partitions, roles=m.roles, **o.core_settings())
        m.membership = Membership(o.rejoin, o.session_timeout, can_park=False)
        io: FunctionIO[Publish, None] = FunctionIO(apply=partial(self._apply, m),
                                                   send=lambda out, now: self._send(m, out), halted=_raise,
                                                   idle=partial(self._idle, m))
        m.driver = Driver(m.core, io, name=f"sim-{m.name}", max_inbox=None, tick_every_turn=True)
        self._group_tick(m, m.incarnation)
        self._turn(m, [])

    def _exit(self, m: _Member, inc: int) -> None:
        if self.current(m, inc):
            self.kill(m.name)

    def _apply(self, m: _Member, ready: Ready[Publish, None], now: float) -> None:
        """The elector's `_apply_ready`: an exclusive mode's revocation holds the loop until the callbacks returned."""
        m.keeper.apply(ready.changes, now)
        if self.options.exclusive and any(isinstance(c, Revoke) for c in ready.changes):
            m.blocked_until = self.true_at(m, now + self.revoke_delay)

    def _idle(self, m: _Member, now: float) -> float:
        """The deadline timer, and the end of a stop (once nothing is led, or its time ran out)."""
        m.keeper.expire(now)
        core, membership = m.core, m.membership
        if m.stopping and core is not None and membership is not None and \
                membership.due(now, bool(core.leading_partitions())) is Move.FINISH:
            self.at(self.now, partial(self._exit, m, m.incarnation))
        return m.keeper.next_deadline()

    def _wall(self, m: _Member, t: float | None = None) -> float:
        """`m`'s wall clock at true time `t` (now): true time, or with `skewed_walls` its own clock."""
        t = self.now if t is None else t
        return self.local(m, t) if self.skewed_walls else t

    def _after_barrier(self, m: _Member, fn: Callable[[], None]) -> None:
        """`fn` once the Revoked callbacks of the last revocation returned."""
        inc = m.incarnation
        self.at(max(self.now, m.blocked_until), lambda: fn() if self.current(m, inc) else None)

    # ------------------------------------------------------------------ the producer
    def _send(self, m: _Member, out: list[Publish]) -> None:
        at = max(self.now, m.blocked_until)
        for publish in out:
            hb = publish.heartbeat
            record = HeartbeatRecord(group=hb.group, member=hb.member, instance=hb.instance, epoch=hb.epoch,
                                     sent=hb.sent, token=hb.token, released=hb.released, wall=self._wall(m, at))
            if at > self.now:
                self.at(at, partial(self._produce, m, publish.partition, record, m.incarnation))
            else:
                self._produce(m, publish.partition, record, m.incarnation)

    def _produce(self, m: _Member, partition: int, record: HeartbeatRecord, inc: int) -> None:
        if not self.current(m, inc):
            return
        if m.cut:  # waits in the producer's queue for the link, until its message timeout (on its clock)
            m.unsent.append((self.local(m) + self.options.timeout, partition, record))
            return
        self.to_server(m, partial(self._append, partition, record))

    def _append(self, partition: int, record: HeartbeatRecord) -> None:
        self.log[partition].append(record)
        for name, (m, inc, wanted) in list(self._parked.items()):
            if partition in wanted:
                del self._parked[name]
                self._answer_fetch(m, inc, wanted)

    # ------------------------------------------------------------------ the consumer
    def _fetch(self, m: _Member) -> None:
        """One fetch in flight: sent now for the assigned partitions from their positions."""
        if m.fetching or not m.positions or not m.up:
            return
        m.fetching = True
        wanted, inc = dict(m.positions), m.incarnation
        self.to_server(m, partial(self._serve_fetch, m, inc, wanted))

    def _serve_fetch(self, m: _Member, inc: int, wanted: dict[int, int]) -> None:
        if any(len(self.log[p]) > at for p, at in wanted.items()):
            self._answer_fetch(m, inc, wanted)
            return
        self._parked[m.name] = (m, inc, wanted)

        def waited() -> None:
            if self._parked.get(m.name, (None, 0, {}))[2] is wanted:
                del self._parked[m.name]
                self._answer_fetch(m, inc, wanted)

        self.at(self.now + self.fetch_wait, waited)

    def _answer_fetch(self, m: _Member, inc: int, wanted: dict[int, int]) -> None:
        if self.now < self.frozen_until:
            self.at(self.frozen_until, partial(self._answer_fetch, m, inc, wanted))
            return
        records = {p: (at, self.log[p][at:], len(self.log[p])) for p, at in wanted.items()}
        self.to_member(m, inc, partial(self._fetched, m, records))

    def _fetched(self, m: _Member, records: dict[int, tuple[int, list[HeartbeatRecord], int]]) -> None:
        """A fetch answered (librdkafka's fetcher): the records that follow on from each partition's position are
        queued for the poll loop, the high watermarks cached, and the next fetch sent at once."""
        m.fetching = False
        if not self.prefetch:
            self._read_now(m, records)
            return
        ready = self.now + self.rng.random() * FORWARD  # in order: not before the answers before it
        if m.fetched and m.fetched[-1][0] > ready:
            ready = m.fetched[-1][0]
        for p, (first, batch, high) in records.items():
            at = m.positions.get(p)
            if at is None or at < first:
                continue  # no longer assigned, or assigned afresh since (that fetch's records are dropped)
            m.high[p] = max(m.high.get(p, 0), high)
            for offset in range(at, first + len(batch)):
                m.fetched.append((ready, p, offset, batch[offset - first]))
            m.positions[p] = max(at, first + len(batch))
        self._poll_later(m, ready)
        self._fetch(m)

    def _read_now(self, m: _Member, records: dict[int, tuple[int, list[HeartbeatRecord], int]]) -> None:
        """`prefetch=False`: the answer's records that follow on from each position are read at once, caught up by
        the answer's own high watermark; then the next fetch."""
        read: list[NeliInput] = []
        for p, (first, batch, high) in records.items():
            at = m.positions.get(p)
            if at is None or at < first:
                continue
            for offset in range(at, first + len(batch)):
                read.append(Received(p, offset, batch[offset - first], self._wall(m), offset + 1 >= high))
            m.positions[p] = max(at, first + len(batch))
        if read:
            self._turn(m, read)
        self._fetch(m)

    def _poll_later(self, m: _Member, ready: float) -> None:
        if m.fetched and not m.polling:
            m.polling = True
            self.at(ready + self.link.request(self.rng), partial(self._poll, m, m.incarnation))

    def _poll(self, m: _Member, inc: int) -> None:
        """The poll loop takes what was fetched: each record `Received`, caught up by the cached high watermark."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._poll, m, inc)):
            return
        m.polling = False
        now, wall = self.now, self._wall(m)
        taken = [f for f in m.fetched if f[0] <= now]
        m.fetched = [f for f in m.fetched if f[0] > now]
        read: list[NeliInput] = [Received(p, offset, record, wall, offset + 1 >= m.high.get(p, 0))
                                 for _, p, offset, record in taken if p in m.positions]
        if read:
            self._turn(m, read)
        if m.fetched:
            self._poll_later(m, m.fetched[0][0])

    def _reconnect(self, m: _Member, inc: int) -> None:
        """The link healed: queued records within their timeout go out, the consumer fetches again."""
        if not self.current(m, inc) or m.cut:
            return
        if self.held(m, partial(self._reconnect, m, inc)):
            return
        queued, m.unsent, now = m.unsent, [], self.local(m)
        for expires, partition, record in queued:
            if now < expires:
                self.to_server(m, partial(self._append, partition, record))
        m.fetching = False
        self._fetch(m)

    # ------------------------------------------------------------------ the group client
    def _group_tick(self, m: _Member, inc: int) -> None:
        """librdkafka's group heartbeat, every group heartbeat interval while the process runs."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._group_tick, m, inc)):
            return
        o, now = self.options, self.local(m)
        if m.joining and now - m.join_sent >= o.session_timeout:
            m.joining = False  # no answer: try again
        if self.local_session_check and m.in_group and not m.joining and now - m.heard_at >= o.session_timeout:
            self._lose(m)  # librdkafka's session timeout: the assignment is lost
        if not m.stopping and self.now >= m.blocked_until:
            if not m.in_group and not m.joining:
                self._join(m)
            elif m.in_group and not m.joining:
                self._heartbeat(m)
        self.after(m, o.group_interval, partial(self._group_tick, m, inc))

    def _owned(self, m: _Member) -> frozenset[int]:
        return m.core.owned if m.core is not None else frozenset()

    def _join(self, m: _Member) -> None:
        """Join the group: a JoinGroup (classic), a first heartbeat (KIP-848)."""
        m.joining, m.join_sent = True, self.local(m)
        m.requests += 1
        inc, request, owned, member_id = m.incarnation, m.requests, self._owned(m), m.member_id

        def arrive() -> None:
            if self.protocol == "consumer":
                answer = self.group.heartbeat(None, m.name, 0, owned, self.now)
                if isinstance(answer, Assigned):
                    self._answers_to[answer.member_id] = (m, inc, request)
                    self.to_member(m, inc, partial(self._answered, m, request, answer))
            else:
                mid, answers = self.group.join(member_id, m.name, owned, self.now)
                self._answers_to[mid] = (m, inc, request)
                self._deliver(answers)
            self._arm_expiry()

        self.to_server(m, arrive)

    def _heartbeat(self, m: _Member) -> None:
        inc, request, owned, mid, gen = m.incarnation, m.requests, self._owned(m), m.member_id, m.generation

        def arrive() -> None:
            answer = self.group.heartbeat(mid, m.name, gen, owned, self.now)
            self._arm_expiry()
            self.to_member(m, inc, partial(self._answered, m, request, answer))

        self.to_server(m, arrive)

    def _deliver(self, answers: Mapping[str, Answer]) -> None:
        """Answers due from the coordinator (a classic round completed) to the members that asked."""
        for mid, answer in answers.items():
            target = self._answers_to.get(mid)
            if target is not None:
                m, inc, request = target
                self.to_member(m, inc, partial(self._answered, m, request, answer))

    def _answered(self, m: _Member, request: int, answer: Answer) -> None:
        """The coordinator's answer reached the member's group client."""
        if request != m.requests or m.stopping:
            return  # an answer to an earlier join: the member has joined again since
        m.heard_at = self.local(m)
        if isinstance(answer, Unknown):
            self._lose(m)
        elif isinstance(answer, Rebalancing):
            if not m.joining:
                self._rejoin(m)
        elif isinstance(answer, Assigned):
            m.member_id, m.generation, m.joining, m.in_group = answer.member_id, answer.generation, False, True
            self._reconcile(m, answer.partitions)

    def _rejoin(self, m: _Member) -> None:
        """A classic round began: eager gives everything up first, cooperative joins keeping what it owns."""
        m.joining, m.join_sent = True, self.local(m)
        if self.protocol == "eager" and self._owned(m):
            self._give_up(m, self._owned(m))
        self._after_barrier(m, lambda: self._join(m))

    def _reconcile(self, m: _Member, partitions: frozenset[int]) -> None:
        """What the rebalance callbacks do with an assignment: revoke what is no longer ours, then (KIP-848, or
        cooperative with nothing to revoke) take on the new partitions. Cooperative joins again after a revocation;
        KIP-848 tells the coordinator at once."""
        owned = self._owned(m)
        revoked = owned - partitions
        if revoked:
            self._give_up(m, revoked)
            if self.protocol == "cooperative":
                m.joining, m.join_sent = True, self.local(m)
                self._after_barrier(m, lambda: self._join(m))
                return
            if self.protocol == "consumer":
                self._after_barrier(m, lambda: self._heartbeat(m) if m.in_group else None)
        added = sorted(partitions - owned)
        if added:
            self._take(m, added, held=owned - revoked)

    def _take(self, m: _Member, added: list[int], held: frozenset[int]) -> None:
        """`_on_assign`: the core told, reads start `READ_BACK` records before the end; a fetch waiting on the
        partitions held before ends with a heartbeat round."""
        for p in added:
            m.positions[p] = max(0, len(self.log[p]) - READ_BACK)
        self._turn(m, [neli.Assigned(tuple(added))])
        if held and m.core is not None and m.driver is not None:
            m.core.beat_now(self.local(m))
            self._turn(m, [])
        self._fetch(m)

    def _give_up(self, m: _Member, partitions: frozenset[int], lost: bool = False) -> None:
        for p in partitions:
            m.positions.pop(p, None)
            m.high.pop(p, None)
        m.fetched = [f for f in m.fetched if f[1] not in partitions]
        self._turn(m, [neli.Unassigned(tuple(sorted(partitions)), lost=lost)])

    def _lose(self, m: _Member) -> None:
        """The coordinator no longer knows the member (or it heard nothing for the session): every partition is
        lost, and it joins afresh."""
        owned = self._owned(m)
        if owned:
            self._give_up(m, owned, lost=True)
        m.member_id, m.generation, m.in_group, m.joining = None, 0, False, False
        m.requests += 1  # answers on their way are for the member id it had

    def _leave(self, m: _Member) -> None:
        """`_close_consumer`: give up what it owns, in order, then LeaveGroup; the consumer reads no more."""
        owned = self._owned(m)
        if owned:
            self._give_up(m, owned)
        m.positions.clear()
        m.fetched.clear()
        mid, m.member_id, m.in_group, m.joining = m.member_id, None, False, False
        m.requests += 1
        if mid is not None:
            self._after_barrier(m, lambda: self.to_server(m, lambda: self._deliver(self.group.leave(mid, self.now))))

    # ------------------------------------------------------------------ the coordinator's clock
    def _arm_expiry(self) -> None:
        if self._expiry_check:
            return
        due = self.group.expiry_due()
        if due is not None:
            self._expiry_check = True
            self.at(due, self._expire)

    def _expire(self) -> None:
        self._expiry_check = False
        if self.now < self.frozen_until:  # on waking, it races the requests its sockets held
            self._expiry_check = True
            self.at(self.frozen_until + self.rng.random() * WAKE_SPREAD, self._expire)
            return
        self._deliver(self.group.expire(self.now))
        self._arm_expiry()


def _raise(error: Exception) -> None:  # pragma: no cover - nothing is persisted; a bug raises at once
    raise AssertionError(error)
