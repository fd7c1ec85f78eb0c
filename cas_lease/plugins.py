"""The `etcd://`, `zookeeper://` and `kubernetes://` entry points: light objects that import no store client."""

from __future__ import annotations

from cas_lease.options import EtcdOptions, KubernetesOptions, ZooKeeperOptions
from elect.registry import Plugin

ETCD = Plugin(
    scheme="etcd",
    summary="CAS lease per role on etcd (v3 JSON gateway), fenced on the member's own clock",
    options=EtcdOptions,
    factory="cas_lease.etcd:create",
    observer="cas_lease.observe:etcd",
    url_parts={"hosts": "endpoints", "path": "prefix"},
    extra="etcd",
    requires=(),  # speaks etcd's /v3/ JSON gateway with the standard library
)

ZOOKEEPER = Plugin(
    scheme="zookeeper",
    summary="CAS lease on ZooKeeper (kazoo): a node per role, a silent holder's timed by contenders, "
            "fenced on SUSPENDED and on the member's own clock",
    options=ZooKeeperOptions,
    factory="cas_lease.zookeeper:create",
    observer="cas_lease.observe:zookeeper",
    url_parts={"hosts": "hosts", "path": "path"},
    extra="zookeeper",
    requires=("kazoo",),
)

KUBERNETES = Plugin(
    scheme="kubernetes",
    summary="CAS lease per role on Kubernetes Lease objects (coordination.k8s.io/v1), timed on the members' own "
            "clocks, readable by client-go's LeaseLock",
    options=KubernetesOptions,
    factory="cas_lease.kubernetes:create",
    observer="cas_lease.observe:kubernetes",
    url_parts={"hosts": "server", "path": "namespace"},
    extra=None,
    requires=(),  # speaks the Kubernetes API with the standard library
)
