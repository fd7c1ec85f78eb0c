"""Where the running infrastructure listens, and the elect URLs that use it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Endpoints:
    """``host:port`` lists per service (empty when the service is not running); ``kafka_broker`` says which
    broker serves Kafka (e.g. "Apache Kafka 4.4.0 (KRaft, 3 nodes)"), so a report can name it."""

    kafka: tuple[str, ...] = ()
    etcd: tuple[str, ...] = ()
    zookeeper: tuple[str, ...] = ()
    kafka_broker: str = ""

    def urls(self, prefix: str = "elect") -> dict[str, str]:
        """Ready-made elect URLs, one per running service."""
        urls: dict[str, str] = {}
        if self.kafka:
            urls["kafka"] = f"kafka://{','.join(self.kafka)}/{prefix}?group={prefix}"
        if self.etcd:
            urls["etcd"] = f"etcd://{','.join(self.etcd)}/{prefix}"
        if self.zookeeper:
            urls["zookeeper"] = f"zookeeper://{','.join(self.zookeeper)}/{prefix}"
        return urls

    def to_dict(self) -> dict[str, Any]:
        return {"kafka": list(self.kafka), "etcd": list(self.etcd), "zookeeper": list(self.zookeeper),
                "kafka_broker": self.kafka_broker, "urls": self.urls()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Endpoints:
        return cls(**{name: tuple(str(a) for a in data.get(name, ())) for name in ("kafka", "etcd", "zookeeper")},
                   kafka_broker=str(data.get("kafka_broker", "")))

    @classmethod
    def load(cls, path: str | Path) -> Endpoints:
        """Read an ``endpoints.json`` written by ``LocalCluster.up`` (or ``elect cluster up``)."""
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not an endpoints object")
        return cls.from_dict(data)
