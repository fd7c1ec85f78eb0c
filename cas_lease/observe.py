"""Observers of the lease stores: the role keys (`<prefix>/roles/<role>`, Kubernetes: the role Leases) and their
holders, read as the lease electors write them (cas_lease.names), with the same token (etcd: the key's mod
revision, that of the write that gave it its holder; ZooKeeper: the zxid of the write that made the holder;
Kubernetes: the Lease's leaseTransitions)."""

from __future__ import annotations

from typing import Any

from cas_lease.names import decode_holder, holder_since, role_of
from cas_lease.options import EtcdOptions, KubernetesOptions, ZooKeeperOptions
from elect.errors import AccessRefused, InfrastructureUnavailable
from elect.etcd_gateway import Access, Gateway, GatewayError, Refused, Unreachable, b64, range_end, unb64
from elect.observe import Claim
from elect.reach import require_listening


class EtcdObserver:
    def __init__(self, options: EtcdOptions) -> None:
        self._gw = Gateway(options.endpoints, Access.of(options))
        self._roles = options.key_prefix + "roles/"
        self.where = f"etcd prefix {options.key_prefix!r} (the members' prefix=)"

    def claims(self, timeout: float) -> list[Claim]:
        try:
            data = self._gw.call("kv/range", {"key": b64(self._roles), "range_end": b64(range_end(self._roles))},
                                 timeout)
        except Refused as exc:
            raise AccessRefused(f"etcd: {exc}") from None
        except (Unreachable, GatewayError) as exc:
            raise InfrastructureUnavailable(f"etcd: {exc}") from None
        out = []
        for kv in data.get("kvs", []):
            key = unb64(kv.get("key")).decode(errors="replace")
            value = unb64(kv.get("value"))
            holder = decode_holder(value, int(kv.get("mod_revision", 0)))
            out.append(Claim(str(role_of(key[len(self._roles):])), holder.member, holder.token, holder_since(value)))
        return out

    def close(self) -> None:
        self._gw.close()


class ZooKeeperObserver:
    def __init__(self, options: ZooKeeperOptions) -> None:
        from kazoo.client import KazooClient

        from cas_lease.zookeeper import client_security

        self._roles = options.root + "/roles"
        self.where = f"ZooKeeper path {options.root!r} (the members' path)"
        self._client: Any = KazooClient(hosts=",".join(options.hosts), timeout=max(options.session_timeout, 4.0),
                                        **client_security(options, options.password()))
        self._connect_timeout = options.connect_timeout
        self._hosts = options.hosts

    def claims(self, timeout: float) -> list[Claim]:
        from kazoo.exceptions import KazooException, NoNodeError
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            if not self._client.connected:
                require_listening("ZooKeeper", self._hosts)  # kazoo retries a refused port until its timeout
                self._client.start(timeout=max(timeout, self._connect_timeout))
            out = []
            for name in self._client.get_children(self._roles):
                try:
                    raw, stat = self._client.get(f"{self._roles}/{name}")
                except NoNodeError:
                    continue  # released between the listing and the read
                if not raw:
                    continue  # a free role: its node stays, empty (cas_lease.zookeeper)
                holder = decode_holder(raw, int(stat.mzxid))  # the node's data is written when it changes hands
                out.append(Claim(str(role_of(name)), holder.member, holder.token, stat.mtime / 1000.0))
            return out
        except NoNodeError:
            return []  # no member has started under this path yet
        except (KazooException, KazooTimeoutError) as exc:
            raise InfrastructureUnavailable(f"zookeeper: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        self._client.stop()
        self._client.close()


class KubernetesObserver:
    def __init__(self, options: KubernetesOptions) -> None:
        from cas_lease.kube_api import Client, leases, resolve

        self._client = Client(resolve(options))
        self._path = leases(options.namespace)
        self._prefix = options.prefix
        self.where = f"the Leases of namespace {options.namespace!r} named {options.prefix!r}..."

    def claims(self, timeout: float) -> list[Claim]:
        from cas_lease.kube_api import Refused, Unreachable
        from cas_lease.kubernetes import lease_acquired, lease_holder, lease_role

        try:
            status, data = self._client.request("GET", self._path, None, timeout)
        except Refused as exc:
            raise AccessRefused(f"kubernetes: {exc}") from None
        except Unreachable as exc:
            raise InfrastructureUnavailable(f"kubernetes: {exc}") from None
        if status != 200:
            raise InfrastructureUnavailable(f"kubernetes: cannot list Leases: HTTP {status} {data.get('message', '')}")
        out = []
        for obj in data.get("items") or []:
            role, holder = lease_role(self._prefix, obj), lease_holder(obj)
            if role is not None and holder is not None:
                out.append(Claim(str(role), holder.member, holder.token, lease_acquired(obj)))
        return out

    def close(self) -> None:
        self._client.close()


def etcd(options: EtcdOptions) -> EtcdObserver:
    return EtcdObserver(options)


def zookeeper(options: ZooKeeperOptions) -> ZooKeeperObserver:
    return ZooKeeperObserver(options)


def kubernetes(options: KubernetesOptions) -> KubernetesObserver:
    return KubernetesObserver(options)
