"""The state file of a local cluster: what runs where, so any process can inspect or stop it.

``elect cluster up`` returns while services keep running; ``down`` and ``status`` usually run in
another process, so everything needed to find, probe, restart and kill each member lives in
``WORKDIR/state.json``, written atomically and guarded by an advisory lock on ``WORKDIR/.lock``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ClusterError
from .service import Member

STATE_FILE = "state.json"
ENDPOINTS_FILE = "endpoints.json"
LOCK_FILE = ".lock"
MARKER_FILE = ".elect-cluster"  # proves a directory is ours before anything in it is deleted


@dataclass
class ClusterState:
    """Members per service, in start order; ``counts`` is what was asked for (to detect mismatches)."""

    host: str
    counts: dict[str, int]
    members: list[Member] = field(default_factory=list)
    broker: str = "apache"  # which Kafka broker the "kafka" service is (elect_cluster.local.BROKERS)
    secure: bool = False  # TLS and authentication (elect_cluster.security), files in WORKDIR/security

    def of(self, service: str) -> list[Member]:
        return [m for m in self.members if m.service == service]

    def member(self, service: str, index: int) -> Member:
        for m in self.members:
            if m.service == service and m.index == index:
                return m
        raise ClusterError(f"no member {service}[{index}] in this cluster "
                           f"(it has {', '.join(m.label for m in self.members) or 'no members'})")

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "host": self.host, "counts": dict(self.counts), "broker": self.broker,
                "secure": self.secure,
                "members": [m.to_dict() for m in self.members]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterState:
        return cls(host=str(data["host"]), counts={str(k): int(v) for k, v in data["counts"].items()},
                   members=[Member.from_dict(m) for m in data["members"]], broker=str(data.get("broker", "tansu")),
                   secure=bool(data.get("secure", False)))


def load(workdir: Path) -> ClusterState | None:
    """The recorded state, or None when no cluster was started in ``workdir``."""
    path = workdir / STATE_FILE
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return ClusterState.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is damaged ({exc}); stop leftover processes by hand and delete it") from exc


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` in one step, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def save(workdir: Path, state: ClusterState) -> None:
    write_atomic(workdir / STATE_FILE, json.dumps(state.to_dict(), indent=2))


def remove(workdir: Path) -> None:
    for name in (STATE_FILE, ENDPOINTS_FILE):
        (workdir / name).unlink(missing_ok=True)


def cache_dir() -> Path:
    """This user's cache of elect's downloads and builds (``$XDG_CACHE_HOME/elect``, else ``~/.cache/elect``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "elect"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an advisory lock on `path` (made if missing): processes that take the same path take turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def locked(workdir: Path) -> Iterator[None]:
    """Hold the workdir's advisory lock, so two ``up``/``down`` calls never interleave."""
    with file_lock(workdir / LOCK_FILE):
        yield
