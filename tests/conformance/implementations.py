"""The implementations the conformance suite runs against, and how each starts a group of members.

Each implementation adds itself to IMPLEMENTATIONS with a `Group` factory: members either live in this
process (memory://) or run as `elect member` processes against real infrastructure. Tests only use
the `Member` interface of elect_bench.members, so one suite checks them all.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import elect
from elect.events import Event, Revoked
from elect.member_reports import DRAINED, LEADER, METRICS, TRANSFERRED, WORK
from elect.metrics import Metrics
from elect.roles import Role
from elect_bench.members import EventLog, InProcessMember, Line, Member, MemberProcess
from elect_cli.member import Worker, drained_report, transfer_report
from elect_cluster.endpoints import Endpoints
from elect_cluster.ports import free_port_blocks

_counter = itertools.count()


Options = Mapping[str, object]


@dataclass(frozen=True)
class Flags:
    """How a member runs beside its URL and roles, as `elect member`'s options say it: revoke_delay
    (`--revoke-delay`), work (`--work`), observe (`--observe`), metrics (`--metrics-port 0`), and options of the
    elector beside its URL's (`--set KEY=VALUE` each, e.g. weight)."""

    revoke_delay: float = 0.0
    work: float | None = None
    observe: bool = False
    metrics: bool = False
    options: tuple[tuple[str, str], ...] = ()

    def args(self) -> list[str]:
        return [*(["--revoke-delay", str(self.revoke_delay)] if self.revoke_delay else []),
                *(["--work", str(self.work)] if self.work is not None else []),
                *(["--observe"] if self.observe else []),
                *(["--metrics-port", "0"] if self.metrics else []),
                *(arg for key, value in self.options for arg in ("--set", f"{key}={value}"))]

    @property
    def settings(self) -> dict[str, str]:
        return dict(self.options)


def _texts(options: Options | None) -> tuple[tuple[str, str], ...]:
    return tuple((key, f"{value:g}" if isinstance(value, float) else str(value))
                 for key, value in (options or {}).items())


class Group:
    """A fresh election group for one test; `close()` stops every member it started.

    Members stop as `elect member` does on SIGTERM: they drain. With `work=SECONDS` each runs a worker per led
    role (`elect member --work`); with `observe` each reports whom it sees lead its roles, with `metrics` it serves
    its metrics; `reports(member, WORK | DRAINED | LEADER | METRICS)` gives what the member reported of its
    workers, its drain, the leaders it saw and where its metrics are."""

    def __init__(self) -> None:
        self.members: list[Member] = []

    def member(self, member_id: str, roles: Sequence[Role], flags: Flags) -> Member:
        raise NotImplementedError

    def start(self, member_id: str, roles: Sequence[Role], *, revoke_delay: float = 0.0,
              work: float | None = None, observe: bool = False, metrics: bool = False,
              options: Options | None = None) -> Member:
        m = self.member(member_id, roles, Flags(revoke_delay, work, observe, metrics, _texts(options)))
        self.members.append(m)
        m.start()
        return m

    def weigh(self, weights: Mapping[str, float]) -> dict[str, dict[str, object]]:
        """The options that give each member its weight (before any member starts): each member's own `weight`
        here; a method that needs every node to know every weight also sets them group-wide."""
        return {member: {"weight": weight} for member, weight in weights.items()}

    @staticmethod
    def reports(member: Member, kind: str) -> list[Line]:
        assert isinstance(member, (DrainingMember, MemberProcess, _Deferred)), member
        return member.reports(kind)

    def elector(self, member_id: str, roles: Sequence[Role], **options: object) -> elect.Elector:
        """An elector (not started) with the URL this group gives `member_id` (and `options`): to ask what it
        promises, or to see it refuse options."""
        raise NotImplementedError

    @staticmethod
    def started(member: Member) -> bool:
        """The member's elector has started (reached its store, broker or peers), so the others can know it."""
        if isinstance(member, _Deferred):
            member._group.launch()
            return member.proc.started()
        if isinstance(member, MemberProcess):
            return member.started()
        return member.alive

    def close(self) -> None:
        for m in self.members:
            try:
                m.kill() if not m.alive else m.stop(timeout=20)
            except Exception:
                m.kill()


class DrainingMember(InProcessMember):
    """An in-process member that stops as `elect member` does on SIGTERM (it drains), and keeps what that member
    would print on stderr as reports (its workers', its drain's, the leaders it saw, where its metrics are)."""

    def __init__(self, elector: elect.Elector, flags: Flags) -> None:
        super().__init__(elector)
        self._reports: list[tuple[str, Line]] = []
        self._lock = threading.Lock()
        self._metrics: Metrics | None = None
        if flags.work is not None:
            elector.run(elector.roles, Worker(flags.work, lambda report: self._report(WORK, report)))
        if flags.observe:
            elector.observe(lambda changed: self._report(LEADER, changed.to_dict()))
        if flags.metrics:
            self._metrics = elector.metrics()
            port = self._metrics.serve(0)
            self._report(METRICS, {"port": port, "url": f"http://127.0.0.1:{port}/metrics"})

    def _report(self, kind: str, report: Line) -> None:
        with self._lock:
            self._reports.append((kind, report))

    def reports(self, kind: str) -> list[Line]:
        with self._lock:
            return [r for k, r in self._reports if k == kind]

    def stop(self, timeout: float = 30.0) -> None:
        if self._alive:
            self._alive = False
            self._report(DRAINED, drained_report(self.elector.drain()))
            self.log.close()
            if self._metrics is not None:
                self._metrics.close()

    kill = stop

    def transfer(self, role: Role, to: str) -> None:
        self._report(TRANSFERRED, transfer_report(self.elector, role, to))


class MemoryGroup(Group):
    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.url = f"memory://conformance-{next(_counter)}-{time.monotonic_ns()}"

    def elector(self, member_id: str, roles: Sequence[Role], **options: object) -> elect.Elector:
        return elect.connect(self.url, roles, member=member_id, **options)

    def member(self, member_id: str, roles: Sequence[Role], flags: Flags) -> Member:
        m = DrainingMember(elect.connect(self.url, roles, member=member_id, **flags.settings), flags)
        if flags.revoke_delay:
            def hold(event: Event) -> None:
                if isinstance(event, Revoked):
                    time.sleep(flags.revoke_delay)  # the application finishing in-flight work
            m.elector.subscribe(hold)
        return m


@dataclass(frozen=True)
class Implementation:
    """name: test id. exclusive: at most one leader per role. graceful: Revoked callbacks hold the
    successor back. per_member_roles: members may contend for different role sets (partition-based
    NELI cannot: the owner of a partition leads all its roles, so role sets change group-wide).
    timeout: generous bound for any one election or handover to show up. sees_successors: a draining member
    sees who took its roles over (kafka:// and pysyncobj:// cannot: they leave the group or the partition).
    observes: a member sees who leads the roles it contends for (`observe`; kafka:// and pysyncobj:// cannot).
    renews: the method renews a leadership, so its metrics time renewals (leases, raft, NELI's fast mode).
    infra: the session fixture giving the infrastructure (`infra`'s Endpoints, or a secured LocalCluster)."""

    name: str
    make_group: Callable[..., Group]  # (tmp_path) or, with `needs_infra`, (tmp_path, endpoints)
    exclusive: bool = True
    graceful: bool = True
    per_member_roles: bool = True
    needs_infra: bool = False
    timeout: float = 30.0
    sees_successors: bool = True
    observes: bool = True
    renews: bool = True
    infra: str = "infra"


# --- kafka:// (NELI), etcd:// and zookeeper://: `elect member` processes against the session's real
# infrastructure (the `infra` fixture: Apache Kafka, etcd, ZooKeeper), with URLs made by elect_bench.methods:
# what is benchmarked is what is tested. NELI runs on both group protocols (classic and KIP-848). Each test
# gets a fresh topic and group, key prefix or path.
class InfraGroup(Group):
    method = "etcd"

    def __init__(self, tmp: Path, endpoints: Endpoints) -> None:
        super().__init__()
        self.tmp = tmp
        from elect_bench.methods import METHODS
        from elect_bench.methods import Group as MethodGroup

        unique = f"conformance-{self.method}-{next(_counter)}-{time.monotonic_ns()}"
        urls = METHODS[self.method].member_urls(MethodGroup(("any",), 6, unique, endpoints), 1.0)
        self.url = urls["any"]  # these methods give every member the same URL

    def elector(self, member_id: str, roles: Sequence[Role], **options: object) -> elect.Elector:
        return elect.connect(self.url, roles, member=member_id, **options)

    def member(self, member_id: str, roles: Sequence[Role], flags: Flags) -> Member:
        return MemberProcess(self.url, member_id, roles, log_dir=self.tmp, extra_args=flags.args())


class KafkaGroup(InfraGroup):
    method = "kafka-fast"


class KafkaFullGroup(InfraGroup):
    method = "kafka-full"


class Kafka848Group(InfraGroup):
    method = "kafka-fast-848"


class KafkaFull848Group(InfraGroup):
    method = "kafka-full-848"


class EtcdGroup(InfraGroup):
    method = "etcd"


class ZooKeeperGroup(InfraGroup):
    method = "zookeeper"


class KubernetesGroup(InfraGroup):
    method = "kubernetes"


# --- the same on the secured clusters (fixtures secure_etcd, secure_zookeeper, secure_kafka): TLS, client
# certificates and passwords, URLs made by the bench's secured method variants
class SecureEtcdGroup(InfraGroup):
    method = "etcd-tls"


class SecureZooKeeperGroup(InfraGroup):
    method = "zookeeper-tls"


class SecureKafkaGroup(InfraGroup):
    method = "kafka-fast-sasl"


# --- raft:// and pysyncobj://: `elect member` processes on loopback, a fixed cluster of three nodes ---
RAFT_IDS = ("a", "b", "c")
RAFT_PARTITIONS = 16  # the suite's roles (and alpha, beta, 7, late) land on distinct partitions


class _Deferred:
    """A member whose process starts when the test first looks at any member of its group: only then
    does the group know which of its nodes the test runs, and start the rest as roleless witnesses
    (a Raft group needs a majority of its nodes up, whatever the test does with two members)."""

    def __init__(self, group: RaftGroup, proc: MemberProcess) -> None:
        self._group = group
        self.proc = proc
        self.member_id = proc.member_id

    @property
    def log(self) -> EventLog:
        self._group.launch()
        return self.proc.log

    @property
    def alive(self) -> bool:
        self._group.launch()
        return self.proc.alive

    def start(self) -> None:
        self._group.pending.append(self)
        if self._group.launched:  # a member started (again) after the group's nodes came up
            self.proc.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._group.launch()
        self.proc.stop(timeout)

    def kill(self) -> None:
        self.proc.kill()

    def resign(self, role: Role) -> None:
        self._group.launch()
        self.proc.resign(role)

    def transfer(self, role: Role, to: str) -> None:
        self._group.launch()
        self.proc.transfer(role, to)

    def add_roles(self, roles: Iterable[Role]) -> None:
        self._group.launch()
        self.proc.add_roles(roles)

    def remove_roles(self, roles: Iterable[Role]) -> None:
        self._group.launch()
        self.proc.remove_roles(roles)

    def reports(self, kind: str) -> list[Line]:
        return self.proc.reports(kind)


class RaftGroup(Group):
    """Nodes a, b, c with URLs from elect_bench.methods (what is benchmarked is what is tested). `common`: options
    every node is given, witnesses included (raft's `weights`)."""

    method = "raft"

    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.tmp = tmp
        self.pending: list[_Deferred] = []
        self.witnesses: list[MemberProcess] = []
        self.launched = False
        self.urls = self.make_urls(tmp)
        self.common: dict[str, object] = {}

    def weigh(self, weights: Mapping[str, float]) -> dict[str, dict[str, object]]:
        """raft:// weighs nodes cluster-wide: every node, witnesses included, gets `weights`; each member's own
        `weight` is then only checked against it."""
        self.common["weights"] = ",".join(f"{member}:{weight:g}" for member, weight in weights.items())
        return super().weigh(weights)

    def make_urls(self, tmp: Path) -> dict[str, str]:
        from elect_bench.methods import METHODS
        from elect_bench.methods import Group as MethodGroup

        group = MethodGroup(RAFT_IDS, RAFT_PARTITIONS, f"conformance-{next(_counter)}")
        return METHODS[self.method].member_urls(group, 1.0, {"data_dir": str(tmp / "raft-state")})

    def elector(self, member_id: str, roles: Sequence[Role], **options: object) -> elect.Elector:
        return elect.connect(self.urls[member_id], roles, member=member_id, **{**self.common, **options})

    def member(self, member_id: str, roles: Sequence[Role], flags: Flags) -> Member:
        return _Deferred(self, MemberProcess(self.urls[member_id], member_id, roles, log_dir=self.tmp,
                                             extra_args=[*self._common_args(), *flags.args()]))

    def _common_args(self) -> list[str]:
        return [arg for key, value in _texts(self.common) for arg in ("--set", f"{key}={value}")]

    def launch(self) -> None:
        if self.launched:
            return
        self.launched = True
        running = {m.member_id for m in self.pending}
        for node in RAFT_IDS:
            if node not in running:
                witness = MemberProcess(self.urls[node], node, [], log_dir=self.tmp, extra_args=self._common_args())
                self.witnesses.append(witness)
                witness.start()
        for m in self.pending:
            m.proc.start()

    def close(self) -> None:
        procs = [m.proc for m in self.pending] + self.witnesses
        for proc in procs:  # SIGTERM all at once; each hands over and exits
            proc.signal(signal.SIGCONT)
            proc.signal(signal.SIGTERM)
        for proc in procs:
            proc.stop(timeout=10)


class PySyncObjGroup(RaftGroup):
    """Partition p of a node listens on its PORT + p, so each node gets a block of free ports."""

    method = "pysyncobj"

    def weigh(self, weights: Mapping[str, float]) -> dict[str, dict[str, object]]:
        return Group.weigh(self, weights)  # no cluster-wide weights: each member's own, which it refuses

    def make_urls(self, tmp: Path) -> dict[str, str]:
        bases = free_port_blocks(len(RAFT_IDS), RAFT_PARTITIONS)
        where = {n: f"127.0.0.1:{port}" for n, port in zip(RAFT_IDS, bases, strict=True)}
        return {n: f"pysyncobj://{n}@{where[n]}?peers=" + ",".join(f"{p}@{where[p]}" for p in RAFT_IDS if p != n)
                + f"&partitions={RAFT_PARTITIONS}&election_timeout=1" for n in RAFT_IDS}



IMPLEMENTATIONS: list[Implementation] = [
    Implementation("memory", MemoryGroup, timeout=10.0, renews=False),
    Implementation("kafka-fast", KafkaGroup, per_member_roles=False, needs_infra=True, timeout=40.0,
                   sees_successors=False, observes=False),
    Implementation("kafka-full", KafkaFullGroup, exclusive=False, graceful=False, per_member_roles=False,
                   needs_infra=True, timeout=40.0, sees_successors=False, observes=False, renews=False),
    Implementation("kafka-fast-848", Kafka848Group, per_member_roles=False, needs_infra=True, timeout=40.0,
                   sees_successors=False, observes=False),
    Implementation("kafka-full-848", KafkaFull848Group, exclusive=False, graceful=False, per_member_roles=False,
                   needs_infra=True, timeout=40.0, sees_successors=False, observes=False, renews=False),
    Implementation("etcd", EtcdGroup, needs_infra=True, timeout=20.0),
    Implementation("zookeeper", ZooKeeperGroup, needs_infra=True, timeout=20.0),
    Implementation("kubernetes", KubernetesGroup, needs_infra=True, timeout=20.0, infra="kubernetes"),
    Implementation("etcd-tls", SecureEtcdGroup, needs_infra=True, timeout=20.0, infra="secure_etcd"),
    Implementation("zookeeper-tls", SecureZooKeeperGroup, needs_infra=True, timeout=20.0, infra="secure_zookeeper"),
    Implementation("kafka-fast-sasl", SecureKafkaGroup, per_member_roles=False, needs_infra=True, timeout=40.0,
                   sees_successors=False, observes=False, infra="secure_kafka"),
    Implementation("raft", RaftGroup, timeout=30.0),
    # no lease: a cut-off PySyncObj leader overlaps its successor; Revoked callbacks do hold it back
    Implementation("pysyncobj", PySyncObjGroup, exclusive=False, graceful=True, timeout=40.0, sees_successors=False,
                   observes=False, renews=False),
]


def params() -> list[object]:
    return [pytest.param(impl, id=impl.name) for impl in IMPLEMENTATIONS]
