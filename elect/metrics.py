"""Prometheus metrics of one elector (`Elector.metrics()`), and reading them back (`elect watch --metrics`).

Why a registry per elector: several electors in one process (a service leading roles of two groups, a test's
members) would clash on the default registry, whose names are global. Why one module: `BaseElector` reports
every transition here from the one place they all pass through, so every method counts them alike; a driver
adds only what its method alone can time (renewals). `prometheus_client` is the `metrics` extra, imported when
an elector's metrics are first made, so `import elect` never needs it.

Every series carries the label `member`:

- `elect_leader{role}`: 1 while this member leads the role, else 0, for every role it contends for.
- `elect_transitions_total{role, kind}`: leadership transitions, kind `acquired`, `revoked` or `fenced`.
- `elect_fence_lag_seconds`: from the end of a leadership by the member's own rule (a fence's `until`) to the
  fence itself: about 0 for a fence on time; a frozen process shows how long it ran past its deadline.
- `elect_failover_seconds`: from this member seeing a role left without a leader (after it had seen one) to its
  own acquisition of the role; only where the method observes leaders (`characteristics.observes_leaders`).
- `elect_renewal_seconds`: what one renewal of a leadership took, only where the method renews; the help text
  says what it times for the method (`BaseElector.renewal`).
- `elect_step_seconds{step}`: what each step of a handover took, where the method times them (`BaseElector.steps`
  names them and says what each spans): where a failover or a graceful handover spends its time.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from elect.errors import ConfigError, InfrastructureUnavailable, MissingExtra
from elect.observe import Claim
from elect.roles import Role

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

LEADER_GAUGE = "elect_leader"
TRANSITIONS = "elect_transitions"  # exposed as elect_transitions_total
FENCE_LAG = "elect_fence_lag_seconds"
FAILOVER = "elect_failover_seconds"
RENEWAL = "elect_renewal_seconds"
STEP = "elect_step_seconds"

_SHORT = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_LONG = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The metrics of one member, in `registry`; `BaseElector` feeds them (see the module docstring).

    failover: record `elect_failover_seconds` (the method sees when a role has no leader). renewal: the help text
    of `elect_renewal_seconds` for this method, None where it does not renew (then the histogram is absent)."""

    def __init__(self, member: str, *, failover: bool, renewal: str | None) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError:
            raise MissingExtra("elector metrics need prometheus_client, which is not installed: "
                               "pip install 'elect[metrics]'") from None
        self.member = member
        self.registry: CollectorRegistry = CollectorRegistry()
        r = self.registry
        self._leader = Gauge(LEADER_GAUGE, "1 while this member leads the role, else 0", ["member", "role"], registry=r)
        self._transitions = Counter(TRANSITIONS, "leadership transitions of this member by kind "
                                    "(acquired, revoked, fenced)", ["member", "role", "kind"], registry=r)
        self._fence_lag = Histogram(FENCE_LAG, "seconds from the end of a leadership by the member's own deadline "
                                    "to its fence (how long a frozen member ran past it)", ["member"],
                                    buckets=_SHORT, registry=r)
        self._failover = Histogram(FAILOVER, "seconds from this member seeing a role without a leader to its own "
                                   "acquisition of it", ["member"], buckets=_LONG, registry=r) if failover else None
        self._renewal = Histogram(RENEWAL, renewal, ["member"], buckets=_SHORT, registry=r) if renewal else None
        self._step = Histogram(STEP, "seconds each step of a handover took, as this member saw it (the method's "
                               "steps: BaseElector.steps)", ["member", "step"], buckets=_SHORT, registry=r)
        for histogram in (self._fence_lag, self._failover, self._renewal):
            if histogram is not None:
                histogram.labels(member)  # exported at 0 from the start, so a scrape tells "none yet" from "absent"
        self._server: WSGIServer | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ fed by BaseElector (under its lock)
    def contend(self, roles: Iterable[Role]) -> None:
        for role in roles:
            self._leader.labels(self.member, str(role))  # a new series starts at 0

    def drop(self, roles: Iterable[Role]) -> None:
        """Roles no longer contended for: their series go (a removed role is not one led by nobody)."""
        for role in roles:
            with contextlib.suppress(KeyError):  # never contended under that name
                self._leader.remove(self.member, str(role))

    def acquired(self, role: Role, failover: float | None) -> None:
        self._leader.labels(self.member, str(role)).set(1)
        self._transitions.labels(self.member, str(role), "acquired").inc()
        if failover is not None and self._failover is not None:
            self._failover.labels(self.member).observe(failover)

    def revoked(self, role: Role) -> None:
        self._leader.labels(self.member, str(role)).set(0)
        self._transitions.labels(self.member, str(role), "revoked").inc()

    def fenced(self, role: Role, lag: float) -> None:
        self._leader.labels(self.member, str(role)).set(0)
        self._transitions.labels(self.member, str(role), "fenced").inc()
        self._fence_lag.labels(self.member).observe(max(0.0, lag))

    def renewed(self, seconds: float) -> None:
        if self._renewal is not None:
            self._renewal.labels(self.member).observe(max(0.0, seconds))

    def step(self, step: str, seconds: float) -> None:
        self._step.labels(self.member, step).observe(max(0.0, seconds))

    # ------------------------------------------------------------------ exposition
    def serve(self, port: int = 0, host: str = "127.0.0.1") -> int:
        """Serve the registry over HTTP (`/metrics`) on a daemon thread; returns the port (0: the OS chooses)."""
        from prometheus_client import start_http_server

        with self._lock:
            if self._server is not None:
                raise ConfigError("these metrics are served already", parameter="port")
            try:
                self._server, _ = start_http_server(port, host, registry=self.registry)
            except OSError as exc:
                raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}",
                                  parameter="port") from None
            return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving (what is recorded stays readable in `registry`)."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


Sample = tuple[str, dict[str, str], float]
"""One scraped sample: name, labels, value."""


def endpoint_url(endpoint: str) -> str:
    """`HOST:PORT` (or a URL) as the URL of its metrics page."""
    if "://" in endpoint:
        return endpoint
    if not endpoint.rpartition(":")[2].isdigit():
        raise ConfigError(f"expected HOST:PORT, got {endpoint!r}", parameter="--metrics")
    return f"http://{endpoint}/metrics"


def scrape(endpoint: str, timeout: float) -> list[Sample]:
    """The samples a member's metrics endpoint serves now; InfrastructureUnavailable if it cannot be read."""
    from prometheus_client.parser import text_string_to_metric_families

    url = endpoint_url(endpoint)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            text = response.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        raise InfrastructureUnavailable(f"metrics at {url}: {getattr(exc, 'reason', exc)}") from None
    try:
        return [(s.name, dict(s.labels), float(s.value))
                for family in text_string_to_metric_families(text) for s in family.samples]
    except ValueError as exc:
        raise InfrastructureUnavailable(f"metrics at {url} are not Prometheus text: {exc}") from None


class MetricsObserver:
    """An `elect.observe.Observer` over members' metrics endpoints: a member leads a role where its
    `elect_leader` gauge is 1. Works for every method, since every member exports its own gauges; an endpoint
    that cannot be read is left out and named in `note` (all unreadable: InfrastructureUnavailable)."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        if not endpoints:
            raise ConfigError("give at least one HOST:PORT", parameter="--metrics")
        self.endpoints = [endpoint_url(e) for e in endpoints]
        self.roles: set[str] = set()  # every role some member contends for, led or not
        self.note = ""
        self.where = "the members' metrics endpoints"

    def claims(self, timeout: float) -> list[Claim]:
        out: list[Claim] = []
        failed: list[str] = []
        for endpoint in self.endpoints:
            try:
                samples = scrape(endpoint, timeout)
            except InfrastructureUnavailable as exc:
                failed.append(str(exc))
                continue
            for name, labels, value in samples:
                if name == LEADER_GAUGE and "role" in labels:
                    self.roles.add(labels["role"])
                    if value >= 1:
                        out.append(Claim(labels["role"], labels.get("member", endpoint)))
        if failed and len(failed) == len(self.endpoints):
            raise InfrastructureUnavailable("; ".join(failed))
        self.note = "; ".join(failed)
        return out

    def close(self) -> None:
        return None
