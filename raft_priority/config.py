"""Configuration of the election core: timing, the ZEP006 priority election and its improvements.

Every improvement over ZEP006 has its own switch so a benchmark can compare plain ZEP006 with each
improvement alone and with all of them together (see the presets at the bottom).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

PriorityMode = Literal["off", "zeebe"]
"""``off``: stock Raft, randomized election timeouts in [ET, ET + election_jitter). ``zeebe``: ZEP006 priority
decay."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Timing and election rules shared by every group of a node (all nodes must agree on them)."""

    election_timeout: float = 1.0
    """ET: a follower that has not heard a leader for this long times out (fixed in priority mode)."""
    heartbeat_interval: float = 0.1
    election_jitter: float | None = None
    """Stock Raft draws each election timeout uniformly from [ET, ET + jitter); None = ET, the Raft paper's
    [ET, 2 ET). Other systems use narrower ranges (e.g. etcd's [ET, 2 ET) against a heartbeat of ET/10,
    Consul's [ET, 2 ET) too, some [150, 300) ms), so the range is a knob of its own."""
    priority_mode: PriorityMode = "zeebe"
    priority_decay: int = 1
    """ZEP006 ``priorityDecay``: how much ``targetPriority`` drops per extra timeout round."""

    # -- improvements over ZEP006 (each off by default = plain ZEP006) --
    fast_failover: bool = False
    """(a) The leader tells followers which of them are alive; on its loss, the targetPriority starts at
    the best *live* follower's priority and each later round steps to the next live priority, so the
    next in line campaigns after one ET instead of waiting out decay rounds for dead or absent nodes. And two
    members campaigning at once do not split the votes: the lower priority yields its round to the higher
    (`RaftGroup._rival`)."""
    decay_interval: float | None = None
    """(b) Length of decay rounds after the first timeout; None = ``election_timeout`` (ZEP006)."""
    rebalance: bool = False
    """(c) The leader hands over (TimeoutNow) to a higher-priority member once that member has been
    caught up and steadily reachable for ``rebalance_hysteresis`` seconds."""
    rebalance_hysteresis: float = 3.0
    health_gap: float | None = None
    """A gap between two acks from a follower longer than this restarts its hysteresis clock;
    None = 3 heartbeat intervals."""
    rebalance_limit: int | None = None
    """At most this many rebalancing handovers per node within ``rebalance_window`` (None: no limit), so a
    returning node takes its partitions back a few at a time instead of all at once."""
    rebalance_window: float = 10.0
    rebalance_max_lag: int = 0
    """How many log entries a follower may lag the leader and still count as caught up."""
    transfer_timeout: float | None = None
    """A transfer not completed within this time is abandoned; None = ``election_timeout``."""

    # -- stock Raft safety/liveness extensions --
    pre_vote: bool = True
    check_quorum: bool = True
    """Leader leases: a leader without a majority of fresh acks steps down ("fenced"), and voters that
    heard a leader (or voted) within the lease window refuse (pre-)votes, so leases never overlap."""
    lease_margin: float = 0.1
    """Fraction of ET by which the lease window is shorter than ET. It absorbs message-delay skew
    between voters (so the next-in-line's pre-vote is not refused by a voter that heard the last
    heartbeat a little later) and clock-rate drift between nodes."""
    max_drift: float = 0.0
    """How much faster than a leader's clock a voter's may run (0.1: 10 %) with leases still disjoint. A leader
    holds its lease `leader_lease` = W / (1 + max_drift) after the round a majority acknowledged, on its clock;
    a voter refuses votes for W after it heard that round, on its own. The lease ends first unless the voter's
    clock runs more than 1 + max_drift times as fast. 0: the clocks must agree (plain Raft's lease assumption);
    a larger value fences a cut-off leader earlier, and changes nothing else."""
    quiesce: bool = False
    """An idle group stops heartbeating once every follower answered "quiet"; one beat per pair of nodes then
    carries its liveness and lease (`raft_priority.links`), so an idle node's cost does not grow with its
    groups. Off: every group heartbeats on its own (plain Raft)."""
    retry_jitter: float = 0.0
    """Fraction of ET of random extra wait before a *repeated* campaign in priority mode; 0 = ZEP006
    (fixed). A little jitter breaks lock-step duelling campaigns between equal-priority nodes."""

    def __post_init__(self) -> None:
        if not (self.election_timeout > 0 and self.heartbeat_interval > 0):
            raise ValueError("election_timeout and heartbeat_interval must be positive")
        if not 0.0 <= self.lease_margin < 0.5:
            raise ValueError("lease_margin must be in [0, 0.5)")
        if not 0.0 <= self.max_drift <= 1.0:
            raise ValueError("max_drift must be in [0, 1]")
        if self.heartbeat_interval * 2 > self.leader_lease:
            raise ValueError("heartbeat_interval must be at most half the leader's lease")
        if self.priority_decay < 1:
            raise ValueError("priority_decay must be >= 1")
        if self.decay_interval is not None and self.decay_interval <= 0:
            raise ValueError("decay_interval must be positive")
        if self.election_jitter is not None and not self.election_jitter > 0:
            raise ValueError("election_jitter must be > 0 (without it every node times out together)")
        if self.rebalance_limit is not None and self.rebalance_limit < 1:
            raise ValueError("rebalance_limit must be >= 1")
        if not self.rebalance_window > 0:
            raise ValueError("rebalance_window must be > 0")
        if self.priority_mode not in ("off", "zeebe"):
            raise ValueError(f"unknown priority_mode {self.priority_mode!r}")

    @property
    def lease_window(self) -> float:
        """W: how long a leader's quorum ack, or a voter's last contact, keeps the lease alive."""
        return self.election_timeout * (1.0 - self.lease_margin)

    @property
    def leader_lease(self) -> float:
        """How long a leader's quorum ack keeps its own lease: W shortened for voters' clocks up to `max_drift`
        faster than its own."""
        return self.lease_window / (1.0 + self.max_drift)

    @property
    def jitter(self) -> float:
        """The width of stock Raft's election timeout range."""
        return self.election_timeout if self.election_jitter is None else self.election_jitter

    @property
    def decay_round(self) -> float:
        return self.election_timeout if self.decay_interval is None else self.decay_interval

    @property
    def ack_gap(self) -> float:
        return 3 * self.heartbeat_interval if self.health_gap is None else self.health_gap

    @property
    def transfer_deadline(self) -> float:
        return self.election_timeout if self.transfer_timeout is None else self.transfer_timeout

    # -- presets for benchmarks --
    @classmethod
    def stock(cls, **kw: Any) -> RaftConfig:
        """Randomized-timeout Raft, no priorities (the baseline); PreVote and CheckQuorum on unless switched off."""
        return replace(cls(priority_mode="off"), **kw)

    @classmethod
    def zep006(cls, **kw: Any) -> RaftConfig:
        """ZEP006 as written: fixed ET, decay by one round of ET, no improvements."""
        return replace(cls(priority_mode="zeebe"), **kw)

    @classmethod
    def improved(cls, **kw: Any) -> RaftConfig:
        """ZEP006 with all three improvements on."""
        cfg = replace(cls(priority_mode="zeebe", fast_failover=True, rebalance=True, retry_jitter=0.1), **kw)
        return cfg if "decay_interval" in kw else replace(cfg, decay_interval=cfg.election_timeout / 4)


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """One election group (a partition): its members and their priorities (higher = preferred).

    Every member must be given the same spec; ``priorities`` is usually one entry of
    :func:`raft_priority.priorities.assign_priorities`.
    """

    group: int
    priorities: Mapping[str, int]
    members: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        if not self.priorities:
            raise ValueError("a group needs at least one member")
        object.__setattr__(self, "members", tuple(self.priorities))

    @property
    def quorum(self) -> int:
        return len(self.members) // 2 + 1

    @property
    def max_priority(self) -> int:
        return max(self.priorities.values())

