"""The `Elector` contract every implementation fulfils, and what each one promises."""

from __future__ import annotations

import math
import threading
import time
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from elect import options
from elect.errors import ConfigError, ElectorFailed, UnsatisfiedRequirement
from elect.events import Event
from elect.observe import LeaderChanged
from elect.roles import Role

if TYPE_CHECKING:
    from elect.metrics import Metrics

Callback = Callable[[Event], object]
ObserveCallback = Callable[[LeaderChanged], object]
Unsubscribe = Callable[[], None]


@dataclass(frozen=True)
class Leadership:
    """This member's current leadership of one role.

    `token` strictly increases across successive leaders of the role; pass it to the resource you
    guard so that a write carrying an older token is refused there. A member fenced because it lost
    touch with the store, that finds on return its claim still standing (nobody else led meanwhile),
    resumes under the same token: no other writer can hold a token in between. `deadline` is the monotonic time
    after which this member must consider itself no longer leader unless renewed (None: no deadline).
    """

    role: Role
    member: str
    token: int
    since: float
    since_ts: float
    deadline: float | None = None

    def valid(self, now: float | None = None) -> bool:
        """True while the deadline, if any, has not passed."""
        return self.deadline is None or (time.monotonic() if now is None else now) < self.deadline


@dataclass(frozen=True)
class Drained:
    """What `Elector.drain` did.

    seconds: from the call until the elector had stopped. roles: those it led when the drain began.
    successors: who took each of them over, as this member saw it before stopping; None where the method
    cannot see it (the drain then ended with the handover itself). uncontended: roles no other live member
    contends for, so nobody took them over (the drain did not wait for them). A role in neither: no successor
    seen within the timeout.
    """

    seconds: float
    roles: frozenset[Role]
    successors: Mapping[Role, str] | None
    uncontended: frozenset[Role] = frozenset()

    @property
    def confirmed(self) -> bool:
        """Roles were handed over and every one was seen taken by a successor. A drain that led nothing confirms
        nothing (`outcome` says so), and neither does one whose method cannot see successors."""
        return bool(self.roles) and self.successors is not None and self.roles <= set(self.successors)

    @property
    def unconfirmed(self) -> frozenset[Role]:
        """Roles handed over that no successor was seen take (those nobody else contends for among them)."""
        return frozenset(self.roles - set(self.successors or ()))

    @property
    def outcome(self) -> str:
        """What the drain shows, in a few words, for a log line or a deploy script's message."""
        if not self.roles:
            return "led nothing: nothing was handed over"
        if self.successors is None:
            return "handed over; this method cannot see the successors"
        if self.confirmed:
            return "every role was taken over"
        parts = []
        waited = self.unconfirmed - self.uncontended
        if waited:
            parts.append(f"no successor seen for {_listed(waited)}")
        if self.uncontended:
            parts.append(f"no other member contends for {_listed(self.uncontended)}")
        return "; ".join(parts)


def _listed(roles: frozenset[Role], shown: int = 5) -> str:
    names = sorted(map(str, roles))
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


@dataclass(frozen=True)
class Transferred:
    """What `Elector.transfer` did.

    role and to: as asked. seconds: from the call until `to` was seen leading the role, or until the wait
    ended. leader: who this member saw leading the role when the wait ended (`to` on success; another member
    if the target could not take it and someone else did; None if nobody was seen yet).
    """

    role: Role
    to: str
    seconds: float
    leader: str | None

    @property
    def confirmed(self) -> bool:
        """The named member was seen leading the role."""
        return self.leader == self.to


@dataclass(frozen=True)
class Characteristics:
    """What an elector promises, so callers can demand a property at connect time.

    exclusive: at most one member believes it leads a role at any instant (when clocks behave).
    max_overlap: seconds two members may both believe they lead one role (0 when exclusive; None: no bound).
    max_failover: seconds from a leader's crash until a survivor leads (None: no bound).
    graceful_handover: a blocking `Revoked` callback holds the successor back.
    token: where the fencing token comes from (e.g. "raft term", "etcd revision").
    notes: what else a user should know: where failure detection is configured, what is not promised.
    observes_leaders: a member sees who leads the roles it contends for, others included, so `observe` reports
    it (and the failover histogram of `metrics` is measured); False (the default: nothing is promised unless an
    implementation says so): `observe` raises `NotSupported`.
    transfers: `transfer(role, to=member)` can direct a role to a named member (False: it raises `NotSupported`).
    weights: the options `weight` (a member's capacity: weight 2 leads twice the roles of weight 1) and `max_roles`
    (a soft cap) shape how roles spread (False: the method cannot steer that, and giving either is a ConfigError
    saying why; raft:// with priority zeebe or off is the exception: no weights, but it honours max_roles).
    max_drift: how far the rates of the clocks involved may differ with the promises above still kept: any clock
    may run up to 1 + max_drift times as fast as another (a leader's and a contender's, a voter's, or the store's or
    broker's where it times a session). Derived from the settings (docs/clocks.md); math.inf: one clock for all;
    None: no bound stated (the promises assume clocks that agree, or rest on wall-clock offsets as well).
    """

    exclusive: bool
    max_overlap: float | None
    max_failover: float | None
    graceful_handover: bool
    token: str
    notes: str = ""
    observes_leaders: bool = False
    transfers: bool = False
    weights: bool = False
    max_drift: float | None = None

    @property
    def has_token(self) -> bool:
        """Whether leaderships carry a fencing token that grows (`token` "none": they do not)."""
        return self.token != "none"


@dataclass(frozen=True)
class Requirements:
    """Properties a caller demands; `check` raises if the elector does not promise them."""

    exclusive: bool | None = None
    max_overlap: float | None = None
    max_failover: float | None = None
    graceful_handover: bool | None = None
    observes_leaders: bool | None = None
    transfers: bool | None = None
    weights: bool | None = None
    max_drift: float | None = None

    @classmethod
    def coerce(cls, value: Requirements | Mapping[str, Any] | None) -> Requirements:
        if value is None:
            return cls()
        if isinstance(value, Requirements):
            return value
        if not isinstance(value, Mapping):  # e.g. YAML `require: [exclusive]`
            raise ConfigError(f"expected a mapping such as {{exclusive: true}}, got {value!r}", parameter="require")
        known = {f.name for f in fields(cls)}
        unknown = sorted(repr(k) for k in value if k not in known)
        if unknown:
            raise ConfigError(f"unknown requirement(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}",
                              parameter="require")
        hints = typing.get_type_hints(cls)  # "yes", "500ms" as in a URL; a wrong type fails here, not in check()
        return cls(**{k: options.coerce(v, hints[k], f"require.{k}") for k, v in value.items()})

    def check(self, scheme: str, have: Characteristics) -> None:
        """Raise `UnsatisfiedRequirement`, naming every missing promise, unless `have` promises all of these."""
        missing: list[str] = []
        if self.exclusive and not have.exclusive:
            missing.append("exclusive leadership (this configuration is non-exclusive)")
        if self.graceful_handover and not have.graceful_handover:
            missing.append("graceful handover (Revoked callbacks do not hold the successor back)")
        if self.observes_leaders and not have.observes_leaders:
            missing.append("observation of who leads (a member cannot see other members' leadership)")
        if self.transfers and not have.transfers:
            missing.append("transfer to a named member (the method cannot direct a role to one member)")
        if self.weights and not have.weights:
            missing.append("weights and caps (the method cannot steer how many roles a member leads)")
        if self.max_overlap is not None:
            bound = math.inf if have.max_overlap is None else have.max_overlap
            if bound > self.max_overlap:
                missing.append(f"overlap <= {self.max_overlap} s (promises {_bound(have.max_overlap)})")
        if self.max_failover is not None:
            bound = math.inf if have.max_failover is None else have.max_failover
            if bound > self.max_failover:
                missing.append(f"failover <= {self.max_failover} s (promises {_bound(have.max_failover)})")
        if self.max_drift is not None and (have.max_drift is None or have.max_drift < self.max_drift):
            stated = "states no bound" if have.max_drift is None else f"tolerates {have.max_drift:.3g}"
            missing.append(f"clock rates that differ by up to {self.max_drift:g} ({stated}; docs/clocks.md)")
        if missing:
            raise UnsatisfiedRequirement(f"{scheme}:// as configured does not promise: " + "; ".join(missing))


def _bound(value: float | None) -> str:
    return "no bound" if value is None else f"{value:g} s"


class Running(ABC):
    """What `Elector.run` returns: `fn` runs for each leadership of `roles` until `cancel()`.

    Also a context manager (`with e.run(...)`: cancelled on exit). `calls` and `failures` count the calls
    made and those that raised, for monitoring.
    """

    roles: frozenset[Role]
    calls: int
    failures: int

    @property
    @abstractmethod
    def cancelled(self) -> bool:
        """Whether `cancel` was called."""

    @abstractmethod
    def cancel(self, timeout: float | None = None) -> bool:
        """Make no more calls; tell the calls in progress to stop, and wait up to `timeout` for them to return
        (0: do not wait). Leaderships are kept: cancelling work is not resigning. True if all returned."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cancel()


class Elector(ABC):
    """Leader election per role for one member of a group.

    Use as a context manager or call `start()` / `stop()`; `stop()` hands leadership over gracefully.
    Callbacks receive `Acquired`, `Revoked` and `Fenced` events in order, none lost, on one thread
    per elector; a `Revoked` callback may block to finish in-flight work.
    """

    member: str
    scheme: str

    @property
    @abstractmethod
    def characteristics(self) -> Characteristics:
        """What this configuration promises (`Characteristics`), known before `start`."""

    @abstractmethod
    def start(self) -> None:
        """Join the group and contend for the roles; raises `InfrastructureUnavailable` (or `AccessRefused`) if the
        store, broker or peers cannot be reached within the connect timeout."""

    @abstractmethod
    def stop(self, timeout: float | None = None) -> None:
        """Hand every role led over (`Revoked`, blocking callbacks waited for up to `timeout`) and leave."""

    @abstractmethod
    def subscribe(self, callback: Callback) -> Unsubscribe:
        """Call `callback(event)` for every later event; returns a function that unsubscribes."""

    @abstractmethod
    def observe(self, callback: ObserveCallback) -> Unsubscribe:
        """Call `callback(LeaderChanged)` whenever the member this elector sees leading a role it contends for
        changes (None: no leader); the leaders seen so far first. Raises `NotSupported` where the method cannot
        see it (`characteristics.observes_leaders` False)."""

    @abstractmethod
    def metrics(self) -> Metrics:
        """This elector's Prometheus metrics (`elect.metrics`; needs the `metrics` extra), recorded from the first
        call on, in a registry of their own."""

    @abstractmethod
    def is_leader(self, role: Role) -> bool:
        """This member leads `role` now, and its lease is not past due."""

    @abstractmethod
    def leadership(self, role: Role) -> Leadership | None:
        """The current, valid leadership of `role`, or None."""

    @abstractmethod
    def leading(self) -> frozenset[Role]:
        """The roles this member leads now."""

    @abstractmethod
    def resign(self, role: Role) -> None:
        """Give `role` up; another member takes it over if there is one."""

    @abstractmethod
    def transfer(self, role: Role, to: str, timeout: float | None = None) -> Transferred:
        """Hand `role`, which this member leads, to member `to`, gracefully (as `resign`), and wait up to `timeout`
        until `to` is seen leading it. Raises `NotLeader`, `TransferRefused` (`to` cannot take it) or
        `NotSupported` (`characteristics.transfers` False)."""

    @abstractmethod
    def run(self, roles: Iterable[Role] | Role, fn: Callable[[Leadership, threading.Event], object], *,
            grace: float | None = None, on_error: str = "release") -> Running:
        """Call `fn(lead, stop)` on a thread of its own for each leadership of each of `roles`, until the
        returned `Running` is cancelled. `stop` is set on `Revoked`, on `Fenced` and at the deadline at the
        latest; a handover waits for `fn` to return (up to `grace`) where the method has graceful handover.
        `fn` raising while leading: `on_error="release"` hands the role over and leaves it to others for a
        back-off, `"restart"` keeps leading and calls `fn` again after one (`BaseElector.run`)."""

    @abstractmethod
    def drain(self, timeout: float | None = None) -> Drained:
        """Hand every led role over, wait until successors took them (where the method can see it), then
        stop; `timeout` bounds the wait for successors."""

    @property
    def failure(self) -> ElectorFailed | None:
        """Why this elector stopped on its own while running (`ElectorFailed`: every leadership fenced, nothing led
        from then on, it does not come back), or None. What a supervisor watches: `elect member` exits 4 on it."""
        return None

    @property
    @abstractmethod
    def roles(self) -> frozenset[Role]:
        """The roles this member contends for."""

    @abstractmethod
    def add_roles(self, roles: Iterable[Role]) -> None:
        """Contend for `roles` as well (a role already contended for is left as it is)."""

    @abstractmethod
    def remove_roles(self, roles: Iterable[Role]) -> None:
        """Stop contending for `roles`; those this member leads are handed over (`Revoked`)."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
