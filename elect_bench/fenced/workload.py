"""A run's fenced workload from the harness's side: the store process, the flags that make each member write
to it, and the judgement of what was written.

Used by a trial (elect_bench.trial) and by anything else that runs a group of members: `open` starts the
store, every member gets `member_args(id)`, and once the members have stopped `judge` reads the store's
dump, its attempt log and every member's acknowledgements; `close` always stops the store. Kind `none`
does nothing and gives members no flags.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, Self

from elect_bench.fenced import WORKLOADS
from elect_bench.fenced.check import WriteCheck, check_writes, read_jsonl
from elect_bench.fenced.process import StoreProcess
from elect_bench.placement import DockerPlacement, NetnsPlacement, Placement


def store_host(placement: Placement) -> str:
    """Where to run the store so every member reaches it: the root namespace's address on the hosts' LAN when
    members live in network namespaces, else loopback. Members in containers are not supported."""
    if isinstance(placement, DockerPlacement):
        raise ValueError("a write workload needs members on this machine (placement local), not in containers")
    return placement.hosts.gateway if isinstance(placement, NetnsPlacement) else "127.0.0.1"


class Workload:
    def __init__(self, kind: str, workdir: Path) -> None:
        if kind not in WORKLOADS:
            raise ValueError(f"unknown workload {kind!r}; known: {', '.join(WORKLOADS)}")
        self.kind = kind
        self.workdir = Path(workdir)
        self.store: StoreProcess | None = None
        self._members: list[str] = []

    @property
    def active(self) -> bool:
        return self.kind != "none"

    @classmethod
    @contextlib.contextmanager
    def start(cls, kind: str, workdir: Path, host: str = "127.0.0.1") -> Iterator[Self]:
        """The workload, its store running (on `host`, where the members reach it) and always stopped after."""
        workload = cls(kind, workdir)
        try:
            yield workload.open(host)
        finally:
            workload.close()

    def open(self, host: str = "127.0.0.1") -> Self:
        if self.active:
            self.store = StoreProcess(self.workdir, fenced=self.kind == "fenced", host=host)
            self.store.start()
        return self

    def member_args(self, member: str) -> list[str]:
        """What `elect member` needs to write: where the store is, and where to log acknowledged writes."""
        if self.store is None:
            return []
        self._members.append(member)
        return ["--write-to", self.store.where, "--write-log", str(self.ack_log(member))]

    def ack_log(self, member: str) -> Path:
        return self.workdir / f"writes-{member}.jsonl"

    def judge(self) -> WriteCheck | None:
        """Judge every write so far (call it once the members have stopped); None for kind `none`."""
        if self.store is None:
            return None
        # after a soak the store holds a million writes, and on a busy machine it takes a while to send them all:
        # the bound is against a store that hangs, not a slow one
        dump = self.store.dump(timeout=300.0)
        acks = [line for m in dict.fromkeys(self._members) for line in read_jsonl(self.ack_log(m))]
        return check_writes(read_jsonl(self.store.log_path), dump, acks)

    def check(self) -> dict[str, Any]:
        """`judge` as plain data for a report ({} for kind `none`)."""
        found = self.judge()
        if found is None:
            return {}
        return {"workload": self.kind, "attempts": found.attempts, "writes": found.accepted,
                "rejected": found.rejected, "stale_writes": len(found.stale_accepted),
                "lost_writes": len(found.lost), "out_of_order_writes": len(found.out_of_order),
                "conflicting_writes": len(found.conflicting),
                "members": {m: asdict(c) for m, c in found.members.items()},
                "violations": [str(v) for v in found.violations()]}

    def close(self) -> None:
        if self.store is not None:
            self.store.stop()
