"""The lease elector's pure core: one member's view of a store's role keys, and what to do next.

It follows `elect.core`'s protocol: `step(message, now)` takes observations of the store (role keys,
membership entries) and the outcome of the actions it asked for (`Done`); `tick(now)` decides; commands
(roles changed, resign, stop, and the driver's notices: released, lapsed, suspended, rebind) are
methods. `ready()` hands over leadership changes and store actions. No I/O, threads or sleeps, so the
etcd, ZooKeeper and Kubernetes stores share every decision and tests run it on virtual time.

Safety: a leadership's deadline is `sent + renew_deadline`, `sent` being when the last renewal that
succeeded was sent (and never past the store's own lease). A contender takes a key over only after
the holder's membership entry has not changed for `ttl` on the contender's clock, and only with a
compare on that very entry, so a renewal that lands first defeats the takeover. As
`renew_deadline < ttl`, the old leader has stopped by its own clock before any successor starts.
A renewal confirms only keys it saw as still ours, so one racing a takeover extends nothing.

Fair sharing: each member publishes the roles it contends for, its `weight` and its `max_roles`. Every member
computes every live member's share of the roles the live group contends for by one rule (`elect.shares`):
ceil(roles x weight / total live weight), a cap below that being the member's share and the rest spread over
the others by weight. With weights 1 and no caps that is `ceil(roles / live members)` for all. A member leading
its share leaves a free role to a live member below its own share that wants it (for `fair_delay`, longer while
the others are seen taking roles: `_patience`), and sheds
(orderly) roles beyond its share to such a member once the imbalance has lasted `fair_delay`, at most
`rebalance_limit` roles per `rebalance_window`. A cap is soft for the same reason a share is: a role nobody
below their share wants is taken anyway, so a member past its cap leads what no one else can (a role only it
contends for, or all of them once the others died), and hands the excess on once someone can take it. Weights
and caps are each member's own say, published, not agreed: a member whose record is older than these fields
reads as weight 1, no cap.

Transfer: a member handing a role to a named one resigns it and publishes the hint in its record for
`resign_backoff`; while the hint stands and the named member is live, the others leave the free role to it,
and the named member takes it at once. It then leads that role pinned: fair sharing does not shed it (an
operator's choice stands while the leadership lasts).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from cas_lease.model import (
    Create,
    Delete,
    Done,
    Expire,
    Holder,
    KeepAlive,
    LeaseInput,
    LeaseSeen,
    MemberRecord,
    MemberSeen,
    Observation,
    Publish,
    Renew,
    RoleSeen,
    Snapshot,
    StoreAction,
    Take,
)
from elect.budget import HandoverBudget
from elect.core import Acquire, ExtendShared, Fence, LeaderSeen, Ready, Revoke
from elect.options import rule
from elect.roles import Role
from elect.shares import Capacity, check_capacity, shares

INF = math.inf


@dataclass(frozen=True)
class Timing:
    """The core's clocks, in seconds.

    ttl: a holder silent this long (on the contender's clock) may be taken over; for ZooKeeper the
    session timeout. renew_interval: renewal period. renew_deadline: a leader whose last successful
    renewal was sent this long ago stops. fair_delay: how long a member at its fair share leaves a
    free role to one below its share. resign_backoff: how long a resigned role is left to others
    (and how soon a shed role may be shed again). retry_interval: pause after a failed request.
    silence_takeover: contenders time holders (etcd) rather than trusting the store to delete their
    keys (ZooKeeper sessions). keepalive_interval: period of the store's backstop lease renewal
    (None: no lease). rebalance_limit: at most this many roles shed for fairness in any rebalance_window
    seconds (None: no limit).
    """

    ttl: float
    renew_interval: float
    renew_deadline: float
    fair: bool = True
    fair_delay: float = 0.25
    resign_backoff: float = 1.0
    retry_interval: float = 0.05
    silence_takeover: bool = True
    keepalive_interval: float | None = None
    ttl_name: str = "ttl"
    rebalance_limit: int | None = None
    rebalance_window: float = 10.0

    def __post_init__(self) -> None:
        check_timing(self.ttl, self.renew_interval, self.renew_deadline, self.ttl_name)
        rule(self.fair_delay >= 0, "fair_delay", "must be >= 0")
        rule(self.resign_backoff >= 0, "resign_backoff", "must be >= 0")
        rule(self.retry_interval > 0, "retry_interval", "must be > 0")
        rule(self.keepalive_interval is None or self.keepalive_interval > 0, "keepalive_interval", "must be > 0")
        rule(self.rebalance_limit is None or self.rebalance_limit >= 1, "rebalance_limit", "must be >= 1")
        rule(self.rebalance_window > 0, "rebalance_window", "must be > 0")


def check_timing(ttl: float, renew_interval: float, renew_deadline: float, ttl_name: str = "ttl") -> None:
    """renew_interval < renew_deadline < ttl: a leader retries before it must stop, and stops before
    anyone may take over."""
    rule(ttl > 0, ttl_name, "must be > 0")
    rule(renew_interval > 0, "renew_interval", "must be > 0")
    rule(renew_interval < renew_deadline, "renew_deadline",
         f"must be longer than renew_interval ({renew_deadline:g} <= {renew_interval:g}): "
         "a leader must get to retry a failed renewal before it has to stop")
    rule(renew_deadline < ttl, "renew_deadline",
         f"must be shorter than {ttl_name} ({renew_deadline:g} >= {ttl:g}): a leader must stop before "
         "a contender may take over")


@dataclass
class _RoleView:
    holder: Holder | None
    as_of: int


@dataclass
class _MemberView:
    record: MemberRecord | None  # None: no entry in the directory
    version: int
    as_of: int
    changed_at: float  # when this member first saw the current version (or absence)
    silence: float = 0.0  # the silence its last record declared, kept across a deletion reported in order

    def dies(self, ttl: float) -> float:
        """When this member counts as gone if nothing changes: `ttl` (or the longer silence its record declared)
        after its current version was first seen."""
        return self.changed_at + max(ttl, self.silence)


@dataclass
class _Lead:
    """A leadership of this member. Every one lasts until the core's shared deadline (`LeaseCore._lead_until`): one
    renewal extends them all (`ExtendShared`)."""

    token: int
    since: float = -math.inf
    fenced: bool = False
    pinned: bool = False  # taken by a transfer to this member: not shed for fairness


class LeaseCore:
    """The state machine of one member (one session) of a lease group.

    Inputs and commands mutate state and return nothing; `tick(now)` decides, and must be called after
    them. Store actions stay in flight until their `Done` is stepped in.
    """

    def __init__(self, member: str, session: str, timing: Timing, roles: Iterable[Role], now: float,
                 lease_until: float = INF, *, weight: float = 1.0, max_roles: int | None = None) -> None:
        check_capacity(weight, max_roles)
        self.member = member
        self.session = session
        self.timing = timing
        self.capacity = Capacity(weight, max_roles)
        self._wanted: tuple[Role, ...] = ()
        self._wanted_set: frozenset[Role] = frozenset()
        self._order: tuple[Role, ...] = ()
        self._roles: dict[Role, _RoleView] = {}
        # What a tick looks at, kept as observations arrive so that a tick costs what changed, not the roles:
        self._held_by: dict[str, set[Role]] = {}  # session -> the roles whose key it holds, as seen
        self._free: set[Role] = set()             # wanted roles whose key nobody holds, as seen
        self._lost: set[Role] = set()             # led or releasing roles whose key has changed since
        self._lead_until = -INF                   # the deadline every leadership of this member follows
        self._universe_size: tuple[object, int] | None = None  # (what it was computed from, roles contended for)
        self._ranks: dict[Role, bytes] = {}
        self._prefs: dict[Role, list[str]] = {}  # role -> sessions in its rendezvous order (`_plan`)
        self._prefs_of: tuple[tuple[str, str], ...] = ()  # the (session, member) pairs `_prefs` were made for
        self._members: dict[str, _MemberView] = {}
        self._leading: dict[Role, _Lead] = {}
        self._releasing: dict[Role, _Lead] = {}  # handed to the handover thread: kept valid until released
        self._to_release: set[Role] = set()      # decided, Revoke not yet emitted
        self._must_delete: dict[Role, int] = {}  # released: delete the key with this token, whatever else
        self._deleting: set[Role] = set()
        self._abandoned: set[Role] = set()       # stopping and the store did not answer: leave to expiry
        self._creating: set[Role] = set()        # a Create or Take in flight
        self._expiring: set[Role] = set()
        self._retry_at: dict[Role, float] = {}
        self._free_since: dict[Role, float] = {}
        self._freed_by: dict[Role, str] = {}  # the session that held a role now free: not left to it (`_plan`)
        self._taken_at = -INF  # when another member was last seen taking a role (the group making progress)
        self._backoff: dict[Role, float] = {}   # resigned: left to others, and published as such
        self._hints: dict[Role, str] = {}       # transferred: the member named, published while backing off
        self._pin: set[Role] = set()            # being created on a transfer to this member
        self._affinities: dict[tuple[str, Role], bytes] = {}  # (member, role) -> its place in the role's order
        self._shed_at: dict[Role, float] = {}   # when a role was last shed: not shed again for a while
        self._excess_since: float | None = None  # since when this member has led more than its share
        self._shed_budget = HandoverBudget(timing.rebalance_limit, timing.rebalance_window)
        self._ready: Ready[StoreAction, None] = Ready()
        self._stopping = False
        self._renew_inflight = False
        self._renewed_sent: float | None = None  # when the last successful renewal was sent
        self._renew_asked = -INF   # when the renewal in flight (or the last one) was asked for
        self._unled: dict[Role, float] = {}  # keys of ours not taken up (`_outlasts`), since when
        self._renew_latency = 0.0  # how long the last successful renewal took, asked to answered
        self._next_renew = now
        self._ka_inflight = False
        self._next_ka = now + (timing.keepalive_interval or 0.0)
        self._lease_until = lease_until
        self._record_dirty = False
        self._publishing = False
        self._publish_at = now
        self._published: MemberRecord | None = None
        self._wake = now
        self.set_roles(roles, now)
        self._published = self.record(now)
        self._record_dirty = False

    # ------------------------------------------------------------------------------------------ queries
    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def finished(self) -> bool:
        """Stopping and nothing of this session is left in the store (but abandoned keys)."""
        if not self._stopping:
            return False
        busy = self._leading or self._releasing or self._to_release or self._deleting or self._publishing
        return not busy and not (self._owned() - self._abandoned)

    def leading(self) -> dict[Role, int]:
        return {role: lead.token for role, lead in self._leading.items()}

    def holder(self, role: Role) -> Holder | None:
        """Who holds `role`'s key as last seen in the store (None: nobody, or never seen)."""
        view = self._roles.get(role)
        return view.holder if view is not None else None

    def contended(self, role: Role, now: float) -> bool:
        """Another live member contends for `role` (a successor may come)."""
        live = self._live_others(now, roles=frozenset((role,)))
        return bool(live)

    def busy(self, role: Role) -> bool:
        """A handover of `role` is still under way (Revoked not finished, or the key not deleted)."""
        return role in self._to_release or role in self._releasing or role in self._deleting or \
            role in self._must_delete

    def next_wakeup(self) -> float:
        """When `tick` next has something to do even if nothing else happens."""
        return self._wake

    def valid_until(self) -> float:
        """How long leaderships may last on what the store has confirmed so far."""
        if self._renewed_sent is None:
            return -INF
        return min(self._renewed_sent + self.timing.renew_deadline, self._lease_until)

    def record(self, now: float) -> MemberRecord:
        """The membership record to publish: the roles contended for now, transfer hints, capacity."""
        return MemberRecord(self.member, frozenset(r for r in self._wanted if self._contending(r, now)),
                            frozenset((r, to) for r, to in self._hints.items() if r in self._backoff),
                            self.capacity.weight, self.capacity.max_roles)

    def can_take(self, role: Role, member: str, now: float) -> bool:
        """`member` is live (as this member sees the directory) and contends for `role`."""
        return any(rec.member == member and rec.wants(role)
                   for rec in self._live_others(now, roles=frozenset((role,))).values())

    def share(self, now: float) -> float:
        """This member's share of the roles the live group contends for (with weights 1 and no caps
        ceil(roles / live members)); infinite when fair sharing is off."""
        live = self._live_others(now)
        return self._shares_of(live)[self.session]

    def has_ready(self) -> bool:
        """Something was decided since the last `ready()`."""
        return bool(self._ready)

    def ready(self) -> Ready[StoreAction, None]:
        """Everything decided since the last call: leadership changes, then store actions to execute."""
        return self._ready.take()

    # ------------------------------------------------------------------------------------------ inputs
    def step_all(self, messages: Iterable[LeaseInput], now: float) -> None:
        """Inputs that arrived together, in order (`elect.driver`)."""
        for message in messages:
            self.step(message, now)

    def step(self, message: LeaseInput, now: float) -> None:
        """An observation of the store, or the outcome of an action, arrived at `now`."""
        if isinstance(message, Done):
            self._done(message, now)
        else:
            self._observe(message, now)

    def _observe(self, obs: Observation, now: float) -> None:
        if isinstance(obs, RoleSeen):
            self._see_role(obs.role, obs.holder, obs.rev, now)
        elif isinstance(obs, MemberSeen):
            self._see_member(obs.session, obs.record, obs.version, obs.rev, now, in_order=obs.in_order)
        elif isinstance(obs, Snapshot):
            for role in set(self._roles) | set(obs.roles):
                self._see_role(role, obs.roles.get(role), obs.rev, now)
            for session in set(self._members) | set(obs.members):
                entry = obs.members.get(session)
                record, version = entry if entry is not None else (None, 0)
                self._see_member(session, record, version, obs.rev, now)
        elif isinstance(obs, LeaseSeen):
            self._lease_until = max(self._lease_until, obs.until)

    def _done(self, done: Done, now: float) -> None:
        action, ok, sent = done.action, done.ok, done.sent
        retry = now + self.timing.retry_interval
        if isinstance(action, Renew):
            self._renew_inflight = False
            if ok:
                self._renewed_sent = sent if self._renewed_sent is None else max(self._renewed_sent, sent)
                self._renew_latency = max(0.0, now - sent)
                self._next_renew = sent + self.timing.renew_interval
                # extended now, not at the next tick: a tick may come late while thousands of roles change hands
                self._check_leaderships(now, self.valid_until(), [])
            else:
                self._next_renew = max(retry, now + self.timing.renew_interval / 4)
        elif isinstance(action, KeepAlive):
            self._ka_inflight = False
            interval = self.timing.keepalive_interval or 0.0
            self._next_ka = sent + interval if ok else retry
        elif isinstance(action, Create | Take):
            self._creating.discard(action.role)
            if not ok:
                self._pin.discard(action.role)
                self._retry_at[action.role] = retry
        elif isinstance(action, Expire):
            self._expiring.discard(action.role)
            if not ok:
                self._retry_at[action.role] = retry
        elif isinstance(action, Delete):
            self._deleting.discard(action.role)
            if ok:
                self._must_delete.pop(action.role, None)
            elif self._stopping:
                self._abandoned.add(action.role)
            else:
                self._retry_at[action.role] = retry
        elif isinstance(action, Publish):
            self._publishing = False
            if ok:
                self._published = action.record
            else:
                self._record_dirty = True
                self._publish_at = retry

    # ------------------------------------------------------------------------------------------ commands
    def set_roles(self, roles: Iterable[Role], now: float) -> None:
        """Contend for exactly `roles` from now on; led roles no longer wanted are handed over."""
        wanted = tuple(dict.fromkeys(roles))
        removed = set(self._wanted) - set(wanted)
        for role in set(wanted) - set(self._wanted):  # what is known of a role already, for its observers
            view = self._roles.get(role)
            if view is not None:
                self._seen(role, view.holder)
        self._wanted = wanted
        self._wanted_set = frozenset(wanted)
        self._free = {r for r in wanted if self.holder(r) is None}
        self._order = tuple(sorted(wanted, key=self._rank))
        self._to_release |= removed & set(self._leading)
        self._record_dirty = True

    def resign(self, role: Role, now: float) -> None:
        """Hand `role` over and leave it to others for `resign_backoff`."""
        self._backoff[role] = now + self.timing.resign_backoff
        if role in self._leading:
            self._to_release.add(role)
        self._record_dirty = True

    def transfer(self, role: Role, to: str, now: float) -> None:
        """Hand `role` over as `resign` does, and name `to` as the member to take it (see the module)."""
        self._hints[role] = to
        self.resign(role, now)

    def stop(self, now: float) -> None:
        """Hand every role over, contend for nothing, and finish when the store holds nothing of ours."""
        self._stopping = True
        self._to_release |= set(self._leading)
        self._record_dirty = True

    def released(self, role: Role, now: float) -> None:
        """The Revoked callbacks of `role` returned: its key can go."""
        lead = self._releasing.pop(role, None)
        if lead is not None:
            self._must_delete[role] = lead.token
            if role in self._backoff:
                self._backoff[role] = now + self.timing.resign_backoff

    def lapsed(self, role: Role, now: float, at: float | None = None) -> None:
        """The elector fenced `role` itself at `at` (its deadline passed before the core extended it); a
        notice about a leadership older than the current one is ignored."""
        lead = self._leading.get(role)
        if lead is not None and (at is None or lead.since <= at):
            del self._leading[role]

    def suspended(self, now: float) -> None:
        """The store connection is gone (ZooKeeper SUSPENDED): stop at once; renew before leading again."""
        for role in list(self._leading):  # a leadership already past due ended at its deadline
            del self._leading[role]
            self._ready.changes.append(Fence(role, min(now, self._lead_until)))
        for role, lead in self._releasing.items():
            if not lead.fenced:
                lead.fenced = True
                self._ready.changes.append(Fence(role, min(now, self._lead_until)))
        self._renewed_sent = None
        self._lead_until = -INF  # every leadership ended: the next is dated by the next renewal
        self._next_renew = min(self._next_renew, now)

    def rebind(self, session: str, now: float, lease_until: float = INF) -> None:
        """The session is gone and a new one began: what the old one held belongs to no one we know."""
        self.suspended(now)
        self.session = session
        self._ranks.clear()  # a per-session order
        self._order = tuple(sorted(self._wanted, key=self._rank))
        for state in (self._releasing, self._retry_at):
            state.clear()
        self._must_delete.clear()
        for roles in (self._to_release, self._deleting, self._creating, self._expiring, self._abandoned):
            roles.clear()
        self._renew_inflight = self._ka_inflight = self._publishing = False
        self._lease_until = lease_until
        self._record_dirty = True

    # ------------------------------------------------------------------------------------------ decisions
    def tick(self, now: float) -> None:
        """Decide what to do at `now`: leadership changes and store actions, into `ready()`."""
        wake = [INF]
        valid = self.valid_until()
        self._check_leaderships(now, valid, wake)
        for role, until in list(self._backoff.items()):
            if role in self._releasing or role in self._to_release:
                continue  # still handing over: the back-off runs from the release (`released`), however long
            if now >= until:
                del self._backoff[role]
                self._hints.pop(role, None)
                self._record_dirty = True
            else:
                wake.append(until)
        healthy = valid > now and not self._stopping
        live = self._live_others(now, wake)
        share = self._shares_of(live)  # every live member's, by session
        counts = Counter({session: len(roles) for session, roles in self._held_by.items()})
        if healthy and self.timing.fair:
            self._shed(now, live, share, counts, wake)
        else:
            self._excess_since = None
        self._upkeep(now, wake)
        for role in sorted(self._to_release, key=str):
            lead = self._leading.pop(role, None)
            if lead is not None:
                self._releasing[role] = lead
                self._ready.changes.append(Revoke(role))
        self._to_release.clear()
        self._own_keys(now, valid, wake)
        if healthy:
            self._contend(now, live, share, counts, wake)
        self._wake = min(wake)

    def _check_leaderships(self, now: float, valid: float, wake: list[float]) -> None:
        """Extend every leadership at once when a renewal moved the shared deadline on; end the ones whose key
        changed hands (seen as it arrived: `_lost`) at once, and all of them when the deadline passed. Releasing
        ones are led until Revoked is issued."""
        changes = self._ready.changes
        if valid > self._lead_until:
            self._lead_until = valid
            if self._leading or self._releasing:
                changes.append(ExtendShared(valid))
        for role in self._lost:
            lead = self._leading.get(role)
            if lead is not None and not self._is_ours(role, lead.token):
                del self._leading[role]
                changes.append(Fence(role, now))
            releasing = self._releasing.get(role)
            if releasing is not None and not releasing.fenced and now < self._lead_until and \
                    not self._is_ours(role, releasing.token):
                releasing.fenced = True
                changes.append(Fence(role, now))
        self._lost.clear()
        if self._leading and now >= self._lead_until:
            for role in self._leading:
                changes.append(Fence(role, self._lead_until))
            self._leading.clear()
        elif self._leading:
            wake.append(self._lead_until)

    def _upkeep(self, now: float, wake: list[float]) -> None:
        actions = self._ready.messages
        # a stopping member renews only while it still leads something it is handing over
        renewing = not self._stopping or bool(self._leading or self._releasing or self._to_release)
        if not self._renew_inflight and renewing:
            if now >= self._next_renew:
                self._renew_inflight = True
                self._renew_asked = now
                actions.append(Renew())
            else:
                wake.append(self._next_renew)
        if self.timing.keepalive_interval is not None and not self._ka_inflight and renewing:
            if now >= self._next_ka:
                self._ka_inflight = True
                actions.append(KeepAlive())
            else:
                wake.append(self._next_ka)
        if self._record_dirty and not self._publishing:
            if now < self._publish_at:
                wake.append(self._publish_at)
            else:
                self._record_dirty = False
                record = self.record(now)
                if record != self._published:
                    self._publishing = True
                    actions.append(Publish(record))

    def _own_keys(self, now: float, valid: float, wake: list[float]) -> None:
        """Adopt keys of this session that are not led (created, or confirmed again); delete unwanted ones."""
        owned = self._owned()
        for role in [r for r in self._unled if r not in owned or r in self._leading]:
            del self._unled[role]
        for role, token in list(self._must_delete.items()):
            holder = self.holder(role)
            if role not in self._deleting and (role not in owned or holder is None or holder.token != token):
                del self._must_delete[role]  # gone already (or long since replaced): nothing to delete
        for role in owned.difference(self._leading, self._releasing, self._deleting, self._abandoned):
            holder = self._roles[role].holder
            assert holder is not None
            if role in self._must_delete or not self._contending(role, now):
                if self._retry_at.get(role, -INF) > now:
                    wake.append(self._retry_at[role])
                    continue
                self._deleting.add(role)
                self._ready.messages.append(Delete(role, holder.token))
            elif self._stopping or valid <= now:
                continue  # no renewal in force: taken up once one lands
            elif self._outlasts(now, valid):
                self._unled.pop(role, None)
                self._leading[role] = _Lead(holder.token, since=now, pinned=role in self._pin)
                self._pin.discard(role)
                self._ready.changes.append(Acquire(role, holder.token, valid, shared=True))
                wake.append(valid)
            elif now - self._unled.setdefault(role, now) >= self.timing.ttl:
                # renewals have landed too late to lead it for a TTL: hand it to a member whose renewals land in
                # time (left to the others for resign_backoff, then deleted: `_contending` is false meanwhile)
                del self._unled[role]
                self._backoff[role] = now + self.timing.resign_backoff
                self._record_dirty = True
                wake.append(now)
            else:
                wake.append(self._unled[role] + self.timing.ttl)

    def _outlasts(self, now: float, valid: float) -> bool:
        """Whether a leadership taken up now, valid until `valid`, would be renewed before it lapses if the next
        renewal takes as long as the last one did. One that would not (renewals taking most of renew_deadline: a
        store stalled, or a watch behind that the renewal waits for) is left until renewals land in time again:
        taken up, it would only be fenced again at once, an acquire/fence loop that changes nothing but the
        application's events (issue 61). The key stays this member's meanwhile; nobody else may take it."""
        if self._renew_inflight:
            lands = self._renew_asked + self._renew_latency
        else:
            lands = max(self._next_renew, now) + self._renew_latency
        return valid > max(now, lands)

    def _shed(self, now: float, live: dict[str, MemberRecord], share: dict[str, float], counts: Counter[str],
              wake: list[float]) -> None:
        """Hand roles beyond this member's share to members below theirs that want them, once the imbalance
        has lasted `fair_delay` (a passing state, say mid-handover, moves nothing). A shed role is not shed
        again within `resign_backoff`, so a member that cannot take what it is offered causes no
        ping-pong; it is not avoided either, so the shedder stays a fallback."""
        excess = len(self._leading) - share[self.session]
        under = {s: rec for s, rec in live.items() if counts[s] < share[s]}
        budget = min(excess, sum(share[s] - counts[s] for s in under))
        if budget <= 0:
            self._excess_since = None
            return
        if self._excess_since is None:
            self._excess_since = now
        if now < self._excess_since + self.timing.fair_delay:
            wake.append(self._excess_since + self.timing.fair_delay)
            return
        budget = min(budget, self._shed_budget.left(now))
        if budget <= 0:
            wake.append(self._shed_budget.next_free(now))
            return
        for role in reversed(self._order):
            if budget <= 0:
                break
            if role in self._leading and role not in self._to_release and not self._leading[role].pinned and \
                    self._shed_at.get(role, -INF) + self.timing.resign_backoff <= now and \
                    any(rec.wants(role) for rec in under.values()):
                self._to_release.add(role)
                self._shed_at[role] = now
                self._shed_budget.spend(now)
                budget -= 1

    def _contend(self, now: float, live: dict[str, MemberRecord], share: dict[str, float], counts: Counter[str],
                 wake: list[float]) -> None:
        actions = self._ready.messages
        candidates = self._candidates(now, wake)
        if not candidates:
            return
        plan = self._plan(candidates, live, share, counts) if self.timing.fair else {}
        # Creates in flight count as led: a member at its share leaves the rest to members below theirs, whatever
        # the plan says (its view of their room may be behind what they are taking).
        owned = self._owned() & self._wanted_set
        busy = owned.intersection(self._to_release, self._releasing, self._deleting, self._must_delete)
        mine = len(owned) - len(busy) + len(self._creating)
        under = [(s, rec) for s, rec in live.items() if counts[s] < share[s]]

        def leave(role: Role) -> bool:
            freed_by = self._freed_by.get(role)
            return plan.get(role, self.session) != self.session or \
                (mine >= share[self.session] and any(rec.wants(role) for s, rec in under if s != freed_by))

        for role in sorted(candidates, key=self._rank):
            if not self._contending(role, now) or role in self._creating or role in self._expiring:
                continue
            if self._retry_at.get(role, -INF) > now:
                wake.append(self._retry_at[role])
                continue
            holder = self.holder(role)
            if holder is None:
                hinted = self._hinted(role, now, wake)
                if hinted is not None and hinted != self.member:
                    continue  # being transferred to another live member: its hint goes within resign_backoff
                if hinted == self.member:
                    self._pin.add(role)
                elif leave(role):
                    due = self._patience(self._free_since.setdefault(role, now))
                    if now < due:
                        wake.append(due)
                        continue
                self._free_since.pop(role, None)
                self._creating.add(role)
                actions.append(Create(role))
                mine += 1
            else:
                self._free_since.pop(role, None)
                member = self._member_view(holder.session, now)
                silent_from = member.dies(self.timing.ttl)
                # the member that will take it takes it over in one write; another frees it only if that member
                # has not (`_patience`): one write per role, not one per contender
                other = leave(role)
                if other:
                    silent_from = self._patience(silent_from)
                if now < silent_from:
                    wake.append(silent_from)
                elif other:
                    self._expiring.add(role)
                    actions.append(Expire(role, holder, member.version))
                else:
                    self._creating.add(role)
                    actions.append(Take(role, holder, member.version))
                    mine += 1

    # ------------------------------------------------------------------------------------------ helpers
    def _patience(self, since: float) -> float:
        """Until when a role that became takeable at `since` is left to the member the plan gives it: `fair_delay`
        from then, or from when this member last saw another take a role, whichever is later (a member taking
        over a dead one's thousands takes a few hundred a batch, for longer than `fair_delay`: stepping in on its
        part meanwhile only races it), but no longer than `ttl` past `since` (progress elsewhere must not hold a
        role back from a member that is stuck)."""
        return max(since, min(self._taken_at, since + self.timing.ttl)) + self.timing.fair_delay

    def _candidates(self, now: float, wake: list[float]) -> set[Role]:
        """The roles there is something to decide about: the free ones this member wants, and (timing holders'
        silence) those of holders silent for `ttl`. Everything else is led by a live member, this one included; a
        tick looks at these only, so at rest it costs what changed, not the number of roles."""
        found = set(self._free)
        if not self.timing.silence_takeover:
            return found
        for session, roles in self._held_by.items():
            if session == self.session or not roles or roles.isdisjoint(self._wanted_set):
                continue
            silent_from = self._member_view(session, now).dies(self.timing.ttl)
            if now >= silent_from:
                found |= roles & self._wanted_set
            else:
                wake.append(silent_from)
        return found

    def _plan(self, pool: set[Role], live: dict[str, MemberRecord], share: dict[str, float],
              counts: Counter[str]) -> dict[Role, str]:
        """Who takes each role of `pool` (free, or held by a silent holder), by session: every member computes the
        same plan from the same view, so members that find many roles to take at once (a cold start, a dead
        holder's hundreds) each take their own part, in one batch, instead of racing for the same ones. Roles go in
        one global order, each to the member first in the role's own order of members (rendezvous hashing on
        member ids) that is still below its share, or to the first of all when none is; a role planned for
        another member is taken after `fair_delay` if that member does not take it."""
        members = {self.session: self.member, **{s: rec.member for s, rec in live.items()}}
        # a member that contends for roles this one does not follow may lead some unseen here: its room is unknown,
        # so it gets none (only what nobody has room for), rather than roles it may have no room to take
        room = {s: share[s] - counts[s] if s == self.session or self._followed(live[s]) else 0 for s in members}
        key = tuple(sorted(members.items()))
        if key != self._prefs_of:  # each role's order of members, kept while the members stay the same
            self._prefs_of = key
            self._prefs.clear()
        plan: dict[Role, str] = {}
        for role in sorted(pool, key=lambda r: self._affinity("", r)):
            prefs = self._prefs.get(role)
            if prefs is None:
                prefs = self._prefs[role] = sorted(members, key=lambda s: (self._affinity(members[s], role), s),
                                                   reverse=True)
            first = chosen = None
            freed_by = self._freed_by.get(role)
            for session in prefs:
                if session != self.session and (session == freed_by or not live[session].wants(role)):
                    continue
                if room[session] >= 1:
                    chosen = session
                    break
                first = first or session
            chosen = chosen or first or self.session
            room[chosen] -= 1
            plan[role] = chosen
        return plan

    def _followed(self, record: MemberRecord) -> bool:
        """Every role `record`'s member contends for is one this member follows (so it sees all it leads)."""
        return record.roles is not None and record.roles <= self._wanted_set

    def _affinity(self, member: str, role: Role) -> bytes:
        key = (member, role)
        found = self._affinities.get(key)
        if found is None:
            found = self._affinities[key] = hashlib.blake2b(
                f"{member}\0{type(role).__name__}\0{role}".encode(), digest_size=8).digest()
        return found

    def _rank(self, role: Role) -> bytes:
        """A per-session order of roles, so simultaneous contenders start on different roles."""
        found = self._ranks.get(role)
        if found is None:
            found = self._ranks[role] = hashlib.blake2b(f"{self.session}\0{type(role).__name__}\0{role}".encode(),
                                                        digest_size=8).digest()
        return found

    def _contending(self, role: Role, now: float) -> bool:
        return not self._stopping and role in self._wanted_set and self._backoff.get(role, -INF) <= now

    def _owned(self) -> set[Role]:
        """The roles whose key this session holds, as seen (the index itself: do not change it)."""
        return self._held_by.get(self.session, set())

    def _is_ours(self, role: Role, token: int) -> bool:
        view = self._roles.get(role)
        return view is not None and view.holder is not None and view.holder.session == self.session and \
            view.holder.token == token

    def _member_view(self, session: str, now: float) -> _MemberView:
        view = self._members.get(session)
        if view is None:  # a holder never seen in the directory: time its silence from now
            view = self._members[session] = _MemberView(None, 0, -1, now)
        return view

    def _live_others(self, now: float, wake: list[float] | None = None,
                     roles: frozenset[Role] | None = None) -> dict[str, MemberRecord]:
        """Live members other than this one that contend for at least one of `roles` (default: this member's)."""
        live: dict[str, MemberRecord] = {}
        wanted = self._wanted_set if roles is None else roles
        for session, view in self._members.items():
            if session == self.session or view.record is None:
                continue
            if self.timing.silence_takeover:
                dies = view.dies(self.timing.ttl)
                if now >= dies:
                    continue
                if wake is not None:
                    wake.append(dies)
            roles = view.record.roles
            if roles is None or not roles.isdisjoint(wanted):
                live[session] = view.record
        return live

    def _hinted(self, role: Role, now: float, wake: list[float]) -> str | None:
        """The member that a live member is transferring `role` to, if that one is live (or is this member)."""
        for session, view in self._members.items():
            record = view.record
            if session == self.session or record is None:
                continue
            to = record.hinted(role)
            if to is None:
                continue
            if self.timing.silence_takeover:
                dies = view.dies(self.timing.ttl)
                if now >= dies:
                    continue
                wake.append(dies)
            if to == self.member or self.can_take(role, to, now):
                return to
        return None

    def _universe(self, live: dict[str, MemberRecord]) -> int:
        """How many roles this member and the live members it shares roles with contend for (computed again only
        when what it is made of changed: the live members' role sets or this member's)."""
        key = (self._wanted_set, tuple(sorted((s, rec.roles or frozenset()) for s, rec in live.items())))
        if self._universe_size is None or self._universe_size[0] != key:
            roles = set(self._wanted)
            for record in live.values():
                roles |= record.roles or set()
            self._universe_size = (key, len(roles))
        return self._universe_size[1]

    def _shares_of(self, live: dict[str, MemberRecord]) -> dict[str, float]:
        """Every live member's share (by session, this one's included; `elect.shares`), infinite when fair sharing
        is off."""
        if not self.timing.fair:
            return {session: INF for session in (self.session, *live)}
        members = {self.session: self.capacity}
        members.update({s: Capacity(rec.weight, rec.max_roles) for s, rec in live.items()})
        return {session: float(n) for session, n in shares(self._universe(live), members).items()}

    def _see_role(self, role: Role, holder: Holder | None, rev: int, now: float) -> None:
        view = self._roles.get(role)
        if view is not None and rev < view.as_of:
            return
        if view is None:
            if holder is None:
                return  # absent and never seen: nothing to remember
            self._roles[role] = view = _RoleView(None, rev)
        if holder != view.holder:
            self._seen(role, holder)
            self._index(role, view.holder, holder)
            if holder is not None and holder.session != self.session:
                self._taken_at = now
        view.holder, view.as_of = holder, rev
        if holder is not None and holder.session != self.session:
            self._member_view(holder.session, now)

    def _index(self, role: Role, before: Holder | None, after: Holder | None) -> None:
        """Keep what a tick looks at in step with a role key that changed hands (`_held_by`, `_free`, `_lost`)."""
        if before is not None:
            held = self._held_by.get(before.session)
            if held is not None:
                held.discard(role)
                if not held:
                    del self._held_by[before.session]
        if after is not None:
            self._held_by.setdefault(after.session, set()).add(role)
            self._free.discard(role)
            self._free_since.pop(role, None)  # free again later: left to others for fair_delay from then
            self._freed_by.pop(role, None)
        else:
            if before is not None:
                self._freed_by[role] = before.session
            if role in self._wanted_set:
                self._free.add(role)
        if role in self._leading or role in self._releasing:
            self._lost.add(role)

    def _seen(self, role: Role, holder: Holder | None) -> None:
        """Who holds `role`'s key now, for observers (every role with a view: the driver keeps those it wants)."""
        self._ready.seen.append(LeaderSeen(role, None, 0) if holder is None else
                                LeaderSeen(role, holder.member, holder.token))

    def _see_member(self, session: str, record: MemberRecord | None, version: int, rev: int, now: float, *,
                    in_order: bool = False) -> None:
        """A member's entry as of `rev`. Its silence is timed from the first sight of each version. A deletion the
        watch reports (`in_order`) is no proof of life: the holder renewed last at the version seen before it, so
        its silence runs on from there (the second survivor of a dead kubernetes:// holder takes the roles planned
        for it when its own timer runs out, not one TTL after the first survivor fenced the holder). An absence read
        or listed may hide renewals missed before it, and is timed from its first sight."""
        view = self._members.get(session)
        if view is None:
            if record is None:
                return
            self._members[session] = _MemberView(record, version, rev, now, record.silence)
            return
        if rev < view.as_of:
            return
        changed = version != view.version or (record is None) != (view.record is None)
        if changed and (record is not None or not in_order):
            view.changed_at = now
            view.silence = 0.0 if record is None else record.silence
        view.record, view.version, view.as_of = record, version, rev


