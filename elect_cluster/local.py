"""Real infrastructure on this machine: a Kafka-protocol broker, etcd and ZooKeeper, as plain processes.

Tests and benchmarks need the real thing (no mocks: docs/architecture.md) and fault injection on single
members, so ``LocalCluster`` starts each member detached, waits until it answers its own wire protocol,
and records everything in the workdir's state file: ``down``/``status``/``kill`` then work from any
process, and ``elect cluster up`` can return while the services keep running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from . import state as statefile
from .apache_kafka import ApacheKafkaService, kafka_version
from .endpoints import Endpoints
from .errors import ClusterError, NotReady
from .etcd import EtcdService
from .kafka_broker import KafkaService
from .kubernetes import KubernetesService
from .process import is_running, signal_group, spawn, stop_group, tail
from .security import Security
from .service import Member, Service
from .state import ClusterState
from .waiting import WaitTimeout, wait_until
from .zookeeper import ZooKeeperService

SERVICES = ("kafka", "etcd", "zookeeper", "kubernetes")  # in the order they start: kube-apiserver runs on etcd
DEFAULT_SERVICES = ("kafka", "etcd", "zookeeper")  # kube-apiserver (260 MB) only when asked for
SECURITY_DIR = "security"  # a secured cluster's certificates and password files, inside the workdir
# the Kafka broker behind the "kafka" service: Apache Kafka (tuned for fast groups, or with its group settings at
# Kafka's defaults but the minimums: elect_cluster.apache_kafka), or the light Tansu
BROKERS = ("apache", "apache-defaults", "tansu")


def default_workdir() -> Path:
    """``$ELECT_CLUSTER_DIR``, else ``~/.local/state/elect/cluster``."""
    env = os.environ.get("ELECT_CLUSTER_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "elect" / "cluster"


@dataclass(frozen=True)
class MemberStatus:
    """One member as seen now: is its process alive, and does it answer its wire protocol."""

    service: str
    index: int
    address: str
    pid: int | None
    alive: bool
    healthy: bool
    detail: str  # the member's role (leader, follower, standalone, broker) or why it is unhealthy
    log: str


class LocalCluster:
    """Start, inspect, fault and stop local infrastructure recorded in ``workdir``.

    Any ``LocalCluster`` pointed at the same workdir (in any process) sees the same cluster; the
    constructor's service choices only matter for ``up``. ``kafka_advertised_port``: the broker tells
    clients to connect there (where the caller puts a relay) instead of its own port. ``broker``: Apache
    Kafka (``apache``, 1 or 3 ``kafka_brokers``) or the light in-memory Tansu (``tansu``, one). ``secure``: every
    service speaks TLS only and authenticates (elect_cluster.security; Apache Kafka only): a SASL_SSL listener,
    etcd with client certificates and auth enabled (kube-apiserver shows its own certificate to it), ZooKeeper's
    secure client port; the endpoints carry the URL parameters a client needs (kube-apiserver speaks TLS with
    tokens and RBAC either way).
    """

    def __init__(self, workdir: Path | str | None = None, services: Iterable[str] = DEFAULT_SERVICES,
                 etcd_members: int = 1, zookeeper_nodes: int = 1, host: str = "127.0.0.1",
                 etcd_election_timeout_ms: int = 500, etcd_heartbeat_interval_ms: int = 50,
                 kafka_advertised_port: int | None = None, broker: str = "apache", kafka_brokers: int = 1,
                 secure: bool = False) -> None:
        self.workdir = Path(workdir) if workdir is not None else default_workdir()
        self.workdir = self.workdir.expanduser().absolute()
        wanted = list(dict.fromkeys(services))
        unknown = [s for s in wanted if s not in SERVICES]
        if unknown or not wanted:
            raise ClusterError(f"unknown services {unknown or wanted}; choose from {', '.join(SERVICES)}")
        if "kubernetes" in wanted and "etcd" not in wanted:
            wanted.append("etcd")  # kube-apiserver stores its objects in etcd
        if broker not in BROKERS:
            raise ClusterError(f"unknown broker {broker!r}; choose from {', '.join(BROKERS)}")
        if secure and not broker.startswith("apache") and "kafka" in wanted:
            raise ClusterError("a secured cluster (TLS, SASL) runs Apache Kafka; the light Tansu broker has no TLS")
        self.host = host
        self.broker = broker
        self.secure = secure
        self.security = Security(self.workdir / SECURITY_DIR) if secure else None
        kafka: Service = (ApacheKafkaService(kafka_advertised_port, security=self.security,
                                             tuned=broker == "apache") if broker.startswith("apache")
                          else KafkaService(kafka_advertised_port))
        self._kubernetes = KubernetesService(security=self.security)
        self._services: dict[str, Service] = {
            "kafka": kafka,
            "etcd": EtcdService(etcd_election_timeout_ms, etcd_heartbeat_interval_ms, security=self.security),
            "zookeeper": ZooKeeperService(security=self.security),
            "kubernetes": self._kubernetes,
        }
        counts = {"kafka": kafka_brokers, "etcd": etcd_members, "zookeeper": zookeeper_nodes, "kubernetes": 1}
        self.counts = {s: counts[s] for s in SERVICES if s in wanted}
        for name, count in self.counts.items():
            if not 1 <= count <= self._services[name].max_members:
                raise ClusterError(f"{name}: {count} members is not possible here "
                                   f"(1..{self._services[name].max_members})")
        self.startup_seconds: dict[str, float] = {}  # per member label, measured by the last up()
        self._popen: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self._lock_depth = 0
        self._thread_lock = threading.RLock()

    # -- life cycle ---------------------------------------------------------------------------------

    def up(self, timeout: float = 90.0) -> Endpoints:
        """Start every member, wait until all answer (and each group has a leader), write endpoints.json.

        If this workdir's cluster is already up with the same shape, return its endpoints instead of
        starting duplicates. On failure everything started is stopped again and ClusterError says
        which member failed, with its log file and last lines.
        """
        with self._locked():
            existing = self._existing(timeout)
            if existing is not None:
                return existing
            for service in self.counts:
                self._services[service].preflight()  # fail before starting anything
            self._clean()
            state = ClusterState(self.host, dict(self.counts), broker=self.broker, secure=self.secure)
            try:
                if self.security is not None:
                    Security.make(self.security.root, self.host)
                for service, count in self.counts.items():
                    if service == "kubernetes":
                        self._kubernetes.etcd = [m.address for m in state.of("etcd")]
                    state.members += self._services[service].plan(self.workdir / service, self.host, count)
                statefile.save(self.workdir, state)
                began = time.monotonic()
                for member in state.members:
                    self._spawn(member)
                    statefile.save(self.workdir, state)  # so down() finds whatever was started
                self._await_healthy(state, state.members, began, timeout)
                for service in self.counts:
                    self._services[service].configure(state.of(service), max(5.0, timeout - (time.monotonic() - began)))
            except BaseException:
                self._down_locked()
                raise
            endpoints = self._endpoints(state)
            statefile.write_atomic(self.workdir / statefile.ENDPOINTS_FILE, endpoints.to_json() + "\n")
            return endpoints

    def down(self) -> None:
        """SIGKILL every process group this workdir's cluster started and wait until they are gone.

        Idempotent; works from any process. Logs and data stay in the workdir for post-mortems (the
        next ``up`` wipes them).
        """
        with self._locked():
            self._down_locked()

    def running_endpoints(self) -> Endpoints | None:
        """The endpoints if a cluster is recorded in the workdir and at least one member runs."""
        state = statefile.load(self.workdir)
        if state is None or not any(self._running(m) for m in state.members):
            return None
        return self._endpoints(state)

    @property
    def endpoints(self) -> Endpoints:
        """Endpoints of the recorded cluster (ClusterError if none was started)."""
        return self._endpoints(self._state())

    def members(self, service: str) -> list[Member]:
        """The recorded members of ``service`` (addresses, ports, pid), e.g. for benchmark fault plans."""
        return self._state().of(service)

    def status(self, timeout: float = 2.0) -> list[MemberStatus]:
        """Every recorded member: pid, alive (per /proc), healthy (per its wire protocol) and role."""
        state = statefile.load(self.workdir)
        result: list[MemberStatus] = []
        for m in state.members if state else []:
            alive = self._running(m)
            healthy, detail = False, "not running"
            if alive:
                try:
                    detail, healthy = self._services[m.service].probe(m, timeout), True
                except NotReady as exc:
                    detail = str(exc)
            result.append(MemberStatus(m.service, m.index, m.address, m.process.pid if m.process else None,
                                       alive, healthy, detail, m.spec.log))
        return result

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every recorded member runs and answers, and every group has a leader."""
        state = self._state()
        stopped = [m.label for m in state.members if not self._running(m)]
        if stopped:
            raise ClusterError(f"not running: {', '.join(stopped)} (start_member them first)")
        self._await_healthy(state, state.members, time.monotonic(), timeout)

    # -- faults on single members -------------------------------------------------------------------

    def kill(self, service: str, index: int) -> bool:
        """SIGKILL one member (its whole process group); False if it was not running."""
        return self._stop(service, index, grace=0.0)

    def stop_member(self, service: str, index: int, grace: float = 10.0) -> bool:
        """Stop one member gracefully (SIGTERM, then SIGKILL after ``grace`` s); False if not running."""
        return self._stop(service, index, grace=grace)

    def start_member(self, service: str, index: int, timeout: float = 60.0, wait: bool = True) -> None:
        """Restart a stopped member with the same ports and data; by default wait until it serves."""
        with self._locked():
            state = self._state()
            member = state.member(service, index)
            if self._running(member):
                raise ClusterError(f"{member.label} is already running (pid {member.process and member.process.pid})")
            began = time.monotonic()
            self._spawn(member)
            statefile.save(self.workdir, state)
        if wait:
            self._await_healthy(state, [member], began, timeout)

    def pause_member(self, service: str, index: int) -> None:
        """SIGSTOP one member (a frozen process: sockets stay open, nothing answers)."""
        self._signal(service, index, signal.SIGSTOP)

    def resume_member(self, service: str, index: int) -> None:
        """SIGCONT a member paused with ``pause_member``."""
        self._signal(service, index, signal.SIGCONT)

    def leader_index(self, service: str, timeout: float = 2.0) -> int | None:
        """Which member of ``service`` leads now, per the store itself (etcd status, ZooKeeper srvr)."""
        running = [m for m in self._state().of(service) if self._running(m)]
        return self._services[service].leader(running, timeout)

    def wait_for_leader(self, service: str, timeout: float = 30.0, other_than: int | None = None) -> int:
        """Poll until ``service`` has a leader (one that is not ``other_than``) and return its index."""
        def found() -> tuple[int] | None:
            index = self.leader_index(service, timeout=min(2.0, timeout))
            return None if index is None or index == other_than else (index,)

        what = f"a {service} leader" + (f" other than member {other_than}" if other_than is not None else "")
        return wait_until(found, timeout, 0.05, what=what)[0]

    # -- context manager ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.down()

    # -- internals ----------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The workdir lock across processes; re-entrant (and thread-safe) within this object."""
        with self._thread_lock:
            if self._lock_depth:  # re-entered from our own method: the file lock is already ours
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            with statefile.locked(self.workdir):
                self._lock_depth = 1
                try:
                    yield
                finally:
                    self._lock_depth = 0

    def _state(self) -> ClusterState:
        state = statefile.load(self.workdir)
        if state is None:
            raise ClusterError(f"no cluster is up in {self.workdir} (run `elect cluster up` first)")
        return state

    def _running(self, member: Member) -> bool:
        popen = self._popen.get((member.service, member.index))
        if popen is not None:
            popen.poll()  # reap our own dead children so they do not linger as zombies
        return member.process is not None and is_running(member.process)

    def _existing(self, timeout: float) -> Endpoints | None:
        state = statefile.load(self.workdir)
        if state is None:
            return None
        running = [m for m in state.members if self._running(m)]
        if not running:
            return None  # stale state of a cluster that is gone: start afresh
        hint = f"run `elect cluster down --workdir {self.workdir}` first"
        if state.counts != self.counts or ("kafka" in self.counts and state.broker != self.broker) or \
                state.secure != self.secure:
            raise ClusterError(f"a different cluster is already up in {self.workdir} "
                               f"({_shape(state.counts, state.broker, state.secure)}, asked for "
                               f"{_shape(self.counts, self.broker, self.secure)})"
                               f"; {hint}")
        if len(running) != len(state.members):
            stopped = ", ".join(m.label for m in state.members if m not in running)
            raise ClusterError(f"the cluster in {self.workdir} is only partly running ({stopped} stopped); "
                               f"start those members or {hint}")
        self._await_healthy(state, state.members, time.monotonic(), timeout)
        return self._endpoints(state)

    def _clean(self) -> None:
        """Remove what an earlier run left (data, logs, state); never anything else in the workdir.

        A ``kafka``/``etcd``/``zookeeper`` directory in a workdir that elect never used is somebody
        else's, so we refuse rather than delete it.
        """
        marker = self.workdir / statefile.MARKER_FILE
        if not marker.exists():
            foreign = [s for s in (*SERVICES, SECURITY_DIR) if (self.workdir / s).exists()]
            if foreign:
                raise ClusterError(f"{self.workdir} already holds {', '.join(foreign)} directories that elect "
                                   f"did not create; choose another --workdir")
            marker.write_text("state, logs and data of `elect cluster up`\n")
        for service in (*SERVICES, SECURITY_DIR):
            shutil.rmtree(self.workdir / service, ignore_errors=True)
        statefile.remove(self.workdir)

    def _spawn(self, member: Member) -> None:
        popen, member.process = spawn(member.spec)
        self._popen[(member.service, member.index)] = popen

    def _await_healthy(self, state: ClusterState, members: list[Member], began: float,
                       timeout: float) -> None:
        pending = {m.label: m for m in members}
        groups = sorted({m.service for m in members})
        reasons: dict[str, str] = {}
        deadline = began + timeout

        def probe_timeout() -> float:
            return max(0.2, min(2.0, deadline - time.monotonic()))

        def ready() -> bool:
            for label, member in list(pending.items()):
                self._check_alive(member)
                try:
                    self._services[member.service].probe(member, probe_timeout())
                except NotReady as exc:
                    reasons[label] = str(exc)
                    continue
                self.startup_seconds[label] = time.monotonic() - began
                reasons.pop(label, None)
                del pending[label]
            if pending:
                return False
            for service in groups:
                group = [m for m in state.of(service) if self._running(m)]
                try:
                    self._services[service].probe_group(group, probe_timeout())
                except NotReady as exc:
                    reasons[service] = str(exc)
                    return False
                reasons.pop(service, None)
            return True

        try:
            wait_until(ready, max(0.0, deadline - time.monotonic()), 0.05,
                       what="the cluster to become healthy")
        except WaitTimeout:
            lines = [f"not healthy within {timeout:g} s:"]
            for key, reason in reasons.items():
                lines.append(f"- {key}: {reason}")
                for m in [pending[key]] if key in pending else state.of(key):
                    lines.append(f"  log {m.spec.log}, last lines:\n{_indent(tail(m.spec.log))}")
            raise ClusterError("\n".join(lines)) from None

    def _check_alive(self, member: Member) -> None:
        if self._running(member):
            return
        popen = self._popen.get((member.service, member.index))
        # `_running` polled before it looked: a child that exited in between is reaped here, so its code is read
        try:
            code = popen.wait(timeout=1.0) if popen is not None else None
        except subprocess.TimeoutExpired:
            code = None  # its group is gone but it is not (yet) reaped: say only that it is not running
        how = f"exited with code {code}" if code is not None else "is not running"
        raise ClusterError(f"{member.label} ({' '.join(member.spec.argv[:2])} ...) {how} while starting. "
                           f"Log {member.spec.log}, last lines:\n{_indent(tail(member.spec.log))}")

    def _stop(self, service: str, index: int, grace: float) -> bool:
        with self._locked():
            state = self._state()
            member = state.member(service, index)
            was_running = self._running(member)
            if member.process is not None:
                stop_group(member.process, grace=grace, popen=self._popen.pop((service, index), None))
                member.process = None
                statefile.save(self.workdir, state)
            return was_running

    def _signal(self, service: str, index: int, sig: signal.Signals) -> None:
        member = self._state().member(service, index)
        if member.process is None or not signal_group(member.process, sig):
            raise ClusterError(f"{member.label} is not running")

    def _down_locked(self) -> None:
        state = statefile.load(self.workdir)
        if state is None:
            return
        failures: list[str] = []
        for member in state.members:
            if member.process is None:
                continue
            try:
                stop_group(member.process, popen=self._popen.pop((member.service, member.index), None))
            except WaitTimeout as exc:
                failures.append(f"{member.label} (pid {member.process.pid}): {exc}")
                continue
            member.process = None
        if failures:
            statefile.save(self.workdir, state)
            raise ClusterError("could not stop: " + "; ".join(failures))
        statefile.remove(self.workdir)

    def _endpoints(self, state: ClusterState) -> Endpoints:
        security = Security(self.workdir / SECURITY_DIR).params() if state.secure else {}
        kafka, etcd, zookeeper, kubernetes = (tuple(m.address for m in state.of(s)) for s in SERVICES)
        label = broker_label(state.broker, state.counts["kafka"]) if "kafka" in state.counts else ""
        kubeconfig = state.of("kubernetes")[0].extra["kubeconfig"] if kubernetes else ""
        return Endpoints(kafka, etcd, zookeeper, kafka_broker=label, security=tuple(security.items()),
                         kubernetes=kubernetes, kubeconfig=kubeconfig)


def _shape(counts: dict[str, int], broker: str, secure: bool = False) -> str:
    shape = ", ".join(f"{name}{f' ({broker})' if name == 'kafka' else ''} x{count}" for name, count in counts.items())
    return ("secured: " if secure else "") + shape


def broker_label(broker: str, nodes: int) -> str:
    """How reports name the Kafka broker that served a run."""
    if broker.startswith("apache"):
        defaults = ", group settings at Kafka's defaults but the session minimums" if broker != "apache" else ""
        return f"Apache Kafka {kafka_version()} (KRaft, {nodes} node{'s' if nodes > 1 else ''}{defaults})"
    return "Tansu (the light in-memory Kafka-protocol broker)"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
