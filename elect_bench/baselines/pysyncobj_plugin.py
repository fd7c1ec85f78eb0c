"""The `pysyncobj://` entry point: the options and a light Plugin that does not import pysyncobj.

    pysyncobj://ID@HOST:PORT?peers=ID@HOST:PORT,...&partitions=P&election_timeout=1.0

PySyncObj is an independent Raft library; the harness runs it as a baseline beside `raft://`.
"""

from __future__ import annotations

from dataclasses import dataclass

from elect.options import rule
from elect.registry import Plugin
from elect.shares import refuse_capacity
from raft_priority.options import PeerOptions, check_nodes, split_host_port


@dataclass(frozen=True)
class PySyncObjOptions(PeerOptions):
    """Options of the `pysyncobj://` baseline (see elect_bench/baselines/pysyncobj.py).

    listen: this node's HOST:PORT; partition p's SyncObj binds PORT + p (so each node needs `partitions`
    consecutive free ports). peers: the other nodes, ID@HOST:PORT each (their partition p at PORT + p).
    election_timeout: PySyncObj's raftMinTimeout (raftMaxTimeout = 2 x it, as stock Raft).
    heartbeat_interval: appendEntriesPeriod (default ET/10). leader_fallback: a leader that has heard no
    majority for this long steps down (PySyncObj's leaderFallbackTimeout; default ET). poll_interval:
    how often leadership is read (default heartbeat_interval / 2). rejoin_delay: how long a resigned
    partition's SyncObj stays down so the others elect (default 3 ET; a node that won a partition it
    contends no role on steps aside for ET/2 only, so it is back to vote for one that does). weight, max_roles:
    only 1 and unset (a clear refusal rather than an unknown parameter): PySyncObj elects by randomized timeouts
    alone. data_dir: where each partition's term and vote are journalled (DIR/MEMBER/partition-P.journal, kept
    across restarts; default a temporary directory for the life of the process).
    """

    heartbeat_interval: float | None = None
    leader_fallback: float | None = None
    poll_interval: float | None = None
    rejoin_delay: float | None = None
    weight: float = 1.0
    max_roles: int | None = None
    data_dir: str | None = None

    def __post_init__(self) -> None:
        refuse_capacity("pysyncobj", self.weight, self.max_roles,
                        "PySyncObj elects by randomized timeouts alone, with nothing to steer how many partitions a "
                        "node leads, and the baseline is kept as PySyncObj behaves, not extended")
        check_nodes(self.listen, self.peers)
        rule(1 <= self.partitions <= 1000, "partitions", f"must be 1..1000 (one TCP port each), got {self.partitions}")
        where = split_host_port(self.listen)
        assert where is not None
        rule(where[1] + self.partitions - 1 < 65536, "partitions", "PORT + partitions - 1 must be a valid port")
        rule(self.election_timeout > 0, "election_timeout", "must be > 0")
        hb = self.heartbeat
        rule(hb > 0 and hb * 3 < self.election_timeout, "heartbeat_interval",
             f"PySyncObj needs it > 0 and below a third of election_timeout ({hb:g} s vs {self.election_timeout:g} s)")
        for name in ("leader_fallback", "poll_interval", "rejoin_delay"):
            value = getattr(self, name)
            rule(value is None or value > 0, name, "must be > 0")
        rule(self.revoke_timeout > 0, "revoke_timeout", "must be > 0")

    @property
    def heartbeat(self) -> float:
        return self.heartbeat_interval if self.heartbeat_interval is not None else self.election_timeout / 10

    @property
    def fallback(self) -> float:
        return self.leader_fallback if self.leader_fallback is not None else self.election_timeout

    @property
    def poll(self) -> float:
        return self.poll_interval if self.poll_interval is not None else self.heartbeat / 2

    @property
    def rejoin(self) -> float:
        return self.rejoin_delay if self.rejoin_delay is not None else 3 * self.election_timeout


PLUGIN = Plugin(
    scheme="pysyncobj",
    summary="baseline: PySyncObj (an independent Raft), one SyncObj per partition",
    options=PySyncObjOptions,
    factory="elect_bench.baselines.pysyncobj:create",
    url_parts={"hosts": "listen"},
    extra="pysyncobj",
    requires=("pysyncobj",),
    member_required=True,
)
