"""etcd: one member, or a real multi-member cluster with distinct client and peer ports.

Election timeout 500 ms / heartbeat 50 ms by default: etcd grants at least ceil(1.5 x election timeout)
as a lease TTL, so only with these settings is a 1 s TTL granted as asked (docs/architecture.md). Health is
checked over HTTP with the standard library: ``/health`` on every member and, for a cluster, the
gRPC gateway's ``/v3/maintenance/status`` to see that all members agree on one leader.

Secured (``security``): clients and peers speak TLS (``--client-cert-auth``: a client must show a certificate of
the cluster's CA; peers likewise), and once the members serve, ``configure`` turns authentication on: a root user
(the administrator's password), the user ``elect`` with read-write on every key, and the user ``kube-apiserver``
(read-write on every key; it shows a certificate of that common name) for an API server on these members.
Probes then speak HTTPS with the client certificate (``/health`` and the status need no user).
"""

from __future__ import annotations

import json
import secrets
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from elect.etcd_gateway import Access, Gateway, GatewayError, Refused, Unreachable, b64

from .errors import ClusterError, NotReady
from .ports import free_ports
from .process import ProcessSpec
from .security import KUBE_APISERVER, Security, context_of
from .service import Member, find_program

_FIX = "apt-get install etcd-server (Debian/Ubuntu), or run ./setup"
ELECTION_TIMEOUT_MS = 500
HEARTBEAT_INTERVAL_MS = 50


def find_etcd() -> str:
    """Path of the etcd server: ``$ELECT_ETCD_BIN``, else PATH, else /usr/bin/etcd."""
    return find_program("etcd", "ELECT_ETCD_BIN", _FIX, "/usr/bin/etcd", "/usr/local/bin/etcd")


def _http_json(url: str, timeout: float, body: bytes | None = None,
               context: ssl.SSLContext | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            code, raw = int(response.status), response.read()
    except urllib.error.HTTPError as exc:  # /health answers 503 with a JSON body when unhealthy
        code, raw = exc.code, exc.read()
    except (OSError, ValueError) as exc:
        raise NotReady(f"{url}: {exc}") from exc
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise NotReady(f"{url}: not JSON: {raw[:200]!r}") from exc
    if not isinstance(data, dict):
        raise NotReady(f"{url}: unexpected answer {data!r}")
    return code, data


def _scheme(context: ssl.SSLContext | None) -> str:
    return "https" if context is not None else "http"


def health(address: str, timeout: float = 2.0, context: ssl.SSLContext | None = None) -> None:
    """Raise NotReady unless ``GET /health`` on this member says it is healthy."""
    code, data = _http_json(f"{_scheme(context)}://{address}/health", timeout, context=context)
    if code != 200 or str(data.get("health")) != "true":
        raise NotReady(f"etcd {address} /health: HTTP {code} {data}")


def status(address: str, timeout: float = 2.0, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """The member's ``/v3/maintenance/status``: its own id (header.member_id), leader id, raft term."""
    code, data = _http_json(f"{_scheme(context)}://{address}/v3/maintenance/status", timeout, b"{}", context)
    if code != 200 or "header" not in data:
        raise NotReady(f"etcd {address} status: HTTP {code} {data}")
    return data


def _member_id(data: dict[str, Any]) -> str:
    header = data.get("header")
    return str(header.get("member_id", "")) if isinstance(header, dict) else ""


class EtcdService:
    """etcd members started from the Debian ``etcd-server`` binary with zap logs on stderr."""

    name = "etcd"
    max_members = 7

    def __init__(self, election_timeout_ms: int = ELECTION_TIMEOUT_MS,
                 heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS, security: Security | None = None) -> None:
        self.election_timeout_ms = election_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.security = security

    def preflight(self) -> None:
        find_etcd()

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        binary = find_etcd()
        ports = free_ports(2 * count, host)
        clients, peers = ports[:count], ports[count:]
        names = [f"etcd-{i}" for i in range(count)]
        sec = self.security
        scheme = "https" if sec is not None else "http"
        tls: tuple[str, ...] = () if sec is None else (
            "--cert-file", str(sec.server_cert), "--key-file", str(sec.server_key),
            "--trusted-ca-file", str(sec.ca), "--client-cert-auth",
            "--peer-cert-file", str(sec.server_cert), "--peer-key-file", str(sec.server_key),
            "--peer-trusted-ca-file", str(sec.ca), "--peer-client-cert-auth")
        initial = ",".join(f"{n}={scheme}://{host}:{p}" for n, p in zip(names, peers, strict=True))
        token = f"elect-{secrets.token_hex(4)}"  # a fresh token keeps members of an old run out
        members = []
        for i, name in enumerate(names):
            data = root / name
            data.mkdir(parents=True, exist_ok=True)
            client, peer = f"{scheme}://{host}:{clients[i]}", f"{scheme}://{host}:{peers[i]}"
            argv = (binary, "--name", name, "--data-dir", str(data / "data"),
                    "--listen-client-urls", client, "--advertise-client-urls", client,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", initial, "--initial-cluster-token", token,
                    "--initial-cluster-state", "new",
                    "--election-timeout", str(self.election_timeout_ms),
                    "--heartbeat-interval", str(self.heartbeat_interval_ms),
                    "--logger", "zap", "--log-outputs", "stderr", *tls)
            spec = ProcessSpec(argv=argv, cwd=str(data), log=str(root / f"{name}.log"), drop_env=("ETCD",))
            extra = {"security": str(sec.root)} if sec is not None else {}
            members.append(Member("etcd", i, host, {"client": clients[i], "peer": peers[i]}, spec, extra=extra))
        return members

    def configure(self, members: list[Member], timeout: float) -> None:
        """Secured: create the root user and the user `elect` (read-write on every key), then enable auth."""
        sec = self.security
        if sec is None or not members:
            return
        gateway = Gateway(tuple(m.address for m in members), Access(sec.client_context()))
        steps: list[tuple[str, dict[str, Any]]] = [
            ("auth/user/add", {"name": "root", "password": sec.admin_password()}),
            ("auth/user/grant", {"user": "root", "role": "root"}),
            ("auth/role/add", {"name": sec.user}),
            ("auth/role/grant", {"name": sec.user, "perm": {"permType": "READWRITE", "key": b64("\0"),
                                                             "range_end": b64("\0")}}),
            ("auth/user/add", {"name": sec.user, "password": sec.password()}),
            ("auth/user/grant", {"user": sec.user, "role": sec.user}),
            # kube-apiserver, if the cluster runs one, authenticates by its certificate (the password is never
            # used); read-write on every key: its objects under its prefix, and `compact_rev_key`, which its
            # periodic compaction writes
            ("auth/role/add", {"name": KUBE_APISERVER}),
            ("auth/role/grant", {"name": KUBE_APISERVER, "perm": {"permType": "READWRITE", "key": b64("\0"),
                                                                   "range_end": b64("\0")}}),
            ("auth/user/add", {"name": KUBE_APISERVER, "password": secrets.token_urlsafe(18)}),
            ("auth/user/grant", {"user": KUBE_APISERVER, "role": KUBE_APISERVER}),
            ("auth/enable", {}),
        ]
        try:
            for path, body in steps:
                gateway.call(path, body, timeout)
        except (GatewayError, Unreachable, Refused) as exc:
            raise ClusterError(f"enabling authentication on etcd failed at {path}: {exc}") from exc
        finally:
            gateway.close()

    def probe(self, member: Member, timeout: float) -> str:
        context = context_of(member.extra)
        health(member.address, timeout, context)
        data = status(member.address, timeout, context)
        return "leader" if _member_id(data) == str(data.get("leader")) else "follower"

    def probe_group(self, members: list[Member], timeout: float) -> None:
        leaders = {str(status(m.address, timeout, context_of(m.extra)).get("leader", "0")) for m in members}
        if len(leaders) != 1 or leaders <= {"0", ""}:
            raise NotReady(f"etcd members do not agree on one leader: {sorted(leaders)}")

    def leader(self, members: list[Member], timeout: float) -> int | None:
        ids: dict[str, int] = {}
        votes: dict[str, int] = {}
        for m in members:
            try:
                data = status(m.address, timeout, context_of(m.extra))
            except NotReady:
                continue
            ids[_member_id(data)] = m.index
            leader = str(data.get("leader", "0"))
            votes[leader] = votes.get(leader, 0) + 1
        for leader_id, _ in sorted(votes.items(), key=lambda kv: -kv[1]):
            if leader_id in ids:
                return ids[leader_id]
        return None
