"""The methods the harness compares, and how each one's member URLs are made for a group.

A method is an elector URL scheme plus settings, all stated at one *detection budget* (docs/architecture.md:
Raft election timeout = lease TTL = Kafka session timeout), so the comparison is like for like. The
conformance suite builds its groups with the same `member_urls`, so what is benchmarked is what is
tested. What a method promises (exclusive or not, ...) is not restated here: `promises` asks the elector.
"""

from __future__ import annotations

import hashlib
import math
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from elect.config import connect, spec_from_url
from elect.contract import Characteristics
from elect.errors import ConfigError
from elect_bench import anchors
from elect_cluster.endpoints import Endpoints
from elect_cluster.ports import free_port_blocks, free_ports
from raft_priority.priorities import assign_priorities

Addresses = Callable[[str], str]  # member id -> the address it binds and is reached at
Via = Callable[[str, str, str], str]  # (member id, "host:port" it dials, wire protocol) -> what it dials instead


def direct(member: str, address: str, protocol: str) -> str:
    return address


@dataclass(frozen=True)
class Group:
    """What a method needs to make URLs: member ids, the infrastructure, a name unique to this group."""

    ids: Sequence[str]
    roles: int
    unique: str
    endpoints: Endpoints | None = None
    address: Addresses = field(default=lambda _id: "127.0.0.1")
    via: Via = direct  # the harness puts a counting relay here to count each member's requests
    state_dir: str | None = None  # where members keep state on disk (Raft's term and vote), e.g. in the trial's
    # workdir, so a member started again finds its own; None: the elector's default (under the temp dir)
    ports: Callable[[int], list[int]] = free_ports  # n ports, one per member; a simulated group, which listens
    # nowhere, numbers them instead of taking real ones from the OS


@dataclass(frozen=True)
class Method:
    """name: as in reports. needs: infrastructure services. params(budget): URL parameters at a detection
    budget. build: the member URLs of a group. struck: the services an infrastructure fault strikes, in turn from
    one trial or strike to the next (default: the first it needs): kube-apiserver and the etcd beneath it."""

    name: str
    scheme: str
    summary: str
    needs: tuple[str, ...]
    params: Callable[[float], dict[str, str]]
    build: Callable[[Group, Mapping[str, str]], dict[str, str]]
    secure: bool = False  # runs on a secured cluster (`Endpoints.secured`): TLS, client certificates, passwords
    struck: tuple[str, ...] = ()
    planned: float = 0.0  # how many D after start the method may still move roles by plan (raft's hand-backs)
    hands_back: bool = True  # a member that (re)joins is handed its share of roles; False: it gets only roles
    # that free up (the anchors' elections, stock Raft), so a rollout does not wait for balance after a step

    @property
    def grows(self) -> bool:
        """Whether a member of a new id can be started beside a running group: the store-based methods (any id
        contends) and raft:// (it joins); not methods whose peers are fixed at start (PySyncObj, the Java Raft
        anchors, whose membership `bench/raft_membership.py` changes with their own operators' tools)."""
        return self.scheme == "raft" or bool(self.needs)

    def quiet(self, budget: float) -> float:
        """How long a group must be quiet to count as settled: 1.5 D (at least 1 s), and longer than the method's
        planned moves after a start: raft hands a partition back to its primary once that primary has been up
        for `rebalance_hysteresis` (3 ET), and a group that looked quiet before then moved a role at rest (seen
        in the floor pass at D = 0.5 s: 7 of 30 cold starts "lost" a role 1.5 s in, each a graceful hand-back)."""
        return max(1.0, 1.5 * budget, self.planned * budget)

    def strikes(self, turn: int) -> str:
        """The service the `turn`-th infrastructure fault (0, 1, ...) of this method strikes."""
        services = self.struck or self.needs[:1]
        return services[turn % len(services)]

    def member_urls(self, group: Group, budget: float, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
        return self.build(group, {**self.params(budget), **(overrides or {})})

    @property
    def uncounted(self) -> str | None:
        """Why the harness's relays cannot count this method's requests (they read plain wire protocols), or None."""
        if self.secure:
            return "its requests are TLS, which the relays that count requests cannot read"
        if "kubernetes" in self.needs:
            return ("its requests are HTTPS (the Kubernetes API serves nothing else), which the relays that count "
                    "requests cannot read; bench/bare/kube_requests.py counts them at the API server")
        return None

    @property
    def anchor(self) -> bool:
        """Whether members are an anchor's own code (bench/anchors) rather than `elect member`."""
        return self.scheme in anchors.PROMISES

    def promises(self, url: str) -> Characteristics:
        return anchors.PROMISES[self.scheme] if self.anchor else promises(url)

    def refuses(self, budget: float) -> str | None:
        """Why this method's members refuse to start at detection budget `budget` (a setting its options reject,
        e.g. NELI fast on the classic protocol below 1 s), or None. Checked on URLs of placeholder hosts: only the
        options are validated, nothing is opened."""
        if self.anchor or not self.needs or self.secure:
            return None
        where = ("127.0.0.1:9",)
        placeholder = Endpoints(kafka=where, etcd=where, zookeeper=where, kubernetes=where)
        urls = self.member_urls(Group(("m0",), 6, "refuses", placeholder), budget)
        try:
            spec_from_url(urls["m0"])
        except ConfigError as exc:
            return str(exc)
        return None

    def launch(self, url: str, member: str, roles: Sequence[int], python: str) -> list[str] | None:
        """An anchor's adapter command line for a member (None: the member is `elect member URL`)."""
        return anchors.command(url, member, roles, python) if self.anchor else None

    def variant(self, params: Mapping[str, str]) -> Method:
        """This method with URL parameters of its own, named after them (one row of a table, e.g. NELI full
        mode with a longer T beside the default)."""
        own = dict(params)
        name = " ".join([self.name, *(f"{k}={v}" for k, v in own.items())])
        return replace(self, name=name, params=lambda budget: {**self.params(budget), **own})


def method_spec(text: str, among: Sequence[str] | None = None) -> Method:
    """`NAME [KEY=VALUE ...]`: a method of `among` (default: every method), with URL parameters of its own
    if any (e.g. `raft-stock election_jitter=0.5 pre_vote=off`)."""
    name, params = split_spec(text.split(), among)
    return METHODS[name].variant(params) if params else METHODS[name]


def split_spec(words: Sequence[str], among: Sequence[str] | None = None) -> tuple[str, dict[str, str]]:
    """A method's name and its `KEY=VALUE` parameters, checked (see `method_spec`)."""
    names = list(METHODS) if among is None else list(among)
    pairs = [w.partition("=") for w in words[1:]]
    if not words or words[0] not in names or any(not sep or not key for key, sep, _ in pairs):
        raise ConfigError(f"a method is 'NAME [KEY=VALUE ...]' with a name of {', '.join(names)}; "
                          f"got {' '.join(words)!r}", parameter="methods")
    return words[0], {k: v for k, _, v in pairs}


def promises(url: str) -> Characteristics:
    """What the elector a member URL configures promises (exclusive, overlap bound, ...).

    raft://, kafka:// and pysyncobj:// derive it on the elector object (from the options and the group), so
    one is built from the URL, as `elect.connect` does, and read: never started, it opens nothing.
    """
    return connect(url).characteristics


def _q(params: Mapping[str, str]) -> str:
    return urlencode(dict(params), safe=",@:")


def _hosts(group: Group, member: str, service: str, protocol: str) -> str:
    if group.endpoints is None:
        raise ValueError(f"this method needs {service} endpoints")
    hosts: Sequence[str] = getattr(group.endpoints, service)
    return ",".join(group.via(member, h, protocol) for h in hosts)


def _kafka(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    query = _q({"group": group.unique, "partitions": str(group.roles), **params})
    return {i: f"kafka://{_hosts(group, i, 'kafka', 'kafka')}/{group.unique}?{query}" for i in group.ids}


def _etcd(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    return {i: f"etcd://{_hosts(group, i, 'etcd', 'http')}/{group.unique}?{_q(params)}" for i in group.ids}


def _zookeeper(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    return {i: f"zookeeper://{_hosts(group, i, 'zookeeper', 'zookeeper')}/{group.unique}?{_q(params)}"
            for i in group.ids}


def _kubernetes(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    """Leases in the default namespace, named from the group (a DNS label of at most 40 characters: the part of
    `unique` that is one, and a hash that keeps groups apart); the cluster's member kubeconfig (its lease Role)."""
    prefix = kube_prefix(group.unique)
    where = {i: _hosts(group, i, "kubernetes", "https") for i in group.ids}
    kubeconfig = group.endpoints.kubeconfig if group.endpoints is not None else ""
    extra = {"kubeconfig": kubeconfig} if kubeconfig else {}
    return {i: f"kubernetes://{where[i]}/default?{_q({'prefix': prefix, **extra, **params})}" for i in group.ids}


def _client_go(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    """client-go members: the same Leases kubernetes:// would use for numbered roles (PREFIX-r), the member
    kubeconfig; LeaseDuration whole seconds (what the record can say), RenewDeadline and RetryPeriod in client-go's
    default proportions (15 s : 10 s : 2 s)."""
    kubeconfig = group.endpoints.kubeconfig if group.endpoints is not None else ""
    query = _q({"prefix": kube_prefix(group.unique), "kubeconfig": kubeconfig, **params})
    return {i: f"client-go://{_hosts(group, i, 'kubernetes', 'https')}/default?{query}" for i in group.ids}


def _client_go_timing(budget: float) -> dict[str, str]:
    lease = max(1, round(budget))
    return {"lease_duration": f"{lease}s", "renew_deadline": f"{round(lease * 2000 / 3)}ms",
            "retry_period": f"{round(lease * 2000 / 15)}ms"}


def _k8s_python(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    return {i: url.replace("client-go://", "k8s-python://", 1) for i, url in _client_go(group, params).items()}


def _k8s_python_timing(budget: float) -> dict[str, str]:
    """The smallest whole seconds the Python client accepts at or above the budget, in client-go's proportions:
    each >= 1, lease > renew_deadline > 1.2 retry_period (3 s / 2 s / 1 s at D = 1 s)."""
    lease = max(3, round(budget))
    retry = max(1, round(lease * 2 / 15))
    renew = max(math.floor(1.2 * retry) + 1, round(lease * 2 / 3))
    return {"lease_duration": str(max(lease, renew + 1)), "renew_deadline": str(renew), "retry_period": str(retry)}


def kube_prefix(unique: str) -> str:
    """A Lease name prefix for a group: lowercase letters, digits and '-', at most 40 characters, unique."""
    slug = re.sub(r"[^a-z0-9]+", "-", unique.lower()).strip("-")[:28].strip("-") or "g"
    return f"{slug}-{hashlib.blake2b(unique.encode(), digest_size=5).hexdigest()}"


def _peer_urls(scheme: str, protocol: str | None, named: bool = False, port_per_partition: bool = False,
               stateful: bool = False) -> Callable[[Group, Mapping[str, str]], dict[str, str]]:
    """Raft-style URLs: every member names itself and its peers, each with a port of its own (with
    `port_per_partition`, a block: partition p listens on PORT + p). With a wire `protocol` the way to
    each peer goes through `group.via` (None: its protocol is not counted); `named` gives the cluster the
    group's name, as peers may then be seen at different addresses. `stateful`: the elector takes a
    `data_dir`, given `group.state_dir` when there is one."""

    def build(group: Group, params: Mapping[str, str]) -> dict[str, str]:
        n = len(group.ids)
        chosen = free_port_blocks(n, group.roles) if port_per_partition else group.ports(n)
        ports = dict(zip(group.ids, chosen, strict=True))
        where = {i: f"{group.address(i)}:{ports[i]}" for i in group.ids}
        urls = {}
        for i in group.ids:
            peers = ",".join(f"{p}@{group.via(i, where[p], protocol) if protocol else where[p]}"
                             for p in group.ids if p != i)
            query = _q({"peers": peers, "partitions": str(group.roles), **({"cluster": group.unique} if named else {}),
                        **({"data_dir": group.state_dir} if stateful and group.state_dir else {}), **params})
            urls[i] = f"{scheme}://{i}@{where[i]}?{query}"
        return urls

    return build


def _kazoo(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    return {i: f"kazoo://{_hosts(group, i, 'zookeeper', 'zookeeper')}/{group.unique}?{_q(params)}" for i in group.ids}


def _etcd_election(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    # etcd's Go client speaks gRPC to etcd (elect's etcd:// uses the JSON gateway): counted as gRPC calls
    return {i: f"etcd-election://{_hosts(group, i, 'etcd', 'grpc')}/{group.unique}?{_q(params)}" for i in group.ids}


def _goneli(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    return {i: f"goneli://{_hosts(group, i, 'kafka', 'kafka')}/{group.unique}?{_q(params)}" for i in group.ids}


def _java_raft(scheme: str) -> Callable[[Group, Mapping[str, str]], dict[str, str]]:
    """Members of a Java multi-raft anchor (sofa-jraft, Apache Ratis): one port each (all of a member's groups
    share it), our balanced priorities as each role's order of members, state under the group's state directory.
    The two adapters take the same flags; each turns the order into its library's priority values."""

    def build(group: Group, params: Mapping[str, str]) -> dict[str, str]:
        ports = dict(zip(group.ids, free_ports(len(group.ids)), strict=True))
        where = {i: f"{group.address(i)}:{ports[i]}" for i in group.ids}
        order = assign_priorities(list(group.ids), group.roles, len(group.ids))
        priorities = ";".join(f"{p}=" + ">".join(sorted(ranks, key=lambda m: -ranks[m]))
                              for p, ranks in enumerate(order))
        state = group.state_dir or tempfile.mkdtemp(prefix=f"elect-{scheme}-")
        return {i: f"{scheme}://{i}@{where[i]}?" + _q({
            "peers": ",".join(f"{p}@{where[p]}" for p in group.ids if p != i), "priorities": priorities,
            "data_dir": f"{state}/{i}", **params}) for i in group.ids}

    return build


_jraft = _java_raft("jraft")
_ratis = _java_raft("ratis")


def _secured(build: Callable[[Group, Mapping[str, str]], dict[str, str]],
             service: str) -> Callable[[Group, Mapping[str, str]], dict[str, str]]:
    """The URLs of `build` on the secured cluster (`group.endpoints.secured`, or the endpoints themselves when they
    are a secured cluster's), with its CA, client certificate, user and password file: what security costs."""

    def secured(group: Group, params: Mapping[str, str]) -> dict[str, str]:
        found = _secured_endpoints(group, service)
        return build(replace(group, endpoints=found), {**found.params(service), **params})

    return secured


def _secured_endpoints(group: Group, service: str) -> Endpoints:
    """The secured cluster's endpoints (`group.endpoints.secured`, or the endpoints themselves when they are a
    secured cluster's); ValueError naming `service` when there is none."""
    endpoints = group.endpoints
    found = endpoints.secured if endpoints is not None and endpoints.secured is not None else endpoints
    if found is None or not found.security:
        raise ValueError(f"this method needs a secured {service} (LocalCluster(secure=True), elect cluster up "
                         "--secure)")
    return found


def _secured_kubernetes(group: Group, params: Mapping[str, str]) -> dict[str, str]:
    """kubernetes:// on the secured cluster's kube-apiserver, whose etcd speaks TLS with client certificates and
    users: the member's own URL is as on the plain cluster (HTTPS, a token and RBAC always), so what this costs is
    the secured store behind the API server."""
    return _kubernetes(replace(group, endpoints=_secured_endpoints(group, "kubernetes")), params)


def _secs(value: float) -> str:
    return f"{value:g}"


_raft = _peer_urls("raft", "grpc", named=True, stateful=True)

KUBERNETES_STRUCK = ("kubernetes", "etcd")
"""An infrastructure fault on Kubernetes strikes kube-apiserver, then the etcd it stores its objects in, in turn:
with one etcd member the second is an outage of the whole API, which the members must survive too."""

#: raft's hand-back to a returning primary: 3 ET of its health (`rebalance_hysteresis`), and a round to carry it out
RAFT_HAND_BACK = 4.0

METHODS: dict[str, Method] = {m.name: m for m in [
    Method("raft", "raft", "Raft per partition, balanced priorities, with the improvements over ZEP006", (),
           lambda b: {"election_timeout": _secs(b), "heartbeat_interval": _secs(b / 10),
                     "priority": "balanced"}, _raft, planned=RAFT_HAND_BACK),
    Method("raft-loud", "raft", "as raft, but every partition heartbeats on its own (quiesce=off): plain multi-Raft",
           (), lambda b: {"election_timeout": _secs(b), "heartbeat_interval": _secs(b / 10),
                          "priority": "balanced", "quiesce": "off"}, _raft, planned=RAFT_HAND_BACK),
    Method("raft-zeebe", "raft", "Raft per partition, plain ZEP006 (zeebe priorities, no improvements)", (),
           lambda b: {"election_timeout": _secs(b), "heartbeat_interval": _secs(b / 10),
                     "priority": "zeebe", "improvements": "off"}, _raft, hands_back=False),
    Method("raft-stock", "raft", "stock Raft, randomized timeouts in [ET, 2 ET)", (),
           lambda b: {"election_timeout": _secs(b), "heartbeat_interval": _secs(b / 10),
                     "priority": "off"}, _raft, hands_back=False),
    Method("pysyncobj", "pysyncobj", "PySyncObj, one SyncObj per partition (an independent Raft, no leader lease)",
           (), lambda b: {"election_timeout": _secs(b)},
           _peer_urls("pysyncobj", None, port_per_partition=True, stateful=True), hands_back=False),
    Method("kafka-fast", "kafka", "NELI fast (exclusive): partition owner leads", ("kafka",),
           lambda b: {"mode": "fast", "session_timeout": _secs(b)}, _kafka),
    Method("kafka-full", "kafka", "NELI full (non-exclusive): vector of receipt times", ("kafka",),
           lambda b: {"mode": "full", "session_timeout": _secs(b)}, _kafka),
    Method("kafka-fast-848", "kafka", "NELI fast on the KIP-848 consumer group protocol (the broker assigns)",
           ("kafka",), lambda b: {"mode": "fast", "session_timeout": _secs(b), "protocol": "consumer"}, _kafka),
    Method("kafka-full-848", "kafka", "NELI full on the KIP-848 consumer group protocol (the broker assigns)",
           ("kafka",), lambda b: {"mode": "full", "session_timeout": _secs(b), "protocol": "consumer"}, _kafka),
    Method("etcd", "etcd", "CAS lease on etcd", ("etcd",), lambda b: {"ttl": _secs(b)}, _etcd),
    Method("zookeeper", "zookeeper", "CAS lease on ZooKeeper", ("zookeeper",),
           lambda b: {"session_timeout": _secs(b)}, _zookeeper),
    Method("kubernetes", "kubernetes", "CAS lease on Kubernetes Lease objects (kube-apiserver on etcd)",
           ("kubernetes",), lambda b: {"ttl": _secs(b)}, _kubernetes, struck=KUBERNETES_STRUCK),
    # The same methods secured (a second, secured cluster): what TLS, client certificates and passwords cost.
    Method("etcd-tls", "etcd", "CAS lease on etcd over HTTPS, client certificate and user/password", ("etcd",),
           lambda b: {"ttl": _secs(b)}, _secured(_etcd, "etcd"), secure=True),
    Method("zookeeper-tls", "zookeeper", "CAS lease on ZooKeeper's TLS port, client certificate, digest ACLs",
           ("zookeeper",), lambda b: {"session_timeout": _secs(b)}, _secured(_zookeeper, "zookeeper"), secure=True),
    Method("kafka-fast-sasl", "kafka", "NELI fast over SASL_SSL (SCRAM-SHA-256)", ("kafka",),
           lambda b: {"mode": "fast", "session_timeout": _secs(b)}, _secured(_kafka, "kafka"), secure=True),
    Method("kubernetes-secure", "kubernetes", "CAS lease on Kubernetes Leases, the API server's etcd secured (TLS, "
           "client certificates, users)", ("kubernetes",), lambda b: {"ttl": _secs(b)}, _secured_kubernetes,
           secure=True, struck=KUBERNETES_STRUCK),
    # The anchors: the well-known implementations' own code (bench/anchors), at the same detection budget.
    Method("kazoo", "kazoo", "anchor: kazoo's Election recipe on ZooKeeper (session timeout = D)", ("zookeeper",),
           lambda b: {"session_timeout": _secs(b)}, _kazoo, hands_back=False),
    Method("etcd-election", "etcd-election", "anchor: etcd's Go concurrency.Election (session TTL = D, whole s)",
           ("etcd",), lambda b: {"ttl": str(max(1, round(b)))}, _etcd_election, hands_back=False),
    Method("goneli", "goneli", "anchor: goNELI, matched to D (session timeout = D)", ("kafka",),
           lambda b: {"budget": _secs(b)}, _goneli),
    Method("goneli-defaults", "goneli", "anchor: goNELI with its own defaults", ("kafka",),
           lambda b: {"defaults": "1"}, _goneli),
    Method("client-go", "client-go", "anchor: client-go's leaderelection with a LeaseLock (LeaseDuration = D, "
           "whole s; RenewDeadline 2/3, RetryPeriod 2/15 of it)", ("kubernetes",), _client_go_timing, _client_go,
           struck=KUBERNETES_STRUCK, hands_back=False),
    Method("k8s-python", "k8s-python", "anchor: the Kubernetes Python client's leaderelection with its LeaseLock "
           "(its smallest whole seconds: 3 s / 2 s / 1 s at D = 1 s)", ("kubernetes",), _k8s_python_timing,
           _k8s_python, struck=KUBERNETES_STRUCK, hands_back=False),
    Method("jraft", "jraft", "anchor: sofa-jraft, a group per partition, our balanced priorities (ET = D)", (),
           lambda b: {"election_timeout_ms": str(round(b * 1000))}, _jraft, hands_back=False),
    Method("ratis", "ratis", "anchor: Apache Ratis, a group per partition on one server, our balanced priorities "
           "(election timeout in [D, 2D])", (), lambda b: {"election_timeout_ms": str(round(b * 1000))}, _ratis),
]}
