"""The fenced resource (elect_bench.fenced): the checker on hand-built histories, the store as a real process,
the writer inside real electors and a real `elect member`, and one trial on etcd with the workload on."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from elect.config import spec_from_url
from elect.contract import Leadership
from elect.errors import ConfigError
from elect.events import Acquired, Event, Revoked
from elect.roles import Role
from elect_bench import report, scenario
from elect_bench.faults import fault
from elect_bench.fenced.check import check_writes, read_jsonl
from elect_bench.fenced.client import StoreClient, dump, parse_address
from elect_bench.fenced.process import StoreProcess
from elect_bench.fenced.workload import Workload
from elect_bench.fenced.writer import FencedWriter
from elect_bench.members import MemberProcess
from elect_bench.methods import METHODS
from elect_bench.provenance import Provenance
from elect_bench.suite import Cell, RunResult
from elect_bench.trial import Environment, TrialResult, TrialSpec, run_trial
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until

Line = dict[str, Any]


# ---------------------------------------------------------------------------------------------- the checker
def attempt(mono: float, role: str, member: str, token: int, seq: int, accepted: bool = True,
            highest_before: int | None = None) -> Line:
    return {"mono": mono, "role": role, "member": member, "token": token, "seq": seq, "accepted": accepted,
            "highest_before": highest_before}


def stored(mono: float, member: str, token: int, seq: int) -> Line:
    return {"mono": mono, "member": member, "token": token, "seq": seq}


def ack(mono: float, role: str, member: str, token: int, seq: int) -> Line:
    return {"mono": mono, "role": role, "member": member, "token": token, "seq": seq}


def test_a_clean_fenced_history_has_no_violations_and_counts_per_member() -> None:
    attempts = [attempt(1.0, "r", "a", 3, 1), attempt(1.1, "r", "a", 3, 2, highest_before=3),
                attempt(2.0, "r", "b", 5, 1, highest_before=3),
                attempt(2.1, "r", "a", 3, 3, accepted=False, highest_before=5)]  # refused: fencing at work
    dumped = {"r": [stored(1.0, "a", 3, 1), stored(1.1, "a", 3, 2), stored(2.0, "b", 5, 1)]}
    acks = [ack(1.01, "r", "a", 3, 1), ack(1.11, "r", "a", 3, 2), ack(2.01, "r", "b", 5, 1)]
    found = check_writes(attempts, dumped, acks)
    assert found.violations() == []
    assert (found.attempts, found.accepted, found.rejected) == (4, 3, 1)
    assert found.members["a"].attempts == 3 and found.members["a"].rejected == 1 and found.members["b"].accepted == 1


def test_a_stale_accepted_write_is_caught_and_shown_with_the_write_it_went_under() -> None:
    attempts = [attempt(1.0, "r", "a", 3, 1), attempt(2.0, "r", "b", 5, 1, highest_before=3),
                attempt(2.5, "r", "a", 3, 2, highest_before=5),   # unfenced: taken although 5 was accepted
                attempt(3.0, "q", "a", 9, 3), attempt(3.1, "q", "a", 8, 4, highest_before=9)]  # its own older token
    found = check_writes(attempts, {}, [])
    assert [(v.role, v.at) for v in found.stale_accepted] == [("r", 2.5), ("q", 3.1)]
    first = found.stale_accepted[0]
    assert first.lines == (attempts[1], attempts[2])  # the write that set the highest, and the stale one
    assert "token 3" in str(first) and '"token": 5' in str(first)
    # a member's own older token is stale but clobbers nobody else
    assert [(v.role, v.at) for v in found.conflicting] == [("r", 2.5)]


def test_a_write_acknowledged_but_not_held_is_lost() -> None:
    dumped = {"r": [stored(1.0, "a", 3, 1)]}
    acks = [ack(1.0, "r", "a", 3, 1), ack(1.2, "r", "a", 3, 2),  # seq 2 never reached the dump
            ack(1.3, "q", "a", 3, 1)]  # the same seq acknowledged for another role is another write
    found = check_writes([], dumped, acks)
    assert [(v.kind, v.role, v.lines) for v in found.lost] == [("lost", "r", (acks[1],)), ("lost", "q", (acks[2],))]
    assert check_writes([], {"r": [stored(1.0, "a", 4, 1)]}, acks[:1]).lost  # the same seq under another token


def test_accepted_writes_out_of_token_order_are_caught_once_per_descent() -> None:
    dumped = {"r": [stored(1.0, "a", 3, 1), stored(2.0, "b", 5, 1), stored(2.1, "a", 4, 2), stored(2.2, "a", 4, 3),
                    stored(3.0, "b", 5, 2)],
              "q": [stored(1.0, "a", 1, 4), stored(1.5, "a", 1, 5)]}
    found = check_writes([], dumped, [])
    assert [(v.role, v.lines) for v in found.out_of_order] == [("r", (dumped["r"][1], dumped["r"][2]))]


def test_interleaved_writes_under_an_older_token_conflict() -> None:
    attempts = [attempt(1.0, "r", "a", 3, 1),
                attempt(2.0, "r", "b", 5, 1, highest_before=3),
                attempt(2.1, "r", "a", 3, 2, highest_before=5),   # a's old leadership lands over b's newer writes
                attempt(2.2, "r", "b", 5, 2, highest_before=5),
                attempt(2.3, "r", "a", 3, 3, highest_before=5),
                attempt(4.0, "r", "c", 7, 1, highest_before=5),
                attempt(4.1, "r", "b", 6, 3, highest_before=7)]   # b over c, with a token newer than a's
    found = check_writes(attempts, {}, [])
    conflicts = [(v.at, v.lines[0]["member"], v.lines[1]["member"]) for v in found.conflicting]
    assert conflicts == [(2.1, "b", "a"), (2.3, "b", "a"), (4.1, "c", "b")]
    assert len(found.stale_accepted) == 3  # every conflict is also a stale write
    assert sorted(v.kind for v in found.violations()) == ["conflict"] * 3 + ["stale"] * 3
    assert all(v.lines for v in found.violations())


def test_reading_a_log_leaves_out_a_torn_last_line_only(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"a": 1}\n\n{"a": 2}\n{"a": ')
    assert read_jsonl(log) == [{"a": 1}, {"a": 2}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []
    log.write_text('{"a": 1}\nnope\n{"a": 2}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_jsonl(log)


# ---------------------------------------------------------------------------------------------- the store
@pytest.fixture
def fenced_store(tmp_path: Path) -> Iterator[StoreProcess]:
    with StoreProcess(tmp_path / "fenced") as store:
        yield store


@pytest.fixture
def unfenced_store(tmp_path: Path) -> Iterator[StoreProcess]:
    with StoreProcess(tmp_path / "unfenced", fenced=False) as store:
        yield store


def write(client: StoreClient, role: str, member: str, token: int, seq: int) -> dict[str, Any]:
    return client.request({"op": "write", "role": role, "member": member, "token": token, "seq": seq})


def test_the_fenced_store_refuses_a_token_below_the_highest_and_logs_every_attempt(
        fenced_store: StoreProcess) -> None:
    before = time.monotonic()
    with StoreClient(fenced_store.address) as c:
        assert write(c, "r", "a", 5, 1) == {"ok": True}
        assert write(c, "r", "a", 5, 2) == {"ok": True}   # the same leader again
        assert write(c, "r", "b", 7, 1) == {"ok": True}   # a newer leader
        assert write(c, "r", "a", 5, 3) == {"ok": False, "highest": 7}
        assert write(c, "q", "a", 1, 4) == {"ok": True}   # roles are fenced apart
    after = time.monotonic()
    log = read_jsonl(fenced_store.log_path)
    assert [(line["role"], line["member"], line["token"], line["seq"], line["accepted"], line["highest_before"])
            for line in log] == [("r", "a", 5, 1, True, None), ("r", "a", 5, 2, True, 5), ("r", "b", 7, 1, True, 5),
                                 ("r", "a", 5, 3, False, 7), ("q", "a", 1, 4, True, None)]
    assert all(before <= line["mono"] <= after for line in log)  # one monotonic clock for every process
    assert [line["mono"] for line in log] == sorted(line["mono"] for line in log)
    dumped = fenced_store.dump()
    assert [(w["member"], w["token"], w["seq"]) for w in dumped["r"]] == [("a", 5, 1), ("a", 5, 2), ("b", 7, 1)]
    assert [(w["member"], w["seq"]) for w in dumped["q"]] == [("a", 4)]
    assert check_writes(log, dumped, []).violations() == []


def test_the_unfenced_store_takes_a_stale_write_and_still_records_the_highest(
        unfenced_store: StoreProcess) -> None:
    with StoreClient(unfenced_store.address) as c:
        assert write(c, "r", "b", 7, 1) == {"ok": True}
        assert write(c, "r", "a", 5, 1) == {"ok": True}
        assert write(c, "r", "b", 7, 2) == {"ok": True}
    log = read_jsonl(unfenced_store.log_path)
    assert [(line["accepted"], line["highest_before"]) for line in log] == [(True, None), (True, 7), (True, 7)]
    dumped = dump(unfenced_store.address)
    assert [w["token"] for w in dumped["r"]] == [7, 5, 7]
    found = check_writes(log, dumped, [])
    assert (len(found.stale_accepted), len(found.conflicting), len(found.out_of_order)) == (1, 1, 1)


def test_garbage_gets_an_error_and_the_connection_goes_on(fenced_store: StoreProcess) -> None:
    with socket.create_connection(fenced_store.address, timeout=10) as sock:
        stream = sock.makefile("rwb")
        garbage = [b"not json", b"[1, 2]", b'{"op": "nope"}', b'{"op": "write", "role": "r"}',
                   b'{"op": "write", "role": "r", "member": "a", "token": true, "seq": 1}',
                   b'{"op": "write", "role": 1, "member": "a", "token": 1, "seq": 1}', b"\xff\xfe", b"x" * (2 << 20)]
        for line in garbage:
            stream.write(line + b"\n")
            stream.flush()
            reply = json.loads(stream.readline())
            assert reply["ok"] is False and reply["error"], line[:40]
        stream.write(b"\n" + json.dumps({"op": "write", "role": "r", "member": "a", "token": 1, "seq": 9}).encode()
                     + b"\n")
        stream.flush()
        assert json.loads(stream.readline()) == {"ok": True}
    assert [line["seq"] for line in read_jsonl(fenced_store.log_path)] == [9]  # garbage is not an attempt


def test_many_concurrent_clients_are_all_served(fenced_store: StoreProcess) -> None:
    replies: list[dict[str, Any]] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with StoreClient(fenced_store.address, timeout=30) as c:
            got = [write(c, f"r{n % 4}", f"m{n}", 1, seq) for seq in range(50)]
        with lock:
            replies.extend(got)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(replies) == 24 * 50 and all(r == {"ok": True} for r in replies)
    assert sum(len(w) for w in fenced_store.dump().values()) == 24 * 50


def test_the_store_process_is_stopped_and_its_port_freed(tmp_path: Path) -> None:
    store = StoreProcess(tmp_path).start()
    try:
        port = store.port
        assert store.where == f"127.0.0.1:{port}" and parse_address(store.where) == ("127.0.0.1", port)
    finally:
        store.stop()
    assert store.proc is not None and store.proc.returncode == 0  # SIGTERM is a clean exit
    store.stop()  # twice is harmless
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


# ---------------------------------------------------------------------------------------------- the writer
class Held:
    """An elector as far as the writer asks it: leadership per role, set by the test."""

    member = "w"

    def __init__(self) -> None:
        self.led: dict[Role, Leadership] = {}

    def leadership(self, role: Role) -> Leadership | None:
        return self.led.get(role)

    def lead(self, role: Role, token: int) -> Acquired:
        self.led[role] = Leadership(role, self.member, token, time.monotonic(), time.time())
        return Acquired(role=role, member=self.member, token=token)


def test_the_writer_writes_while_it_leads_stops_on_revoked_and_reconnects(tmp_path: Path) -> None:
    store = StoreProcess(tmp_path / "one").start()
    elector = Held()
    writer = FencedWriter(elector, store.address, every=0.005, log=tmp_path / "acks.jsonl", timeout=2.0)
    second: StoreProcess | None = None
    try:
        writer.start()
        writer(elector.lead("r", 4))
        wait_until(lambda: len(store.dump().get("r", [])) >= 5, 30, what="writes under token 4")
        del elector.led["r"]
        writer(Revoked(role="r", member="w", token=4))
        returned = time.monotonic()
        writer(elector.lead("q", 6))
        wait_until(lambda: len(store.dump().get("q", [])) >= 5, 30, what="writes to the next role")
        assert all(line["mono"] < returned for line in read_jsonl(store.log_path) if line["role"] == "r")
        port = store.port
        store.stop()  # the connection drops; the writer keeps trying
        second = StoreProcess(tmp_path / "two", port=port).start()
        wait_until(lambda: second is not None and len(second.dump().get("q", [])) >= 5, 60,
                   what="writes to the restarted store", ignore=(OSError,))
    finally:
        writer.close()
        store.stop()
        if second is not None:
            second.stop()
    acks = read_jsonl(tmp_path / "acks.jsonl")
    seqs = [a["seq"] for a in acks]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # one rising sequence across roles
    assert {(a["role"], a["token"]) for a in acks} == {("r", 4), ("q", 6)}
    assert second is not None
    held = [line for log in (store.log_path, second.log_path) for line in read_jsonl(log) if line["accepted"]]
    assert {a["seq"] for a in acks} <= {line["seq"] for line in held}  # every acknowledged write is in a store
    assert writer.acked == len(acks) and writer.refused == 0


def test_a_graceful_handover_has_no_write_of_the_old_leader_after_its_revoked(tmp_path: Path) -> None:
    """Two real in-process electors: the Revoked callback waits for the write in flight, so in the store's order
    every write of the old leader comes before the first of the new one, and nothing is refused."""
    returned: dict[str, float] = {}

    def note(event: Event) -> None:  # subscribed after the writer: runs once its Revoked callback returned
        if isinstance(event, Revoked):
            returned[str(event.role)] = time.monotonic()

    with Workload.start("fenced", tmp_path / "w") as workload:
        assert workload.store is not None
        group = f"fenced-{time.monotonic_ns()}"
        electors = {m: spec_from_url(f"memory://{group}", ["x", "y"], member=m).create() for m in ("a", "b")}
        writers = {m: FencedWriter(e, workload.store.address, every=0.002, log=workload.ack_log(m))
                   for m, e in electors.items()}
        for m in electors:
            workload.member_args(m)  # so that judge() reads this member's acknowledgements
        for m, e in electors.items():
            e.subscribe(writers[m])
            writers[m].start()
        electors["a"].subscribe(note)
        try:
            electors["a"].start()
            electors["b"].start()
            store = workload.store
            wait_until(lambda: {w["member"] for w in store.dump().get("x", [])} == {"a"} and
                       len(store.dump()["x"]) >= 20, 30, what="a writing role x")
            electors["a"].resign("x")
            wait_until(lambda: {w["member"] for w in store.dump().get("x", [])} == {"a", "b"}, 30,
                       what="b writing role x")
        finally:
            for m, e in electors.items():
                e.stop()
                writers[m].close()
        attempts = read_jsonl(workload.store.log_path)
        x = [line for line in attempts if line["role"] == "x"]
        first_b = next(i for i, line in enumerate(x) if line["member"] == "b")
        assert all(line["member"] == "a" for line in x[:first_b])
        assert all(line["member"] == "b" for line in x[first_b:])
        assert all(line["mono"] < returned["x"] for line in x if line["member"] == "a")
        found = workload.judge()
        assert found is not None and found.violations() == [] and found.rejected == 0
        assert found.members["a"].accepted > 0 and found.members["b"].accepted > 0


def test_an_elect_member_process_writes_while_it_leads(tmp_path: Path) -> None:
    with Workload.start("unfenced", tmp_path / "w") as workload:
        member = MemberProcess(f"memory://solo-{time.monotonic_ns()}", "a", ["x", "y"], log_dir=tmp_path,
                               extra_args=[*workload.member_args("a"), "--write-every", "0.005"])
        member.start()
        try:
            member.log.wait_for(lambda line: line["event"] == "acquired", 60, what="the member leading")
            assert workload.store is not None
            store = workload.store
            wait_until(lambda: {r for r, w in store.dump().items() if len(w) >= 5} == {"x", "y"}, 60,
                       what="writes to both roles")
        finally:
            member.stop()
        assert member.returncode == 0, member.stderr_tail()
        found = workload.judge()
        assert found is not None and found.violations() == []
        acks = read_jsonl(workload.ack_log("a"))
        assert acks and {a["token"] for a in acks} == {line["token"] for line in member.log.lines}
        assert {line["role"] for line in member.log.lines if line["event"] == "revoked"} == {"x", "y"}
        assert workload.check()["writes"] == found.accepted


# ---------------------------------------------------------------------------------------------- the harness
def test_scenarios_and_reports_carry_the_workload() -> None:
    assert scenario.load({"workload": "fenced"}).workload == "fenced"
    assert scenario.load({}).workload == "none"
    with pytest.raises(ConfigError, match="workload is one of"):
        scenario.load({"workload": "sloppy"})
    chosen = scenario.load({"methods": ["etcd"], "faults": ["stop"], "trials": 1})
    trial = TrialResult("etcd", "stop", 0, ok=True, workload="fenced", writes=120, rejected=2)
    cell = Cell(METHODS["etcd"], fault("stop"), 3, [trial])
    machine = {"host": "h", "cpus": 2, "cpu": "c", "python": "3.11"}
    table = report.text_table(RunResult(chosen, [cell], {}, Provenance("pytest", 0.0, 1.0, machine)))
    assert "writes" in table and "120" in table and "clobbers" in table
    trial.workload = "none"
    assert "clobbers" not in report.text_table(RunResult(chosen, [cell], {}, Provenance("pytest", 0.0, 1.0, machine)))


@pytest.mark.infra
def test_a_trial_on_etcd_with_the_fenced_workload_writes_and_loses_nothing(infra: Endpoints, tmp_path: Path) -> None:
    spec = TrialSpec(METHODS["etcd"], fault("stop"), budget=1.0, members=3, roles=4, workload="fenced")
    result = run_trial(spec, Environment(infra, tmp_path), 0, f"fenced-{int(time.time() * 1000) % 10**8}")
    assert result.ok, result.error
    assert result.workload == "fenced" and result.writes > 0
    assert (result.stale_writes, result.lost_writes, result.conflicting_writes) == (0, 0, 0)
    assert result.violations == []
    assert result.failover and result.unrecovered == 0
    acked = [a for log in tmp_path.glob("*/writes/writes-m*.jsonl") for a in read_jsonl(log)]
    assert len({a["member"] for a in acked}) >= 2  # the victim wrote, and so did whoever took over
    assert list(tmp_path.glob("*/writes/store-attempts.jsonl"))  # the store's log, in the trial's own folder
