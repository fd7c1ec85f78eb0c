"""`KafkaElector`: the NELI core driven by a Kafka consumer group and a producer, on the library's driver loop.

Everything Kafka and everything that touches the core happens on the driver's thread (`elect.driver`), in order:
rebalance callbacks and records read back (both inside the consumer's poll, where the loop waits between turns),
clock ticks, and the commands that API calls (`resign`, role changes, `stop`) post to it. After each input the
driver hands on the core's `Ready`: its leadership changes applied, then its heartbeats published, each stamped
with the wall clock as it is sent (the core reads no clock). A revocation is handed to the application inside the
rebalance callback and the callback waits for its `Revoked` callbacks, so the group cannot give the
partition to a successor before the application has finished (goNELI's barrier). The base elector's
deadline timer fences a leadership on the member's own clock if its evidence stops, even while this
thread is blocked in a broker call.

A member cannot give a single partition back to the group, so `resign` and removing a led role hand
every partition of the member over and come back after `rejoin_delay`; the assignor may give the
partition back then (leadership in NELI is what the assignor decides).

Parking instead of LeaveGroup. To hand its partitions over, a member subscribes to the parking topic
(`TOPIC.parked`, see neli/topic.py) instead of the leader topic: the rebalance callback revokes its
partitions in order (the barrier), it rejoins the group owning nothing of the leader topic, and after
`rejoin_delay` it subscribes to the leader topic again. It stays a member throughout and sends no
LeaveGroup. `stop` parks the same way and closes the consumer (which does send LeaveGroup) only once
the rebalance that parked it has completed. The reason is the group coordinator: a LeaveGroup from the
group's leader while the group is rebalancing must make the coordinator choose a new leader, and the
Tansu broker (0.6) does not: it keeps the departed member as the group's leader, so every later
JoinGroup names a leader that no longer exists, nobody computes an assignment, SyncGroup answers
REBALANCE_IN_PROGRESS for ever and no partition is assigned again (members that resigned within a few
milliseconds of each other left the group leaderless in about half the runs). A member that is evicted
(its session expires) is handled correctly, and so is a LeaveGroup while the group is stable, which is
when a parked member leaves. Without a parking topic (it could not be created) the member leaves the
group and rejoins, as before.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from elect.base import BaseElector
from elect.contract import Characteristics
from elect.core import Acquire, Extend, Ready, Revoke
from elect.driver import Driver, FunctionIO
from elect.errors import ElectError
from elect.reach import require_listening
from elect.roles import Role, partition_of
from elect.runtime import THREADS, Runtime
from neli.core import READ_BACK, Assigned, Foreign, NeliCore, NeliInput, Publish, Received, Unassigned
from neli.group import configure_group, speaks_consumer_protocol, warn_of_broker_defaults
from neli.heartbeat import Heartbeat
from neli.kafka_errors import config_error, refusal
from neli.membership import Membership, Move
from neli.options import KafkaOptions
from neli.topic import admin_client, end_offsets, ensure_parking_topic, ensure_topic, partition_count

log = logging.getLogger("neli")
_TAIL = -2000 - READ_BACK  # librdkafka's logical offset for that (RD_KAFKA_OFFSET_TAIL)
kafka_log = logging.getLogger("neli.librdkafka")

INF = math.inf


class KafkaElector(BaseElector):
    """One member of a NELI group (see neli/__init__.py for the modes and what each promises)."""

    scheme = "kafka"
    unobservable = ("a NELI member knows only the partitions the group assigned to it; who owns the others is "
                    "known to the group's coordinator and leader, not to the member (elect watch kafka://... "
                    "reads the assignment from the broker)")
    untransferable = ("in NELI the Kafka group's assignor decides which member owns each partition, and a member "
                      "can only leave or rejoin the group, not name the member that gets its partition (resign "
                      "hands the role to whichever member the assignor picks)")
    steps = (("assigned_to_sent", "from the group's assignment of a partition (the rebalance callback) to the first "
                                  "own heartbeat on it handed to the producer"),
             ("sent_to_led", "from that heartbeat handed to the producer to leading on it: produced, fetched and read "
                             "back (the offset lookup before the partition's first fetch included)"),
             ("assigned_to_led", "from the assignment to leading the partition's roles (`acquired`)"),
             ("stop_to_revoked", "from a stop (or a hand-over) asked for to the Revoked callbacks of every role it led "
                                 "returned"),
             ("revoked_to_left", "from there to the consumer closed: the group told the member left"))

    def __init__(self, options: KafkaOptions, member: str, roles: tuple[Role, ...], *,
                 runtime: Runtime = THREADS) -> None:
        super().__init__(member, roles, runtime=runtime)
        self.options = options
        if options.mode == "fast":  # full mode's deadlines move on any member's record: no round trip of ours
            self.renewal = "seconds from publishing an own heartbeat to reading it back (fast mode's renewal)"
        self.revoke_timeout = options.revoke_timeout
        self.instance = uuid.uuid4().hex[:12]
        self.partitions = 0
        self._core: NeliCore | None = None
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._driver: Driver[NeliInput, Publish, None] | None = None
        self._wakeup = threading.Event()  # cuts short a wait without a consumer to poll
        self._joined = threading.Event()
        self._fatal: ElectError | None = None
        self._parking_topic: str | None = None  # None: hand over by leaving the group
        self._membership = Membership(options.rejoin, options.session_timeout, can_park=False)  # (set at start)
        self._restore_after = self._clock() + 5 * options.session_timeout  # next check for a vanished topic
        self._admin: Any = None  # start offsets of new partitions and that check (made at start)
        self.publish_errors = 0
        # step timings (`steps`): partition -> when it was assigned, when its first heartbeat went to the producer
        self._assigned_at: dict[int, float] = {}
        self._sent_at: dict[int, float] = {}
        self._kept: list[int] = []  # partitions kept through the last rebalance callback, not yet read since
        self._kept_at = -math.inf  # when that callback ran (`_wake_stalled`)
        self._stop_asked: float | None = None
        self._unled_check = 0.0  # `_report_unled`: next check, partitions reported
        self._unled_said: set[int] = set()
        self._last_read: dict[int, tuple[int, Heartbeat, float]] = {}  # partition -> offset, record, when (that report)

    @property
    def characteristics(self) -> Characteristics:
        return self.options.characteristics()

    # ----------------------------------------------------------------- lifecycle hooks
    def _on_start(self) -> None:
        o = self.options
        require_listening("Kafka", o.servers)
        self.partitions = ensure_topic(o)
        admin = self._admin = admin_client(o)
        if o.protocol == "consumer":
            configure_group(admin, o)
        else:
            warn_of_broker_defaults(admin, o)
        # How to hand partitions over (resign, stop): Apache Kafka 4+ (it offers KIP-848's API) moves a member's
        # partitions as soon as it leaves the group, and with cooperative-sticky it would not move partitions
        # dropped by a subscription change (librdkafka reports them lost, and no follow-up rebalance comes),
        # so there a member leaves. Other brokers (Tansu) keep a departed member's partitions: park instead.
        if not speaks_consumer_protocol(o):
            try:
                self._parking_topic = ensure_parking_topic(o)
            except (ElectError, KafkaException) as exc:
                log.warning("neli: %s: no parking topic (%s); resign will leave the group instead", self.member, exc)
        self._begin(Producer(self._producer_config()))
        self._require_driver().start()
        joined = self._joined.wait(o.connect_timeout)
        if self._fatal is not None:
            self._on_stop(None)
            raise self._fatal
        if not joined:
            log.warning("neli: %s has not joined group %r within %g s; it keeps trying", self.member, o.group_id,
                        o.connect_timeout)

    def _begin(self, producer: Producer) -> None:
        """The core, the producer, the consumer (subscribed: the group is joined from the loop) and the loop's driver,
        not started (`_on_start` starts it; the simulator turns it)."""
        o = self.options
        self._membership = Membership(o.rejoin, o.session_timeout, can_park=self._parking_topic is not None)
        self._core = NeliCore(group=o.group_id, member=self.member, instance=self.instance,
                              partitions=self.partitions, roles=self.roles, **o.core_settings())
        self._producer = producer
        self._consumer = self._new_consumer()
        # the loop waits in the consumer's poll (its callbacks, which step the core, run inside it) and turns at
        # least every poll interval (`_idle`)
        io: FunctionIO[Publish, None] = FunctionIO(
            apply=self._apply_ready, send=self._send,
            halted=lambda error: self._failed(f"its poll loop failed: {error!r}"), idle=self._idle, ended=self._ended)
        self._driver = Driver(self._core, io, name=f"neli-{self.member}", max_inbox=None, tick_every_turn=True,
                              wait=self._poll, wake=self._wake_loop(), clock=self._clock)

    def _wake_loop(self) -> Callable[[], None]:
        """What the driver calls when something is posted to it: cuts short a wait without a consumer to poll."""
        return self._wakeup.set

    def _on_stop(self, timeout: float | None) -> None:
        driver = self._require_driver()
        stop_by = None if timeout is None else time.monotonic() + timeout  # overlap mode leads out T until then
        if not driver.post(lambda now: self._begin_stop(now, stop_by)):
            return  # the loop ended already
        if not driver.on_driver_thread and not self._dispatcher.on_dispatch_thread() and not driver.join(timeout):
            driver.stop(self.close_wait)  # out of time: the loop ends after its turn, leaving the group

    def _on_resign(self, role: Role) -> None:
        self._command(lambda now: self._hand_over((role,)))

    def _on_roles_changed(self, added: tuple[Role, ...], removed: tuple[Role, ...]) -> None:
        self._command(lambda now: self._set_roles(removed, now))

    def _command(self, fn: Callable[[float], None]) -> None:
        """Run `fn` on the loop; wait for it unless that would deadlock (called from a callback: the loop may be
        waiting for that very callback)."""
        driver, done = self._require_driver(), threading.Event()

        def command(now: float) -> None:
            try:
                fn(now)
            finally:
                done.set()

        if not driver.post(command):
            return  # the loop ended: nothing to do the command on
        if not driver.on_driver_thread and not self._dispatcher.on_dispatch_thread():
            done.wait(self.options.revoke_timeout + self.options.session_timeout + 5)

    # ----------------------------------------------------------------- on the loop
    def _begin_stop(self, now: float, stop_by: float | None) -> None:
        self._stop_asked = now
        self._require_core().stop()
        joined = self._joined.is_set() and self._fatal is None and self._consumer is not None
        self._move(self._membership.stop(now, joined, stop_by))

    def _set_roles(self, removed: tuple[Role, ...], now: float) -> None:
        core = self._require_core()
        led = core.leading_roles()
        core.set_roles(self.roles, now)
        self._require_driver().flush(now)
        if any(r in led for r in removed):
            self._hand_over(())  # let a member that still contends take the partition

    def _poll(self, seconds: float) -> None:
        """Wait for the group and the partitions: poll the consumer (its rebalance callbacks and the records read
        step the core on this thread), or, out of the group, wait for a command."""
        wait = min(seconds, self.options.poll)
        if self._consumer is not None:
            for msg in _read(self._consumer, wait):
                self._on_message(msg)
        else:
            self._wakeup.wait(wait)
            self._wakeup.clear()

    def _idle(self, now: float) -> float:
        """After each turn: the end of a stop, a rejoin that is due, the producer's callbacks, a vanished topic,
        partitions owned but not led; the next turn one poll interval later at the latest."""
        core = self._require_core()
        if self._move(self._membership.due(now, bool(core.leading_partitions()))) is Move.FINISH:
            return INF
        if self._producer is not None:
            self._producer.poll(0)
        if not core.owned and not self._membership.stopping:
            self._restore_topics()
        self._report_unled(now)
        self._wake_stalled(now)
        return now + self.options.poll

    def _ended(self) -> None:
        self._close_consumer()
        if self._producer is not None:
            self._producer.flush(1.0)
        self._joined.set()

    def _report_unled(self, now: float) -> None:
        """Log, once per partition until it is led, an owned partition with roles to lead that this member has not
        led for five heartbeat timeouts, and what holds it back (the core's view, and the last record read there)."""
        if now < self._unled_check:
            return
        self._unled_check = now + 1.0
        stuck = dict(self._require_core().unled(now, 5 * self.options.timeout))
        for partition, why in stuck.items():
            if partition not in self._unled_said:
                read = self._last_read.get(partition)
                last = "nothing read" if read is None else (f"last read offset {read[0]} from {read[1].member}/"
                                                            f"{read[1].instance} {now - read[2]:.1f} s ago")
                log.warning("neli: %s owns partition %d but has not led it: %s; %s", self.member, partition, why, last)
        self._unled_said = set(stuck)

    def _hand_over(self, roles: tuple[Role, ...]) -> None:
        """Give every partition back to the group and rejoin after `rejoin_delay`."""
        now = self._clock()
        self._require_core().resign(roles, now)
        self._require_driver().flush(now)
        self._move(self._membership.hand_over(now, self._consumer is not None))

    def _move(self, move: Move) -> Move:
        """Carry out what `Membership` decided with the consumer."""
        if move is Move.PARK:
            self._park()
        elif move is Move.LEAVE:
            self._close_consumer()
        elif move is Move.REJOIN:
            if self._consumer is None:
                self._consumer = self._new_consumer()
            else:
                self._subscribe(self._consumer, self.options.topic)
        elif move is Move.FINISH:
            self._require_driver().finish()  # the consumer is closed on the way out (LeaveGroup)
        return move

    def _park(self) -> None:
        """Subscribe to the parking topic.

        The member first gives up what it owns, in order (Revoked, and the barrier), as the rebalance callback
        would: librdkafka (2.x, cooperative-sticky, on Apache Kafka) reports partitions dropped by a subscription
        change as lost, not revoked. Nobody else can be given them before the rebalance this change starts."""
        assert self._parking_topic is not None and self._consumer is not None
        core = self._require_core()
        if core.owned:
            self._feed(Unassigned(tuple(sorted(core.owned))))
        self._membership.parked(bool(core.owned))
        self._subscribe(self._consumer, self._parking_topic)

    # ----------------------------------------------------------------- Kafka callbacks
    def _new_consumer(self) -> Consumer:
        consumer = Consumer(self._consumer_config())
        self._subscribe(consumer, self.options.topic)
        return consumer

    def _subscribe(self, consumer: Consumer, topic: str) -> None:
        consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)

    def _close_consumer(self) -> None:
        """Leave the group: give up what the member owns first, in order (Revoked, and the barrier), as `_park` does,
        then close the consumer (which sends the LeaveGroup) on a thread of its own, waiting at most `close_wait`.

        librdkafka's close can hang (an assignment that arrives while it closes: librdkafka #4527, #4883), and a
        stop must not: once the member leads nothing, the close only tells the group early what the session's
        expiry would tell it anyway. The closing consumer's rebalance callbacks are ignored from then on, so only
        the poll thread ever touches the core."""
        self._membership.left()
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        core = self._require_core()
        led = bool(core.leading_partitions())
        if core.owned:
            self._forget(sorted(core.owned))
            self._feed(Unassigned(tuple(sorted(core.owned))))
        began = self._clock()
        asked, self._stop_asked = self._stop_asked, None
        if asked is not None and led:
            self._timed("stop_to_revoked", began - asked)
        self._close(consumer, began, asked is not None and led)

    def _close(self, consumer: Consumer, began: float, timed: bool) -> None:
        """Close `consumer` (LeaveGroup) on a thread of its own, waiting at most `close_wait` (librdkafka's close can
        hang); with `timed`, the time it took from `began` is the step `revoked_to_left`."""
        closer = threading.Thread(target=self._close_now, args=(consumer,), name=f"neli-{self.member}-close",
                                  daemon=True)
        closer.start()
        closer.join(self.close_wait)
        if timed and not closer.is_alive():
            self._timed("revoked_to_left", self._clock() - began)
        if closer.is_alive():
            log.warning("neli: %s: the consumer has not closed after %.1f s; leaving it to close in the background "
                        "(the group moves its partitions once the session of %g s expires)", self.member,
                        self._clock() - began, self.options.session_timeout)

    @property
    def close_wait(self) -> float:
        """How long leaving the group may take before the member stops without waiting for it."""
        return max(5.0, 3 * self.options.session_timeout)

    def _close_now(self, consumer: Consumer) -> None:
        try:
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("neli: %s: closing the consumer failed: %s", self.member, exc)

    def _partitions(self, parts: list[TopicPartition]) -> list[int]:
        return [p.partition for p in parts if p.topic == self.options.topic]

    def _on_assign(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a consumer closing (`_close_consumer`): the core gave its partitions up already
        self._joined.set()
        ours = self._partitions(parts)
        self._membership.assigned(bool(ours))
        now = self._clock()
        core = self._require_core()
        held = core.owned
        for p in ours:
            if p not in held:
                self._assigned_at[p] = now
        starts = self._start_offsets(ours)
        self._kept, self._kept_at = sorted(held), now
        try:  # what the core publishes on an assignment goes out once the consumer reads the new partitions
            core.step(Assigned(tuple(ours), tuple(starts.get(p) for p in ours)), now)
        except Exception:  # an exception must not escape into librdkafka's callback machinery
            log.exception("neli: %s: rebalance callback failed", self.member)
        start = [TopicPartition(p.topic, p.partition, starts.get(p.partition, _TAIL))
                 if p.topic == self.options.topic else p for p in parts]
        try:
            if self.options.assignment == "cooperative-sticky":
                consumer.incremental_assign(start)
            else:
                consumer.assign(start)
        except KafkaException as exc:
            log.warning("neli: %s: could not set start offsets (%s); reading from the end", self.member, exc)
        self._require_driver().flush(self._clock())

    def _start_offsets(self, partitions: list[int]) -> dict[int, int]:
        """Where to start reading newly assigned partitions: a few records before the end, not at it, at offsets
        looked up on the admin client's connection rather than the consumer's (those it could not look up start at
        librdkafka's logical tail offset, resolved when it fetches).

        The heartbeat published on assignment usually lands before the fetcher has looked up the end
        offset, so starting at the end would miss it and delay leadership by a heartbeat interval. Older
        records are harmless: a leadership starts only on this assignment's own heartbeats, all written
        after it, so the token rule holds (older records of others at most extend a full-mode leadership,
        and only while their sender's wall clock says they are fresh).

        Why not librdkafka's own lookup (a logical offset): a broker serves one connection's requests one at a
        time, and the consumer's connection usually carries a fetch waiting up to fetch.wait.max.ms for its other
        partitions' records, so the lookup waited behind it, and the fetch after it too. With an absolute offset
        the partition can be fetched at once, and the assignment's heartbeat round ends the waiting fetch.
        """
        ends = end_offsets(self._admin, self.options.topic, partitions, self.options.interval) if self._admin else {}
        return {p: max(0, ends[p] - READ_BACK) for p in partitions if p in ends}

    def _on_revoke(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a consumer closing (`_close_consumer`): the core gave its partitions up already
        self._forget(self._partitions(parts))
        self._guarded(Unassigned(tuple(self._partitions(parts))))
        self._kept, self._kept_at = sorted(self._require_core().owned), self._clock()
        self._revoked()

    def _wake_stalled(self, now: float) -> None:
        """Partitions kept through a rebalance callback and not read since, two heartbeat intervals on: wake their
        fetch (`_wake_fetch`). librdkafka pauses the fetch of every partition a member holds while a callback runs and
        resumes the kept ones by clearing a flag in its main thread, which does not wake the broker thread that
        fetches them: with nothing else in flight that thread sleeps on for up to a second, and the member reads none
        of its own heartbeats there, long enough for leaderships to lapse (seen on KIP-848: 0.61-0.63 s). Only
        a stalled fetch is woken: a request at every rebalance sat in the handover's way (KIP-848 rolling restart
        0.19 s at the median, against 0.105 s without)."""
        if not self._kept or now < self._kept_at + 2 * self.options.interval:
            return
        kept, since, self._kept = self._kept, self._kept_at, []
        owned = self._require_core().owned
        unread = [p for p in kept if p in owned and not self._read_since(p, since)]
        if unread and self._consumer is not None:
            self._wake_fetch(self._consumer, unread)

    def _read_since(self, partition: int, since: float) -> bool:
        read = self._last_read.get(partition)
        return read is not None and read[2] >= since

    def _wake_fetch(self, consumer: Consumer, kept: list[int]) -> None:
        """Ask each of `kept`'s brokers for the partition's watermarks, on a thread of its own: a request to the
        broker, its send and its answer, wakes the broker thread that fetches the partition; the answer itself does
        not matter."""
        topic, wait = self.options.topic, self.options.session_timeout

        def ask() -> None:
            for p in kept:
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=wait, cached=False)
                except (KafkaException, RuntimeError):  # a consumer closed meanwhile, a broker away: nothing to wake
                    return

        threading.Thread(target=ask, name=f"neli-{self.member}-wake", daemon=True).start()

    def _forget(self, partitions: list[int]) -> None:
        """Partitions taken away: no steps to time for them if they were not led."""
        for p in partitions:
            self._assigned_at.pop(p, None)
            self._sent_at.pop(p, None)

    def _revoked(self) -> None:
        self._membership.revoked(bool(self._require_core().owned))

    def _on_lost(self, consumer: Consumer, parts: list[TopicPartition]) -> None:
        if consumer is not self._consumer:
            return  # a consumer closing (`_close_consumer`): the core gave its partitions up already
        self._forget(self._partitions(parts))
        owned = [p for p in self._partitions(parts) if p in self._require_core().owned]
        if owned:  # (partitions given up before parking are reported lost too: nothing to say about those)
            log.warning("neli: %s lost partitions %s (session expired behind its back)", self.member, owned)
        self._guarded(Unassigned(tuple(self._partitions(parts)), lost=True))
        self._revoked()

    def _guarded(self, message: NeliInput) -> None:
        try:
            self._feed(message)
        except Exception:  # an exception must not escape into librdkafka's callback machinery
            log.exception("neli: %s: rebalance callback failed", self.member)

    def _on_message(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            self._on_kafka_error(err)
            return
        if msg.topic() != self.options.topic:
            return  # the parking topic carries nothing
        partition, offset = msg.partition(), msg.offset()
        if partition is None or offset is None:
            return
        heartbeat = Heartbeat.decode(msg.value())
        if heartbeat is None:
            self._feed(Foreign(partition, offset))  # its offset counts: the core checks that none is skipped
            return
        self._last_read[partition] = (offset, heartbeat, self._clock())  # formatted only if reported
        at_end = self._at_end(self.options.topic, partition, offset)
        self._feed(Received(partition, offset, heartbeat, self._runtime.wall(), at_end))

    def _at_end(self, topic: str, partition: int, offset: int) -> bool:
        """No later record of the partition was known at the last fetch: librdkafka updates its cached high
        watermark with every fetch response (no request here)."""
        consumer = self._consumer
        if consumer is None:
            return True
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except (KafkaException, RuntimeError):
            return True  # unknown: as before (the start then rests on the contest rules alone)
        return high < 0 or offset + 1 >= high

    def _on_kafka_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and self._core is not None:
            self._restore_topics()
            return
        problem: ElectError | None = config_error(err, self.options) or refusal(err, self.options)
        if problem is not None:
            log.error("neli: %s: %s", self.member, problem)
            if not self._joined.is_set():
                self._fatal = problem
                self._joined.set()
            return
        level = logging.ERROR if err.fatal() else logging.WARNING
        log.log(level, "neli: %s: Kafka: %s", self.member, err.str())

    # ----------------------------------------------------------------- the core's output
    def _feed(self, message: NeliInput) -> None:
        """A verdict of the group or a record read, stepped in on the loop (inside its poll) and handed on at once."""
        now = self._clock()
        core = self._require_core()
        core.step(message, now)
        self._require_driver().flush(now)
        while core.skipped:
            partition, offset, expected = core.skipped.pop(0)
            log.warning("neli: %s read partition %d at offset %d, expected %d: %d records skipped unread; the "
                        "partition counts as contested for %g s", self.member, partition, offset, expected,
                        offset - expected, self.options.timeout)

    def _apply_ready(self, ready: Ready[Publish, None], now: float) -> None:
        """Apply the core's changes (the driver publishes after). Only the last `Revoke` waits for its callbacks:
        events run in order on one dispatcher, so that wait covers the earlier ones too (the barrier). In overlap
        mode nothing waits: the successor does not wait for the callbacks anyway, and a blocked loop would let
        other partitions' releases pass their deadlines, turning their orderly ends into fences."""
        core = self._require_core()
        if self.renewal is not None:
            for deadline in {c.deadline for c in ready.changes if isinstance(c, Extend)}:
                self._renewed(now - (deadline - core.timeout))  # the deadline is the record's send time + timeout
        barrier = self.options.exclusive
        last_revoke = max((i for i, c in enumerate(ready.changes) if barrier and isinstance(c, Revoke)), default=-1)
        for i, change in enumerate(ready.changes):
            self._apply_change(change, wait=i == last_revoke)
            if isinstance(change, Acquire) and self._assigned_at:
                self._led(partition_of(change.role, core.partitions))

    def _led(self, partition: int) -> None:
        """The first leadership on `partition` since its assignment began: time its steps (once per assignment)."""
        assigned = self._assigned_at.pop(partition, None)
        sent = self._sent_at.pop(partition, None)
        if assigned is None:
            return
        now = self._clock()
        self._timed("assigned_to_led", now - assigned)
        if sent is not None:
            self._timed("sent_to_led", now - sent)

    def _send(self, messages: list[Publish], now: float) -> None:
        for publish in messages:
            self._publish(publish)

    def _publish(self, out: Publish) -> None:
        if self._producer is None:
            return
        assigned = self._assigned_at.get(out.partition)
        if assigned is not None and out.partition not in self._sent_at:
            self._sent_at[out.partition] = now = self._clock()
            self._timed("assigned_to_sent", now - assigned)
        try:
            self._producer.produce(self.options.topic, out.heartbeat.encode(self._runtime.wall()),
                                   partition=out.partition)
        except (BufferError, KafkaException) as exc:
            self.publish_errors += 1  # the broker is unreachable: leadership lapses by its deadline
            if self.publish_errors in (1, 10, 100) or self.publish_errors % 1000 == 0:
                log.warning("neli: %s: heartbeat not queued (%d so far): %s", self.member, self.publish_errors, exc)

    # ----------------------------------------------------------------- configuration
    def _require_core(self) -> NeliCore:
        assert self._core is not None, "the elector was not started"
        return self._core

    def _require_driver(self) -> Driver[NeliInput, Publish, None]:
        assert self._driver is not None, "the elector was not started"
        return self._driver

    def _common_config(self) -> dict[str, Any]:
        o = self.options
        return {"bootstrap.servers": o.bootstrap, "client.id": self.member, "reconnect.backoff.ms": 20,
                # a topic created again (see _restore_topics) is noticed within this, not librdkafka's 5 min
                "topic.metadata.refresh.interval.ms": round(5000 * o.session_timeout),
                "reconnect.backoff.max.ms": 500, "socket.connection.setup.timeout.ms": int(o.connect_timeout * 1000),
                "error_cb": self._on_kafka_error, "logger": kafka_log, **o.client_security()}

    def _consumer_config(self) -> dict[str, Any]:
        o = self.options
        config = {**self._common_config(),
                  "group.id": o.group_id,
                  **({"group.protocol": "consumer"} if o.protocol == "consumer" else {
                      # classic: the client states its timeouts and assignor (KIP-848: the broker's group configs)
                      "session.timeout.ms": round(o.session_timeout * 1000),
                      "heartbeat.interval.ms": max(1, round(o.group_interval * 1000)),
                      "partition.assignment.strategy": o.assignment}),
                  "max.poll.interval.ms": round(max(o.session_timeout, o.revoke_timeout + 10) * 1000),
                  "enable.auto.commit": False,
                  "enable.auto.offset.store": False,
                  "auto.offset.reset": "latest",
                  "fetch.wait.max.ms": max(1, min(100, round(o.interval * 500))),
                  "fetch.error.backoff.ms": 50}
        if o.static_membership:
            config["group.instance.id"] = self.member
        return config

    def _restore_topics(self) -> None:
        """The leader topic may be gone (a broker that lost its log, or an operator deleted it): if so,
        create it again with the group's M partitions. Checked at most every 5 session timeouts, while
        this member owns nothing or the broker says the topic is unknown. Nothing else may create it: a
        topic auto-created by a broker would have the broker's default partition count, not M."""
        now = self._clock()
        if now < self._restore_after:
            return
        self._restore_after = now + 5 * self.options.session_timeout
        options = replace(self.options, partitions=self.partitions,
                          connect_timeout=min(self.options.connect_timeout, self.options.session_timeout))
        try:
            if self._admin is None:  # one client for the life of the member: this check repeats while idle
                self._admin = admin_client(options)
            if partition_count(self._admin, options, time.monotonic() + options.connect_timeout):
                return
            log.warning("neli: %s: topic %s is missing; creating it again with %d partitions", self.member,
                        options.topic, self.partitions)
            ensure_topic(options)
            ensure_parking_topic(options)
            if self._consumer is not None and self._membership.on_leader_topic:
                # join afresh with the new topic's metadata; the rebalance brings the other members along
                self._subscribe(self._consumer, options.topic)
        except (ElectError, KafkaException) as exc:
            log.info("neli: %s: could not check or create topic %s: %s", self.member, options.topic, exc)

    def _producer_config(self) -> dict[str, Any]:
        """acks=1 is enough for tokens: a heartbeat counts (and gives a token) only once read back, and consumers
        read only below the high watermark, so such a record is on every in-sync replica and survives a broker."""
        o = self.options
        return {**self._common_config(), "allow.auto.create.topics": False,
                "linger.ms": 0, "acks": 1, "enable.idempotence": False,
                "message.timeout.ms": max(1, round(o.timeout * 1000)),
                "queue.buffering.max.messages": 10000}


def _read(consumer: Consumer, wait: float, most: int = 500) -> list[Message]:
    """What the consumer has within `wait` seconds (records, errors; rebalance callbacks run meanwhile), returned as
    soon as there is something: a batch `consume(most, wait)` waits out the whole of `wait` unless `most` messages
    arrive (librdkafka's batch semantics), which held every heartbeat read back for up to the poll interval: the
    graceful handovers and renewals of a 1 s session waited 25 ms at the median for nothing."""
    first = consumer.poll(wait)
    if first is None:
        return []
    return [first, *consumer.consume(most - 1, 0)]


def create(options: KafkaOptions, member: str, roles: tuple[Role, ...]) -> KafkaElector:
    return KafkaElector(options, member, roles)
