"""The TLS material and credentials of a secured local cluster (`elect cluster up --secure`, the tests'
`secure_*` fixtures).

One CA; one server certificate (named `server`, valid for the host every service binds to, localhost and
127.0.0.1) that etcd, ZooKeeper and Kafka all present; one client certificate (named after the user, `elect`,
without a common name, which etcd's gateway would refuse) that clients show where a server requires one; and
kube-apiserver's client certificate to etcd, whose common name etcd takes as its user. Two
passwords, each in a file of its own (mode 0600): the user's, which clients read through `password_file=`, and
the administrator's, which only the cluster's own set-up uses (etcd's root user, Kafka's broker-to-broker
login). Test material: a real deployment brings its own.
"""

from __future__ import annotations

import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

USER = "elect"
ADMIN = "admin"
KUBE_APISERVER = "kube-apiserver"  # its client certificate's common name: the etcd user it is (elect_cluster.etcd)
SCRAM = "SCRAM-SHA-256"  # the mechanism the cluster's URLs name (PLAIN and SCRAM-SHA-512 are enabled as well)


@dataclass(frozen=True)
class Security:
    """Where a secured cluster's files are; `params()` is what a client's URL needs."""

    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.crt"

    @property
    def server_cert(self) -> Path:
        return self.root / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.root / "server.key"

    @property
    def client_cert(self) -> Path:
        return self.root / f"{USER}.crt"

    @property
    def client_key(self) -> Path:
        return self.root / f"{USER}.key"

    @property
    def kube_cert(self) -> Path:
        """kube-apiserver's client certificate to etcd (etcd takes the common name as the user over gRPC)."""
        return self.root / f"{KUBE_APISERVER}.crt"

    @property
    def kube_key(self) -> Path:
        return self.root / f"{KUBE_APISERVER}.key"

    @property
    def password_file(self) -> Path:
        return self.root / f"{USER}.password"

    @property
    def admin_password_file(self) -> Path:
        return self.root / f"{ADMIN}.password"

    @property
    def user(self) -> str:
        return USER

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def admin_password(self) -> str:
        return self.admin_password_file.read_text().strip()

    def params(self) -> dict[str, str]:
        """The URL parameters of a client of this cluster (TLS with a client certificate, the user, where its
        password is)."""
        return {"ca": str(self.ca), "cert": str(self.client_cert), "key": str(self.client_key), "user": USER,
                "password_file": str(self.password_file)}

    def client_context(self) -> ssl.SSLContext:
        """TLS as this cluster's own probes speak it: the CA, and the client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    @classmethod
    def make(cls, root: Path, host: str) -> Security:
        """New certificates and passwords in `root` (what was there is replaced)."""
        from elect_cluster.certs import make_authority

        root.mkdir(parents=True, exist_ok=True)
        security = cls(root)
        ca = make_authority(root)
        ca.issue("server", root, hosts=dict.fromkeys([host, "localhost", "127.0.0.1"]))
        ca.issue(USER, root, common_name=False)  # etcd's gateway refuses a common name (elect_cluster.certs)
        ca.issue(KUBE_APISERVER, root)  # kube-apiserver speaks gRPC to etcd: the common name is its etcd user
        for path in (security.password_file, security.admin_password_file):
            path.unlink(missing_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(18) + "\n")
        return security


def context_of(extra: dict[str, str]) -> ssl.SSLContext | None:
    """The probes' TLS context of a member whose `extra` names its cluster's security directory, else None."""
    root = extra.get("security")
    return Security(Path(root)).client_context() if root else None
