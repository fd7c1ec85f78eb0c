"""Options of `raft://`, with every rule that makes a configuration unusable.

Importing this module must not import grpc or protobuf: the registry loads it to validate a
URL before the extra is installed. Durations are seconds.

    raft://ID@HOST:PORT?peers=ID@HOST:PORT,...|join=ID@HOST:PORT,...&partitions=P&replication=RF&election_timeout=1.0
        &heartbeat_interval=0.1&priority=balanced|zeebe|off&improvements=on|off&data_dir=...
        &election_jitter=0.5&pre_vote=on|off&check_quorum=on|off&quiesce=on|off&ca=CA.crt&cert=ME.crt&key=ME.key
        &weights=a:2,b:1&max_roles=N&max_drift=0.1
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elect.options import port_number, rule
from elect.secrets import check_certificate
from elect.shares import check_capacity

Priority = Literal["balanced", "zeebe", "off"]

_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
DEFAULT_PARTITIONS = 12  # divisible by 1, 2, 3, 4 and 6 nodes


def split_host_port(text: str) -> tuple[str, int] | None:
    host, sep, port = text.rpartition(":")
    number = port_number(port)
    if not sep or not host or number is None:
        return None
    return host.strip("[]"), number


def parse_peer(text: str) -> tuple[str, str] | None:
    """``ID@HOST:PORT`` -> (id, "HOST:PORT"), or None when malformed."""
    ident, sep, where = text.partition("@")
    if not sep or not _ID.match(ident) or split_host_port(where) is None:
        return None
    return ident, where


def id_addresses(entries: tuple[str, ...]) -> dict[str, str]:
    """``ID@HOST:PORT`` entries (checked already) -> {id: HOST:PORT}."""
    out: dict[str, str] = {}
    for text in entries:
        parsed = parse_peer(text)
        assert parsed is not None
        out[parsed[0]] = parsed[1]
    return out


def check_nodes(listen: str, peers: tuple[str, ...]) -> None:
    rule(split_host_port(listen) is not None, "listen",
         f"expected HOST:PORT (the URL's raft://ID@HOST:PORT part), got {listen!r}")
    ids: list[str] = []
    addresses: list[str] = [listen]
    for text in peers:
        parsed = parse_peer(text)
        rule(parsed is not None, "peers", f"expected ID@HOST:PORT (ID of letters, digits, '.', '_', '-'), got {text!r}")
        assert parsed is not None
        ids.append(parsed[0])
        addresses.append(parsed[1])
    rule(len(set(ids)) == len(ids), "peers", f"peer ids must be distinct, got {', '.join(ids)}")
    rule(len(set(addresses)) == len(addresses), "peers",
         f"every node needs its own HOST:PORT, got {', '.join(addresses)} (own address first)")


@dataclass(frozen=True)
class PeerOptions:
    """What every static-peer election URL says: this node's address, the others', the partitions."""

    listen: str = ""
    peers: tuple[str, ...] = ()
    partitions: int = DEFAULT_PARTITIONS
    election_timeout: float = 1.0
    revoke_timeout: float = 30.0

    def peer_map(self) -> dict[str, str]:
        """Peer id -> HOST:PORT."""
        return id_addresses(self.peers)

    def nodes(self, member: str) -> list[str]:
        """Every node id, sorted: the order all members agree on."""
        return sorted([member, *self.peer_map()])

    def check_member(self, member: str) -> None:
        rule(bool(_ID.match(member)), "member", f"a node id is 1-64 of letters, digits, '.', '_', '-'; got {member!r}")
        rule(member not in self.peer_map(), "peers", f"lists this node's own id {member!r}; name only the others")


@dataclass(frozen=True)
class RaftOptions(PeerOptions):
    """Options of the `raft://` elector (see raft_priority/elector.py).

    listen: this node's HOST:PORT (the URL's host part). peers: the other nodes of a new cluster, ID@HOST:PORT each
    (every first member is given the same set; nodes whose sets disagree refuse to start, naming both). join: instead
    of peers, any running members, ID@HOST:PORT each: this node joins their cluster as a learner and becomes a
    voter once it has caught up (members are added, removed and replaced while the cluster runs: `elect raft`,
    docs/methods/raft.md "Membership"). partitions, replication, priority and weights must be the cluster's.
    partitions: election groups; roles map onto them
    (`elect.roles.partition_of`). replication: nodes per group (None: all of them). election_timeout: ET, the
    detection budget D: a silent leader is replaced about this long after it went quiet. heartbeat_interval: leader
    heartbeat period (default ET/10). priority: `balanced` (spread primaries and successors evenly), `zeebe`
    (ZEP006's table) or `off` (stock Raft, randomized timeouts). election_jitter: with priority=off, timeouts are
    drawn from [ET, ET + election_jitter) (default [ET, 2 ET)). pre_vote, check_quorum: Raft's PreVote (a node
    campaigns only once a majority would vote for it) and CheckQuorum (a leader without a majority of fresh acks
    steps down, which is what bounds a cut-off leader's deadline; off, leadership is no longer exclusive), both on
    by default; stock Raft as many systems run it switches them off. quiesce: an idle partition whose followers all
    answered stops heartbeating, one beat per pair of nodes carrying its liveness and lease instead
    (`raft_priority.links`), so an idle node's CPU and messages do not grow with partitions (default on; off, every
    partition heartbeats on its own, as plain Raft). improvements: the three improvements over ZEP006 together (fast
    failover, short decay rounds, rebalancing to the primary); each can be overridden on its own. fast_failover: the
    successor campaigns at once when the leader's node is known dead, not after a decay round. decay_interval:
    seconds between priority decay steps (0 = ET, i.e. ZEP006). rebalance: hand a partition back to its returning
    primary. rebalance_hysteresis: how long a higher-priority node must be healthy and caught up before the leader
    hands back (default 3 ET). rebalance_limit, rebalance_window: at most rebalance_limit such hand-backs per node
    in any rebalance_window seconds (default: no limit; window 10 ET), so a returning node takes its partitions back
    a few at a time. data_dir: where term and vote are fsynced (default: a directory per cluster under the system
    temp dir). revoke_timeout: longest wait for blocking Revoked callbacks before a handover goes ahead anyway.
    handover_timeout: how long stop() waits for successors to take over (default 2 ET). tick: driver timer
    granularity (default heartbeat_interval / 5). ack_delay: how long heartbeat acknowledgements may wait to ride
    along with this node's next batch to the same peer (default 1.5 x heartbeat_interval, within half the lease with
    the heartbeat interval; 0 = send at once): with many partitions it halves the number of batches, the main
    steady-state cost. cluster: a name every node is given alike; by default the cluster is identified by its nodes'
    ids and addresses, which breaks when nodes see each other at different addresses (NAT, proxies, container
    networks): name it then. ca, cert, key: paths of PEM files for mutual TLS between the nodes (all three, or none
    for plaintext): the CA that signed every node's certificate, and this node's certificate and key; a node's
    certificate must name its id (common name or DNS name, as `elect certs make` writes them), and a peer whose
    certificate names another id than it claims is refused. weights: ID:WEIGHT for any nodes that do not weigh 1
    (URL `weights=a:2,b:0.5`, YAML a list of the same), given identically to every node: a node of weight 2 is
    primary for twice as many partitions (`raft_priority.priorities`). A cluster-wide option, not each node's own,
    because every node computes the whole priority table by itself and they must agree; weights are part of the
    cluster's identity on the wire (`wire_id`), so nodes given different weights do not talk to each other instead
    of disagreeing about who should lead. weight: this node's weight, only as a check against `weights` (a
    configuration shared with the lease methods may say it). max_roles: a soft cap on the roles this node leads,
    enforced through interest (see raft_priority/elector.py): its own say, needing no agreement. max_drift: how much
    faster than a leader's clock a voter's may run with leases still disjoint (default 0.1, i.e. 10 %): the leader's
    lease is the lease window / (1 + max_drift) (`RaftConfig.max_drift`, docs/clocks.md); a larger value fences a
    cut-off leader earlier. Give every node the same.
    """

    replication: int | None = None
    join: tuple[str, ...] = ()
    heartbeat_interval: float | None = None
    priority: Priority = "balanced"
    improvements: bool = True
    fast_failover: bool | None = None
    decay_interval: float | None = None
    rebalance: bool | None = None
    rebalance_hysteresis: float | None = None
    rebalance_limit: int | None = None
    rebalance_window: float | None = None
    data_dir: str | None = None
    handover_timeout: float | None = None
    tick: float | None = None
    ack_delay: float | None = None
    cluster: str = ""
    election_jitter: float | None = None
    pre_vote: bool = True
    check_quorum: bool = True
    quiesce: bool = True
    max_drift: float = 0.1
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    weights: tuple[str, ...] = ()
    weight: float | None = None
    max_roles: int | None = None

    def weight_map(self) -> dict[str, float]:
        """Node id -> weight, for the nodes `weights` names (the others weigh 1)."""
        out: dict[str, float] = {}
        for entry in self.weights:
            parsed = _parse_weight(entry)
            assert parsed is not None
            out[parsed[0]] = parsed[1]
        return out

    @property
    def weighted(self) -> bool:
        """Some node weighs differently from another (equal weights are no weights)."""
        named = self.weight_map()
        values = set(named.values())
        if len(named) < len(self.peers) + 1:
            values.add(1.0)  # a node not named weighs 1
        return len(values) > 1

    def check_member(self, member: str) -> None:
        super().check_member(member)
        if self.ca and self.cert and self.key:  # peers accept a node whose certificate names its id
            check_certificate(self.ca, self.cert, self.key, name=member)
        nodes = {member, *self.peer_map()}
        named = self.weight_map()
        unknown = sorted(set(named) - nodes)
        rule(not unknown or bool(self.join), "weights", f"names {', '.join(unknown)}, not a node of this cluster "
                                     f"({', '.join(sorted(nodes))})")
        if self.weight is not None:
            rule(self.weight == named.get(member, 1.0), "weight",
                 f"raft:// weighs nodes cluster-wide: give weights=ID:WEIGHT,... identically to every node (each "
                 f"computes the whole priority table and they must agree); weight={self.weight:g} for {member!r} is "
                 f"not what weights says ({named.get(member, 1.0):g})")

    def wire_id(self, member: str) -> str:
        """The cluster's name on the wire: `cluster_id`, and the weights when they matter, so that nodes that
        disagree about them (and would about every partition's priorities) do not form one cluster. Terms and
        votes stay under `cluster_id` (`state_dir`): changing the weights keeps a node's Raft state."""
        base = self.cluster_id(member)
        if not self.weighted:
            return base
        entries = sorted(f"{node}:{weight!r}" for node, weight in self.weight_map().items() if weight != 1)
        return hashlib.blake2b(",".join([base, *entries]).encode(), digest_size=8).hexdigest()

    def cluster_id(self, member: str) -> str:
        """A name for this cluster, the same on every member: batches carrying another are dropped, so a
        stray process of another cluster that reaches this port cannot vote here. Derived from the nodes'
        ids and addresses unless a `cluster` name is given (needed when nodes reach each other through
        different addresses: NAT, proxies, container networks)."""
        if self.cluster:
            entries = [self.cluster, *sorted([member, *self.peer_map()])]
        else:
            entries = sorted([f"{member}@{self.listen}", *self.peers])
        return hashlib.blake2b(",".join(entries).encode(), digest_size=8).hexdigest()

    def __post_init__(self) -> None:
        check_nodes(self.listen, self.peers)
        for text in self.join:
            rule(parse_peer(text) is not None, "join", f"expected ID@HOST:PORT of a running member, got {text!r}")
        rule(not (self.join and self.peers), "join",
             "a node either starts a new cluster (peers=, the same on every first member) or joins a running one "
             "(join=), not both")
        n = len(self.peers) + 1 if not self.join else 100_000
        rule(1 <= self.partitions <= 100_000, "partitions", f"must be 1..100000, got {self.partitions}")
        rule(self.replication is None or 1 <= self.replication <= n, "replication",
             f"must be 1..{n} (the number of nodes: this one and {len(self.peers)} peers), got {self.replication}")
        rule(self.election_timeout > 0, "election_timeout", "must be > 0")
        rule(self.heartbeat_interval is None or self.heartbeat_interval > 0, "heartbeat_interval", "must be > 0")
        rule(0 <= self.max_drift <= 1, "max_drift", f"must be 0 to 1 (rate ratios up to 2), got {self.max_drift:g}")
        hb, et = self.heartbeat, self.election_timeout
        lease = 0.9 / (1 + max(self.max_drift, 0))  # RaftConfig.leader_lease / ET
        rule(hb * 2 <= lease * et + 1e-12, "heartbeat_interval",
             f"must be well below election_timeout: at most {lease / 2:.3g} x election_timeout (half the leader "
             f"lease, which is 0.9 ET / (1 + max_drift)), got {hb:g} s with election_timeout {et:g} s")
        rule(self.decay_interval is None or self.decay_interval >= 0, "decay_interval", "must be >= 0 (0 = ET)")
        rule(self.rebalance_hysteresis is None or self.rebalance_hysteresis >= 0, "rebalance_hysteresis",
             "must be >= 0")
        rule(self.rebalance_limit is None or self.rebalance_limit >= 1, "rebalance_limit", "must be >= 1")
        rule(self.rebalance_window is None or self.rebalance_window > 0, "rebalance_window", "must be > 0")
        rule(self.revoke_timeout > 0, "revoke_timeout", "must be > 0")
        given = [name for name in ("ca", "cert", "key") if getattr(self, name)]
        rule(len(given) in (0, 3), ", ".join(n for n in ("ca", "cert", "key") if n not in given),
             f"mutual TLS needs ca, cert and key together; got only {', '.join(given)}")
        for name in given:
            path = Path(getattr(self, name))
            rule(path.is_file() and os.access(path, os.R_OK), name, f"no readable file at {path}")
        if self.ca and self.cert and self.key:
            check_certificate(self.ca, self.cert, self.key)
        rule(self.handover_timeout is None or self.handover_timeout >= 0, "handover_timeout", "must be >= 0")
        rule(self.tick is None or 0 < self.tick <= hb, "tick", f"must be in (0, heartbeat_interval = {hb:g} s]")
        limit = max(0.0, 0.45 * et - hb)
        rule(self.ack_delay is None or 0 <= self.ack_delay <= limit + 1e-12, "ack_delay",
             f"must be in [0, {limit:g} s]: heartbeat_interval + ack_delay may take at most half the leader "
             f"lease (0.45 x election_timeout), or leaders would learn of their acks too late")
        rule(self.election_jitter is None or self.election_jitter > 0, "election_jitter",
             "must be > 0 (without it every node times out together)")
        rule(self.election_jitter is None or self.priority == "off", "election_jitter",
             "is stock Raft's timeout range (priority=off); priority elections time out after a fixed ET")
        seen: set[str] = set()
        for entry in self.weights:
            parsed = _parse_weight(entry)
            rule(parsed is not None, "weights",
                 f"expected ID:WEIGHT (a node id and a positive number, e.g. a:2), got {entry!r}")
            assert parsed is not None
            rule(parsed[0] not in seen, "weights", f"names node {parsed[0]!r} twice")
            seen.add(parsed[0])
        rule(not self.weighted or self.priority == "balanced", "weights",
             f"need priority=balanced (the zeebe table and stock Raft take no weights), not {self.priority}")
        if self.weight is not None:
            check_capacity(self.weight, None)
        check_capacity(1.0, self.max_roles)
        if self.priority == "off":
            for name in ("fast_failover", "rebalance", "rebalance_limit"):
                rule(not getattr(self, name), name, "needs priorities (priority=balanced or zeebe, not off)")
            rule(not self.decay_interval, "decay_interval", "needs priorities (priority=balanced or zeebe, not off)")

    # -- resolved values --
    @property
    def tls(self) -> bool:
        """Mutual TLS between the nodes (ca, cert and key given)."""
        return bool(self.ca and self.cert and self.key)

    @property
    def heartbeat(self) -> float:
        return self.heartbeat_interval if self.heartbeat_interval is not None else self.election_timeout / 10

    @property
    def granularity(self) -> float:
        return self.tick if self.tick is not None else min(max(self.heartbeat / 5, 0.001), 0.05)

    @property
    def acks_after(self) -> float:
        if self.ack_delay is not None:
            return self.ack_delay
        return min(1.5 * self.heartbeat, max(0.0, 0.45 * self.election_timeout - self.heartbeat))

    @property
    def strategy(self) -> str:
        return "off" if self.priority == "off" else self.priority

    def replication_for(self, nodes: int) -> int:
        return self.replication if self.replication is not None else nodes

    @property
    def uses_fast_failover(self) -> bool:
        if self.priority == "off":
            return False
        return self.improvements if self.fast_failover is None else self.fast_failover

    @property
    def uses_rebalance(self) -> bool:
        if self.priority == "off":
            return False
        return self.improvements if self.rebalance is None else self.rebalance

    @property
    def decay_round(self) -> float | None:
        """None = ET (ZEP006). With improvements on and no explicit value: ET / 4."""
        if self.priority == "off":
            return None
        if self.decay_interval is not None:
            return self.decay_interval or None
        return self.election_timeout / 4 if self.improvements else None

    @property
    def handover(self) -> float:
        return self.handover_timeout if self.handover_timeout is not None else 2 * self.election_timeout

    def join_map(self) -> dict[str, str]:
        """Running member id -> HOST:PORT, from `join`."""
        return id_addresses(self.join)

    def state_dir(self, member: str) -> Path:
        if self.data_dir:
            return Path(self.data_dir)
        base = Path(os.environ.get("ELECT_STATE_DIR") or tempfile.gettempdir()) / "elect-raft"
        if self.join:  # its cluster's name is learnt from it: the node's own id and address name its state
            digest = hashlib.blake2b(f"{member}@{self.listen}".encode(), digest_size=8).hexdigest()
            return base / f"joined-{digest}"
        return base / self.cluster_id(member)


def _parse_weight(entry: str) -> tuple[str, float] | None:
    """``ID:WEIGHT`` -> (id, weight > 0), or None when malformed."""
    ident, sep, number = entry.rpartition(":")
    if not sep or not _ID.match(ident):
        return None
    try:
        weight = float(number)
    except ValueError:
        return None
    return (ident, weight) if math.isfinite(weight) and weight > 0 else None
