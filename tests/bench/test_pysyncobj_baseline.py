"""The pysyncobj:// baseline keeps each partition's term and vote in PySyncObj's file journal, so a SyncObj started
again after a resign cannot vote twice in a term (two successive leaders under one token, seen in the suite)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import elect
from elect.contract import Elector
from elect_cluster.ports import free_port_blocks
from elect_cluster.waiting import wait_until

ROLE = "prices.EURUSD"


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[str, Elector]]:
    ids = ["a", "b", "c"]
    where = {i: f"127.0.0.1:{port}" for i, port in zip(ids, free_port_blocks(3, 1), strict=True)}
    electors = {}
    for i in ids:
        peers = ",".join(f"{p}@{where[p]}" for p in ids if p != i)
        electors[i] = elect.connect(f"pysyncobj://{i}@{where[i]}?peers={peers}&partitions=1&election_timeout=0.5"
                                    f"&data_dir={tmp_path}", roles=[ROLE])
    try:
        for e in electors.values():
            e.start()
        yield electors
    finally:
        for e in electors.values():
            e.stop()


def _leader(nodes: dict[str, Elector]) -> tuple[str, int]:
    def led() -> list[tuple[str, int]]:
        return [(i, lead.token) for i, e in nodes.items() if (lead := e.leadership(ROLE)) is not None]
    return wait_until(led, 30, what=f"a leader of {ROLE}")[0]


def test_a_resigned_partition_comes_back_with_its_term(nodes: dict[str, Elector], tmp_path: Path) -> None:
    member, token = _leader(nodes)
    assert list((tmp_path / member).glob("partition-0.journal*")), "the term and vote are journalled"
    nodes[member].resign(ROLE)
    obj = wait_until(lambda: nodes[member]._objs.get(0), 30, what="the resigned partition's SyncObj started again")
    assert obj.raftCurrentTerm >= token  # not 0: a fresh SyncObj that forgot its vote could vote twice in a term
    tokens = [token]
    for _ in range(3):
        member, token = wait_until(lambda: (t := _leader(nodes))[1] > tokens[-1] and t, 30,
                                   what="the next leader, under a higher term")
        tokens.append(token)
        nodes[member].resign(ROLE)
    assert tokens == sorted(set(tokens))
