"""Where the running infrastructure listens, and the elect URLs that use it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from .security import SCRAM


def _query(params: dict[str, str]) -> str:
    return "?" + urlencode(params, safe="/,") if params else ""


@dataclass(frozen=True)
class Endpoints:
    """``host:port`` lists per service (empty when the service is not running); ``kafka_broker`` says which
    broker serves Kafka (e.g. "Apache Kafka 4.4.0 (KRaft, 3 nodes)"), so a report can name it. ``security``:
    the URL parameters a client of a secured cluster needs (CA, client certificate, user, password file: paths
    and names only, never a password), empty for a plain one. ``secured``: a secured cluster's endpoints beside
    this one's (not written to endpoints.json)."""

    kafka: tuple[str, ...] = ()
    etcd: tuple[str, ...] = ()
    zookeeper: tuple[str, ...] = ()
    kafka_broker: str = ""
    security: tuple[tuple[str, str], ...] = ()
    secured: Endpoints | None = None  # beside a plain cluster, a secured one (the bench compares the two)
    kubernetes: tuple[str, ...] = ()  # kube-apiserver (HTTPS), and the kubeconfig of a member with the lease Role
    kubeconfig: str = ""

    def params(self, service: str) -> dict[str, str]:
        """The security parameters of a URL of `service` (Kafka adds its SASL mechanism); empty if plain."""
        params = dict(self.security)
        if params and service == "kafka":
            params["sasl_mechanism"] = SCRAM
        return params

    def urls(self, prefix: str = "elect") -> dict[str, str]:
        """Ready-made elect URLs, one per running service."""
        urls: dict[str, str] = {}
        if self.kafka:
            urls["kafka"] = f"kafka://{','.join(self.kafka)}/{prefix}?" + urlencode(
                {"group": prefix, **self.params("kafka")}, safe="/,")
        if self.etcd:
            urls["etcd"] = f"etcd://{','.join(self.etcd)}/{prefix}" + _query(self.params("etcd"))
        if self.zookeeper:
            urls["zookeeper"] = f"zookeeper://{','.join(self.zookeeper)}/{prefix}" + _query(self.params("zookeeper"))
        if self.kubernetes:
            urls["kubernetes"] = f"kubernetes://{self.kubernetes[0]}/default" + _query(
                {"prefix": prefix, "kubeconfig": self.kubeconfig})
        return urls

    def to_dict(self) -> dict[str, Any]:
        return {"kafka": list(self.kafka), "etcd": list(self.etcd), "zookeeper": list(self.zookeeper),
                "kubernetes": list(self.kubernetes), "kubeconfig": self.kubeconfig,
                "kafka_broker": self.kafka_broker, "security": dict(self.security), "urls": self.urls()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Endpoints:
        security = data.get("security") or {}

        def addresses(name: str) -> tuple[str, ...]:
            return tuple(str(a) for a in data.get(name, ()))

        return cls(addresses("kafka"), addresses("etcd"), addresses("zookeeper"),
                   kafka_broker=str(data.get("kafka_broker", "")),
                   security=tuple((str(k), str(v)) for k, v in security.items()),
                   kubernetes=addresses("kubernetes"), kubeconfig=str(data.get("kubeconfig", "")))

    @classmethod
    def load(cls, path: str | Path) -> Endpoints:
        """Read an ``endpoints.json`` written by ``LocalCluster.up`` (or ``elect cluster up``)."""
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not an endpoints object")
        return cls.from_dict(data)
