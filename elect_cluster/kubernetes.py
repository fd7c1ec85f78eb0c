"""kube-apiserver: Kubernetes' own API server (built from k8s.io/kubernetes by cluster/kubernetes/build), on the
cluster's etcd under a key prefix of its own.

What a real cluster's API server has that the elector meets: HTTPS only (a serving certificate from the cluster's
CA), authentication (static bearer tokens: an administrator in `system:masters`, and a member user), RBAC (the
member user may only get, list, watch, create, update and delete Leases in the `default` namespace, the Role
`configure` creates), service-account keys, admission and API priority and fairness at their defaults. Two
kubeconfig files, `admin.kubeconfig` and `member.kubeconfig`, say how to reach it (and `nobody.kubeconfig`: a user
with no Role, whom RBAC refuses); the endpoints' URL uses the member's. No kubelet, scheduler or controller
manager: Leases need none. In a secured cluster (`--secure`) it reaches etcd over TLS with a client certificate
whose common name is its etcd user (elect_cluster.security, elect_cluster.etcd).
"""

from __future__ import annotations

import json
import secrets
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from .errors import ClusterError, NotReady
from .ports import free_ports
from .process import ProcessSpec
from .security import Security
from .service import Member, find_program

_FIX = "run ./setup (it builds kube-apiserver from the Go module proxy: cluster/kubernetes/build)"
ADMIN_USER = "elect-admin"
MEMBER_USER = "elect-member"
NOBODY_USER = "elect-nobody"  # authenticated, no Role: what an RBAC refusal looks like
NAMESPACE = "default"
#: what a member needs (cas_lease.kube_api's refusal names the same verbs)
LEASE_VERBS = ("get", "list", "watch", "create", "update", "delete")


def find_kube_apiserver() -> str:
    """Path of kube-apiserver: ``$ELECT_KUBE_APISERVER``, else PATH, else where cluster/kubernetes/build puts it."""
    cache = Path.home() / ".cache" / "elect" / "kubernetes" / "bin" / "kube-apiserver"
    return find_program("kube-apiserver", "ELECT_KUBE_APISERVER", _FIX, str(cache))


class KubernetesService:
    """One kube-apiserver on the etcd members named in `etcd` (set by LocalCluster before `plan`)."""

    name = "kubernetes"
    max_members = 1

    def __init__(self, security: Security | None = None) -> None:
        self.etcd: list[str] = []
        self.security = security  # a secured cluster: etcd speaks TLS, requires client certificates, has users

    def preflight(self) -> None:
        find_kube_apiserver()

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        if not self.etcd:
            raise ClusterError("kube-apiserver needs etcd: start the cluster with the etcd service too")
        binary = find_kube_apiserver()
        root.mkdir(parents=True, exist_ok=True)
        port = free_ports(1, host)[0]
        from .certs import make_authority  # cryptography (the tls extra): only where certificates are made

        ca = make_authority(root, name="elect-kubernetes-ca")
        serving = ca.issue("kube-apiserver", root, hosts=(host, "localhost", "127.0.0.1", "kubernetes.default.svc"))
        signing = ca.issue("service-accounts", root)  # only its key is used: service-account tokens' signature
        public = root / "service-accounts.pub"  # kube-apiserver reads the verifying key as a PEM public key
        public.write_bytes(signing.public_key_pem())
        users = {"admin": (ADMIN_USER, secrets.token_hex(16)), "member": (MEMBER_USER, secrets.token_hex(16)),
                 "nobody": (NOBODY_USER, secrets.token_hex(16))}
        tokens = root / "tokens.csv"
        tokens.touch(mode=0o600)
        groups = {"admin": ',"system:masters"'}  # tokens.csv: token,user,uid[,"group,..."]
        tokens.write_text("".join(f"{token},{user},{user}{groups.get(name, '')}\n"
                                  for name, (user, token) in users.items()))
        server = f"https://{host}:{port}"
        for name, (user, token) in users.items():
            token_file = root / f"{name}.token"
            token_file.touch(mode=0o600)
            token_file.write_text(token)  # no line end: the Python client sends the file as it is
            _kubeconfig(root / f"{name}.kubeconfig", server, ca.cert, user, token_file)
        sec = self.security
        etcd_tls = () if sec is None else ("--etcd-cafile", str(sec.ca), "--etcd-certfile", str(sec.kube_cert),
                                           "--etcd-keyfile", str(sec.kube_key))
        argv = (binary, "--etcd-servers", ",".join(f"{'https' if sec else 'http'}://{e}" for e in self.etcd),
                *etcd_tls,
                "--etcd-prefix", f"/kubernetes-{secrets.token_hex(4)}",
                "--bind-address", host, "--advertise-address", host, "--secure-port", str(port),
                "--tls-cert-file", str(serving.cert), "--tls-private-key-file", str(serving.key),
                "--client-ca-file", str(ca.cert), "--token-auth-file", str(tokens),
                "--authorization-mode", "RBAC", "--anonymous-auth=false",
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-account-key-file", str(public),
                "--service-account-signing-key-file", str(signing.key),
                "--service-cluster-ip-range", "10.96.0.0/16", "--profiling=false", "--v=1")
        spec = ProcessSpec(argv=argv, cwd=str(root), log=str(root / "kube-apiserver.log"))
        extra = {"admin_kubeconfig": str(root / "admin.kubeconfig"), "kubeconfig": str(root / "member.kubeconfig"),
                 "nobody_kubeconfig": str(root / "nobody.kubeconfig"), "ca": str(ca.cert),
                 "admin_token_file": str(root / "admin.token")}
        return [Member("kubernetes", 0, host, {"client": port}, spec, extra=extra)]

    def probe(self, member: Member, timeout: float) -> str:
        code, body = _request(member, "GET", "/readyz", None, timeout)
        if code != 200:
            raise NotReady(f"kube-apiserver {member.address} /readyz: HTTP {code} {body[:300]!r}")
        return "apiserver"

    def probe_group(self, members: list[Member], timeout: float) -> None:
        """One API server: nothing to agree on."""

    def leader(self, members: list[Member], timeout: float) -> int | None:
        return 0 if members else None

    def configure(self, members: list[Member], timeout: float) -> None:
        """The member user's Role on Leases in the default namespace, and its binding."""
        for member in members:
            base = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}"
            role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": "elect-member"},
                    "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                               "verbs": list(LEASE_VERBS)}]}
            binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": "elect-member"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "elect-member"},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MEMBER_USER}]}
            for path, body in ((f"{base}/roles", role), (f"{base}/rolebindings", binding)):
                code, answer = _request(member, "POST", path, body, timeout)
                if code not in (201, 409):
                    raise ClusterError(f"kube-apiserver refused {path}: HTTP {code} {answer[:300]!r}")


def _kubeconfig(path: Path, server: str, ca: Path, user: str, token_file: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "elect",
              "clusters": [{"name": "elect", "cluster": {"server": server, "certificate-authority": str(ca)}}],
              "users": [{"name": user, "user": {"tokenFile": str(token_file)}}],
              "contexts": [{"name": "elect", "context": {"cluster": "elect", "user": user}}]}
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _request(member: Member, method: str, path: str, body: dict[str, Any] | None,
             timeout: float) -> tuple[int, bytes]:
    """A request as the administrator (its token from the member's files)."""
    token = Path(member.extra["admin_token_file"]).read_text().strip()
    context = ssl.create_default_context(cafile=member.extra["ca"])
    request = urllib.request.Request(f"https://{member.address}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (OSError, ValueError) as exc:
        raise NotReady(f"kube-apiserver {member.address}{path}: {exc}") from exc
