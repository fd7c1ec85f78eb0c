"""Durable term and vote per group: the only state Raft election needs to survive a crash.

A vote must hit the disk before the message granting it leaves, or a restarted node could vote twice
in one term. Each group's state is one small JSON file, replaced atomically (write a temporary file,
fsync it, rename over the old one, fsync the directory), so a crash leaves either the old or the new.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from raft_priority.messages import HardState


class HardStateStore:
    """``<data_dir>/<node>/group-<id>.json`` for every group this node is a member of."""

    def __init__(self, data_dir: str | os.PathLike[str], node: str) -> None:
        if not node or "/" in node or node in (".", ".."):
            raise ValueError(f"unusable node id for a directory name: {node!r}")
        self.dir = Path(data_dir) / node
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, group: int) -> Path:
        return self.dir / f"group-{group}.json"

    def load(self, group: int) -> HardState | None:
        try:
            raw = json.loads(self.path(group).read_text())
        except FileNotFoundError:
            return None
        return HardState(int(raw["term"]), raw.get("voted_for"))

    def load_all(self) -> dict[int, HardState]:
        res: dict[int, HardState] = {}
        for p in self.dir.glob("group-*.json"):
            gid = int(p.stem.removeprefix("group-"))
            hs = self.load(gid)
            if hs is not None:
                res[gid] = hs
        return res

    def save(self, states: Mapping[int, HardState]) -> None:
        """Persist every entry durably; returns only when all of them are on disk."""
        if not states:
            return
        for group, hs in states.items():
            tmp = self.dir / f".group-{group}.json.tmp"
            data = json.dumps({"term": hs.term, "voted_for": hs.voted_for}).encode()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path(group))
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)  # make the renames durable, once for the whole batch
        finally:
            os.close(dfd)
