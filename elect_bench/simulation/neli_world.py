"""Deterministic simulation of a NELI group (kafka://) on virtual time: the real elector against a broker.

Every member is a `neli.elector.KafkaElector`, core, driver, membership moves and callbacks as `kafka://` members run
them, on virtual time (`elect_bench.simulation.runtime`; its driver turned by the world), against one simulated
broker: the leader topic's partitions as logs (offsets, high watermarks) and the group's coordinator
(`elect_bench.simulation.kafka_group`: classic eager or cooperative rounds, or KIP-848). What librdkafka does around
the elector is simulated here (`SimConsumer`, `SimProducer`: the callbacks, fetches and records it hands the elector):

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
- **Leaderships** are the elector's own: fenced by its deadline timer (on the world's queue) when they lapse.

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
from typing import Any

from confluent_kafka import TopicPartition

from elect.core import Ready, Revoke
from elect.leaderships import Leaderships
from elect.roles import Role
from elect_bench.simulation.kafka_group import Answer, Assigned, GroupCoordinator, Protocol, Rebalancing, Unknown
from elect_bench.simulation.linked import LinkedWorld, ServerLink, SimMember
from elect_bench.simulation.recorded import Recorder
from elect_bench.simulation.runtime import SimRuntime
from neli.core import Publish
from neli.elector import KafkaElector
from neli.options import KafkaOptions

INF = math.inf
WAKE_SPREAD = 0.005
"""Seconds within which a woken broker serves what its sockets held, in a drawn order."""
FORWARD = 0.002
"""Longest time a fetch answer's records take from librdkafka's fetcher to the application's queue (drawn)."""


class SimMessage:
    """A record as librdkafka's poll hands it to the elector."""

    __slots__ = ("_offset", "_partition", "_topic", "_value")

    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value


class SimConsumer:
    """The elector's consumer: its subscription's callbacks (which the world's group client calls), the start offsets
    it is given, the high watermarks of its newest fetch answers, and its close (the LeaveGroup)."""

    def __init__(self, world: NeliWorld, m: _Member) -> None:
        self._world = world
        self._m = m
        self.topic = ""
        self.on_assign: Callable[[Any, list[TopicPartition]], None] | None = None
        self.on_revoke: Callable[[Any, list[TopicPartition]], None] | None = None
        self.on_lost: Callable[[Any, list[TopicPartition]], None] | None = None

    def subscribe(self, topics: list[str], *, on_assign: Callable[[Any, list[TopicPartition]], None],
                  on_revoke: Callable[[Any, list[TopicPartition]], None],
                  on_lost: Callable[[Any, list[TopicPartition]], None]) -> None:
        self.topic = topics[0]
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost

    def incremental_assign(self, parts: list[TopicPartition]) -> None:
        self._world.start_reading(self._m, {tp.partition: tp.offset for tp in parts})

    def assign(self, parts: list[TopicPartition]) -> None:
        self._world.start_reading(self._m, {tp.partition: tp.offset for tp in parts})

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False) -> tuple[int, int]:
        return -1, self._m.high.get(tp.partition, -1)

    def close(self) -> None:
        self._world.leave(self._m)


class SimProducer:
    """The elector's producer: each record to the broker over the member's link (queued while it is cut)."""

    def __init__(self, world: NeliWorld, m: _Member) -> None:
        self._world = world
        self._m = m

    def produce(self, topic: str, value: bytes, partition: int) -> None:
        self._world.produce(self._m, partition, value)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0


class SimKafkaElector(KafkaElector):
    """The real `KafkaElector` of member `m`, its Kafka clients simulated by `world` (see the module)."""

    def __init__(self, world: NeliWorld, m: _Member) -> None:
        super().__init__(world.options, m.name, m.roles,
                         runtime=SimRuntime(world, m, wall=partial(world.wall, m)))
        self.world = world
        self.sim = m
        self.instance = f"{m.name}.{m.incarnation}"  # a new one per run, drawn from the seed's course, not at random

    def _on_start(self) -> None:
        self.partitions = self.world.partitions
        self._begin(SimProducer(self.world, self.sim))  # type: ignore[arg-type]

    def _new_consumer(self) -> Any:
        consumer = self.sim.consumer = SimConsumer(self.world, self.sim)
        self._subscribe(consumer, self.options.topic)  # type: ignore[arg-type]
        return consumer

    def _wake_loop(self) -> Callable[[], None]:
        return partial(self.world.pump_soon, self.sim)

    def _close(self, consumer: Any, began: float, timed: bool) -> None:
        consumer.close()

    def _restore_topics(self) -> None:
        pass  # the simulated broker keeps its topic

    def _wake_fetch(self, consumer: Any, kept: list[int]) -> None:
        pass  # the simulated consumer does not pause its fetch over a rebalance callback

    def _apply_ready(self, ready: Ready[Publish, None], now: float) -> None:
        """As the member's: an exclusive mode's revocation holds the loop until the Revoked callbacks returned (they
        take `revoke_delay` here: the barrier)."""
        super()._apply_ready(ready, now)
        if self.options.exclusive and any(isinstance(c, Revoke) for c in ready.changes):
            self.sim.blocked_until = self.world.true_at(self.sim, now + self.world.revoke_delay)

    def _send(self, messages: list[Publish], now: float) -> None:
        """What the core publishes goes out once the loop is free (after a barrier), stamped then."""
        world, m = self.world, self.sim
        if world.now < m.blocked_until:
            inc = m.incarnation
            world.at(m.blocked_until, lambda: super(SimKafkaElector, self)._send(messages, world.local(m))
                     if world.current(m, inc) else None)
            return
        super()._send(messages, now)


@dataclass
class _Member(SimMember):
    elector: SimKafkaElector | None = None
    consumer: SimConsumer | None = None  # the elector's current consumer (None: out of the group)
    pumping: bool = False  # a turn of its driver is queued
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
    fetched: list[tuple[float, int, int, bytes]] = field(default_factory=list)  # (pollable at, p, offset, record)
    polling: bool = False  # the poll loop will take what was fetched
    fetching: bool = False
    unsent: list[tuple[float, int, bytes]] = field(default_factory=list)  # (expires, partition, record)
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
        self.log: list[list[bytes]] = [[] for _ in range(partitions)]
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
        if m.elector is not None:
            m.elector._fence_all()
        self._parked.pop(name, None)
        m.up, m.elector, m.driver, m.consumer, m.stopping, m.pumping = False, None, None, None, False, False
        m.keeper = Leaderships(m.recorder)
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
        e = m.elector
        assert e is not None
        m.stopping = True
        e._require_driver().post(lambda now: e._begin_stop(now, None))
        self.after(m, limit, partial(self._exit, m, m.incarnation))

    def _healed(self, m: _Member) -> None:
        """Queued records go out, the consumer fetches again (a cut member's producer keeps its records queued)."""
        self.at(self.now, partial(self._reconnect, m, m.incarnation))

    def freeze_store(self, duration: float) -> None:
        """The broker stops for `duration` (SIGSTOP): nothing is appended, fetched or answered until it wakes."""
        self.frozen_until = max(self.frozen_until, self.now + duration)

    # ------------------------------------------------------------------ the member's process
    def _start(self, name: str) -> None:
        m = self.members[name]
        m.up = True
        m.incarnation += 1
        m.paused_until = m.blocked_until = -INF
        m.heard_at = self.local(m)
        e = m.elector = SimKafkaElector(self, m)
        m.keeper = e._held
        e.subscribe(m.recorder.event)
        e.start()
        m.driver = e._driver
        self._group_tick(m, m.incarnation)
        self.pump_soon(m)

    def _exit(self, m: _Member, inc: int) -> None:
        if self.current(m, inc):
            e = m.elector
            if e is not None and e._consumer is not None:
                e._close_consumer()  # the loop's end closes the consumer (LeaveGroup)
            self.kill(m.name)

    def pump_soon(self, m: _Member) -> None:
        """Something was posted to `m`'s loop: it takes a turn now (once, however much was posted)."""
        if not m.pumping and m.up:
            m.pumping = True
            self.at(self.now, partial(self._pump, m, m.incarnation))

    def _pump(self, m: _Member, inc: int) -> None:
        """The member's loop takes a turn (when it resumes, if paused), then its next wake-up is armed; a loop that
        finished ends as the thread's does, and the process exits."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._pump, m, inc)):
            return
        m.pumping = False
        e = m.elector
        assert e is not None
        driver = e._require_driver()
        now = self.local(m)
        wake, extra = driver.pump(now)
        if driver.stopping:
            e._ended()
            self.kill(m.name)
            return
        at = max(min(wake, extra), now)
        if at < m.wake_at or m.wake_at < now:
            m.wake_at = at
            if at < INF:
                self.at_local(m, at, partial(self._wake_pump, m, inc, at))

    def _wake_pump(self, m: _Member, inc: int, at: float) -> None:
        if self.current(m, inc) and m.wake_at == at:
            m.wake_at = INF
            self._pump(m, inc)

    def wall(self, m: _Member, t: float | None = None) -> float:
        """`m`'s wall clock at true time `t` (now): true time, or with `skewed_walls` its own clock."""
        t = self.now if t is None else t
        return self.local(m, t) if self.skewed_walls else t

    def _after_barrier(self, m: _Member, fn: Callable[[], None]) -> None:
        """`fn` once the Revoked callbacks of the last revocation returned."""
        inc = m.incarnation
        self.at(max(self.now, m.blocked_until), lambda: fn() if self.current(m, inc) else None)

    # ------------------------------------------------------------------ the producer
    def produce(self, m: _Member, partition: int, record: bytes) -> None:
        """`SimProducer.produce`: the record goes out over the member's link (queued while it is cut)."""
        if m.cut:  # waits in the producer's queue for the link, until its message timeout (on its clock)
            m.unsent.append((self.local(m) + self.options.timeout, partition, record))
            return
        self.to_server(m, partial(self._append, partition, record))

    def _append(self, partition: int, record: bytes) -> None:
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

    def _fetched(self, m: _Member, records: dict[int, tuple[int, list[bytes], int]]) -> None:
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

    def _read_now(self, m: _Member, records: dict[int, tuple[int, list[bytes], int]]) -> None:
        """`prefetch=False`: the answer's records that follow on from each position are read at once, caught up by
        the answer's own high watermark; then the next fetch."""
        read: list[SimMessage] = []
        topic = self.options.topic
        for p, (first, batch, high) in records.items():
            at = m.positions.get(p)
            if at is None or at < first:
                continue
            m.high[p] = high
            read += [SimMessage(topic, p, offset, batch[offset - first]) for offset in range(at, first + len(batch))]
            m.positions[p] = max(at, first + len(batch))
        self._hand(m, read)
        self._fetch(m)

    def _poll_later(self, m: _Member, ready: float) -> None:
        if m.fetched and not m.polling:
            m.polling = True
            self.at(ready + self.link.request(self.rng), partial(self._poll, m, m.incarnation))

    def _poll(self, m: _Member, inc: int) -> None:
        """The poll loop takes what was fetched: each record handed to the elector (`_on_message`), which reads it
        caught up by the cached high watermark."""
        if not self.current(m, inc):
            return
        if self.held(m, partial(self._poll, m, inc)):
            return
        m.polling = False
        now, topic = self.now, self.options.topic
        taken = [f for f in m.fetched if f[0] <= now]
        m.fetched = [f for f in m.fetched if f[0] > now]
        self._hand(m, [SimMessage(topic, p, offset, record) for _, p, offset, record in taken if p in m.positions])
        if m.fetched:
            self._poll_later(m, m.fetched[0][0])

    def _hand(self, m: _Member, messages: list[SimMessage]) -> None:
        """Records from the poll, to the elector (inside its loop's poll), then the loop's turn."""
        e = m.elector
        if not messages or e is None:
            return
        for msg in messages:
            e._on_message(msg)  # type: ignore[arg-type]
        self.pump_soon(m)

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
        e = m.elector
        return e._core.owned if e is not None and e._core is not None else frozenset()

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
            self._revoke(m, self._owned(m))
        self._after_barrier(m, lambda: self._join(m))

    def _reconcile(self, m: _Member, partitions: frozenset[int]) -> None:
        """What the rebalance callbacks do with an assignment: revoke what is no longer ours, then (KIP-848, or
        cooperative with nothing to revoke) take on the new partitions. Cooperative joins again after a revocation;
        KIP-848 tells the coordinator at once."""
        owned = self._owned(m)
        revoked = owned - partitions
        if revoked:
            self._revoke(m, revoked)
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
        """The assign callback (`KafkaElector._on_assign`): the elector tells its core, sets the start offsets
        (`start_reading`), and ends a fetch waiting on the partitions held before with a heartbeat round."""
        consumer = m.consumer
        if consumer is not None and consumer.on_assign is not None:
            consumer.on_assign(consumer, [TopicPartition(self.options.topic, p) for p in added])
            self.pump_soon(m)
        self._fetch(m)

    def start_reading(self, m: _Member, offsets: Mapping[int, int]) -> None:
        """The consumer's start offsets for newly assigned partitions: a logical tail offset (librdkafka's
        OFFSET_TAIL(n): n records before the end) resolved against the log now, as librdkafka resolves it."""
        for p, offset in offsets.items():
            m.positions[p] = max(0, len(self.log[p]) + offset + 2000) if offset < -1000 else offset

    def _revoke(self, m: _Member, partitions: frozenset[int], lost: bool = False) -> None:
        """The revoke (or lost) callback: the elector gives the partitions up; the consumer reads them no more."""
        for p in partitions:
            m.positions.pop(p, None)
            m.high.pop(p, None)
        m.fetched = [f for f in m.fetched if f[1] not in partitions]
        consumer = m.consumer
        callback = None if consumer is None else consumer.on_lost if lost else consumer.on_revoke
        if callback is not None:
            callback(consumer, [TopicPartition(self.options.topic, p) for p in sorted(partitions)])
            self.pump_soon(m)

    def _lose(self, m: _Member) -> None:
        """The coordinator no longer knows the member (or it heard nothing for the session): every partition is
        lost, and it joins afresh."""
        owned = self._owned(m)
        if owned:
            self._revoke(m, owned, lost=True)
        m.member_id, m.generation, m.in_group, m.joining = None, 0, False, False
        m.requests += 1  # answers on their way are for the member id it had

    def leave(self, m: _Member) -> None:
        """`SimConsumer.close` (the elector gave up what it owned, in order): the consumer reads no more, and the
        LeaveGroup goes once the Revoked callbacks returned."""
        m.consumer = None
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
