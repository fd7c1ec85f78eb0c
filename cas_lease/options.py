"""Options of `etcd://`, `zookeeper://` and `kubernetes://`, with the timing rules checked when they are built.

Durations left unset follow the TTL (etcd `ttl`, ZooKeeper `session_timeout`): renew every quarter of
it, stop after three quarters without a successful renewal, so a leader has stopped a quarter TTL
before anyone may take over. `Timing` turns them into the core's clocks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from cas_lease.core import Timing, check_timing
from elect.options import port_number, rule
from elect.secrets import AccessOptions
from elect.shares import check_capacity


@dataclass(frozen=True)
class _LeaseOptions(AccessOptions):
    """What both stores share (TLS and credentials: `elect.secrets.AccessOptions`).

    renew_interval: renewal period (default TTL/4). renew_deadline: a leader stops when its last
    successful renewal was sent this long ago (default 3/4 TTL; must lie between renew_interval and
    the TTL). fair: share roles evenly (ceil(roles / live members) each). fair_delay: how long a member
    at its share leaves a free role to one below it, and how long an imbalance lasts before roles are
    shed (default renew_interval). resign_backoff: how long a resigned role is left to others, and how
    soon a shed role may be shed again (default TTL). rebalance_limit, rebalance_window: a member sheds at most
    rebalance_limit roles in any rebalance_window seconds (default: no limit; window 10 TTL), so a member
    that returns gets its share back a few roles at a time. weight: this member's capacity relative to the
    others' (> 0): its fair share is ceil(roles x weight / total live weight). max_roles: a soft cap: beyond it
    the member leaves free roles to, and sheds roles to, members below their share, but leads what nobody else
    can take (both published in the member's record, see cas_lease/core.py). request_timeout: one request's
    budget (default renew_deadline - renew_interval). connect_timeout: how long start() tries to reach the store
    before InfrastructureUnavailable. revoke_timeout: longest wait for blocking Revoked callbacks.
    """

    renew_interval: float | None = None
    renew_deadline: float | None = None
    fair: bool = True
    fair_delay: float | None = None
    resign_backoff: float | None = None
    rebalance_limit: int | None = None
    rebalance_window: float | None = None
    weight: float = 1.0
    max_roles: int | None = None
    request_timeout: float | None = None
    connect_timeout: float = 5.0
    revoke_timeout: float = 30.0

    def _ttl(self) -> tuple[str, float]:
        raise NotImplementedError

    @property
    def ttl_seconds(self) -> float:
        return self._ttl()[1]

    @property
    def interval(self) -> float:
        return self.renew_interval if self.renew_interval is not None else self.ttl_seconds / 4

    @property
    def deadline(self) -> float:
        return self.renew_deadline if self.renew_deadline is not None else self.ttl_seconds * 3 / 4

    @property
    def max_drift(self) -> float:
        """The clock-rate difference these timings tolerate (`Characteristics.max_drift`): a leader stops
        renew_deadline after its last renewal began, on its own clock; a contender takes over after ttl of silence
        from the renewal it saw, on its own (ZooKeeper's server, likewise, after the session timeout on its own).
        The leader stops first while no clock runs ttl / renew_deadline times as fast as another (client-go's
        rule; 4/3 at the defaults)."""
        return self.ttl_seconds / self.deadline - 1

    @property
    def timeout(self) -> float:
        return self.request_timeout if self.request_timeout is not None else self.deadline - self.interval

    def timing(self, *, silence_takeover: bool, keepalive_interval: float | None = None) -> Timing:
        name, ttl = self._ttl()
        return Timing(ttl=ttl, renew_interval=self.interval, renew_deadline=self.deadline, fair=self.fair,
                      fair_delay=self.fair_delay if self.fair_delay is not None else self.interval,
                      resign_backoff=self.resign_backoff if self.resign_backoff is not None else ttl,
                      retry_interval=max(0.01, self.interval / 5), silence_takeover=silence_takeover,
                      keepalive_interval=keepalive_interval, ttl_name=name, rebalance_limit=self.rebalance_limit,
                      rebalance_window=self.rebalance_window if self.rebalance_window is not None else 10 * ttl)

    def _check(self) -> None:
        name, ttl = self._ttl()
        check_timing(ttl, self.interval, self.deadline, name)
        rule(self.timeout > 0, "request_timeout", "must be > 0")
        rule(self.connect_timeout > 0, "connect_timeout", "must be > 0")
        rule(self.revoke_timeout > 0, "revoke_timeout", "must be > 0")
        for field in ("fair_delay", "resign_backoff"):
            value = getattr(self, field)
            rule(value is None or value >= 0, field, "must be >= 0")
        rule(self.rebalance_limit is None or self.rebalance_limit >= 1, "rebalance_limit", "must be >= 1")
        rule(self.rebalance_window is None or self.rebalance_window > 0, "rebalance_window", "must be > 0")
        self._check_access()
        check_capacity(self.weight, self.max_roles)
        rule(self.fair or self.weight == 1, "weight", "shapes fair sharing, so it needs fair=true")
        rule(self.fair or self.max_roles is None, "max_roles", "is enforced by fair sharing, so it needs fair=true")


def _hosts(hosts: tuple[str, ...], parameter: str) -> None:
    rule(bool(hosts), parameter, "name at least one HOST:PORT")
    for host in hosts:
        name, _, port = host.rpartition(":")
        rule(bool(name) and port_number(port) is not None, parameter,
             f"expected HOST:PORT, got {host!r}")


@dataclass(frozen=True)
class EtcdOptions(_LeaseOptions):
    """`etcd://HOST:PORT[,HOST:PORT]/PREFIX?ttl=1.0&...` (the gRPC gateway's /v3/ JSON API).

    endpoints: the cluster's client addresses (requests fail over between them). prefix: keys live
    under /PREFIX/. ttl: silence after which a holder's key may be taken over. lease_ttl: whole
    seconds of etcd's own lease, the backstop that removes a dead member's keys (default
    max(2, ceil(2 ttl))); renewed every third of it.
    """

    endpoints: tuple[str, ...] = ()
    prefix: str = "elect"
    ttl: float = 1.0
    lease_ttl: int | None = None

    def __post_init__(self) -> None:
        _hosts(self.endpoints, "endpoints")
        rule(bool(self.prefix.strip("/")), "prefix", "cannot be empty")
        self._check()
        rule(self.lease_ttl is None or self.lease_ttl >= 1, "lease_ttl", "must be >= 1 (whole seconds)")

    def _ttl(self) -> tuple[str, float]:
        return "ttl", self.ttl

    @property
    def lease_seconds(self) -> int:
        return self.lease_ttl if self.lease_ttl is not None else max(2, math.ceil(2 * self.ttl))

    @property
    def key_prefix(self) -> str:
        return "/" + self.prefix.strip("/") + "/"


@dataclass(frozen=True)
class ZooKeeperOptions(_LeaseOptions):
    """`zookeeper://HOST:PORT[,HOST:PORT]/PATH?session_timeout=1.0&...`.

    hosts: the ensemble's client addresses. path: the group's node. session_timeout: silence after which a
    holder's roles may be taken over (as etcd's ttl); the ZooKeeper session is asked for twice as long and only
    clears a dead member's directory entry (the server may raise it to at least 2 ticks; start() refuses a
    session whose negotiated timeout is not longer than renew_deadline).
    """

    hosts: tuple[str, ...] = ()
    path: str = "elect"
    session_timeout: float = 1.0

    def __post_init__(self) -> None:
        _hosts(self.hosts, "hosts")
        rule(bool(self.path.strip("/")), "path", "cannot be empty")
        self._check()

    def _ttl(self) -> tuple[str, float]:
        return "session_timeout", self.session_timeout

    @property
    def root(self) -> str:
        return "/" + self.path.strip("/")


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


ROLES_PER_LEASE_SECOND = 25
"""Roles per second of default `leaseDurationSeconds` (`KubernetesOptions.lease_seconds_for`)."""


@dataclass(frozen=True)
class KubernetesOptions(_LeaseOptions):
    """`kubernetes://HOST:PORT/NAMESPACE?ttl=1.0&...`, or `kubernetes:///NAMESPACE` in a pod.

    server: the API server's HOST:PORT (HTTPS); without it, the kubeconfig's (`kubeconfig=PATH`, else
    $KUBECONFIG or ~/.kube/config) or, in a pod, the one the service account reaches (KUBERNETES_SERVICE_HOST).
    namespace: where the Leases live. prefix: their names' prefix (a DNS label). ttl: silence after which a holder's
    roles may be taken over, timed on the contenders' own clocks (sub-second is fine). lease_duration: the whole
    seconds written as the role Leases' `leaseDurationSeconds`, which client-go and kubectl read (default
    max(1, ceil(2 ttl), ceil(roles / 25)), roles: how many the member contends for at start); a holder rewrites its
    role Leases at least every half of it, so a client-go candidate never finds one stale while its holder lives
    (one write per role per half duration: the default keeps that at most 50 a second for a member holding every
    role; a client-go candidate waits that long after a holder dies, elect's members only the TTL).
    kubeconfig, context: a kubeconfig file and the context in it
    (default its current context). ca, cert, key: PEM files (the API server's CA; a client certificate);
    token_file: a file holding a bearer token (read again when the server refuses it, as service-account tokens
    rotate). Credentials never go in the URL.
    """

    unused: ClassVar[frozenset[str]] = frozenset({"user", "password_file", "password_env", "tls"})
    """Inherited, refused or meaningless here: no password login on the Kubernetes API, and HTTPS always."""

    server: str | None = None
    namespace: str = "default"
    prefix: str = "elect"
    ttl: float = 1.0
    lease_duration: int | None = None
    kubeconfig: str | None = None
    context: str | None = None
    token_file: str | None = None

    def __post_init__(self) -> None:
        if self.server is not None:
            _hosts((self.server,), "server")
        rule(bool(_DNS_LABEL.fullmatch(self.namespace)) and len(self.namespace) <= 63, "namespace",
             f"{self.namespace!r} is not a namespace name (a DNS label: lowercase letters, digits and '-')")
        rule(bool(_DNS_LABEL.fullmatch(self.prefix)) and len(self.prefix) <= 40, "prefix",
             f"{self.prefix!r} must be a DNS label of at most 40 characters (lowercase letters, digits and '-'): "
             "it starts every Lease's name")
        self._check()
        rule(self.user is None, "user", "the Kubernetes API has no password login: give token_file= or cert= and key= "
                                        "(or a kubeconfig)")
        rule(self.tls is not False, "tls", "the Kubernetes API is served over HTTPS only")
        rule(self.lease_duration is None or self.lease_duration >= 1, "lease_duration",
             "must be >= 1 (whole seconds)")
        rule(self.lease_seconds / 2 + self.deadline < self.lease_seconds, "lease_duration",
             f"{self.lease_seconds} s is too short for renew_deadline={self.deadline:g}: a holder rewrites its "
             "role Leases every half of it and must have stopped before a client-go reader finds one stale")
        for name in ("kubeconfig", "token_file"):
            path = getattr(self, name)
            rule(path is None or Path(path).is_file(), name, f"no such file: {path}")
        rule(self.context is None or bool(self.context.strip()), "context", "cannot be empty")

    def _ttl(self) -> tuple[str, float]:
        return "ttl", self.ttl

    @property
    def lease_seconds(self) -> int:
        """`leaseDurationSeconds` as set, else its least default: twice the TTL, whole seconds."""
        return self.lease_duration if self.lease_duration is not None else max(1, math.ceil(2 * self.ttl))

    def lease_seconds_for(self, roles: int) -> int:
        """`leaseDurationSeconds` for a member contending for `roles` roles: as set, else twice the TTL and at least
        one second per `ROLES_PER_LEASE_SECOND` roles. A holder rewrites each role Lease it holds every half of it
        for client-go readers, so a member holding every role rewrites at most 2 x that many a second at rest: a
        duration that did not follow the roles had 600 roles cost 800 writes a second and leaderships (and 6,000
        never all led), while elect's own members time holders by their member Leases, whatever this is."""
        if self.lease_duration is not None:
            return self.lease_duration
        return max(self.lease_seconds, math.ceil(roles / ROLES_PER_LEASE_SECOND))
