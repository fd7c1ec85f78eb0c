"""The `elect` command line as a user runs it: real processes, real signals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elect.events import parse_line
from elect.member_reports import DRAINED, WORK
from elect.observe import Claim
from elect_bench.members import MemberProcess
from elect_cli.watch import LeaderTable
from elect_cluster.waiting import wait_until


def run_elect(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elect", *args], capture_output=True, text=True, timeout=timeout)


def test_member_prints_event_lines_and_hands_over_on_sigterm(tmp_path: Path) -> None:
    m = MemberProcess("memory://cli", "a", ["x", 3], log_dir=tmp_path)
    m.start()
    try:
        for role in ("x", "3"):
            m.log.wait_for(lambda line, role=role: line["role"] == role and line["event"] == "acquired", 60)
        m.resign("x")
        m.log.wait_for(lambda line: line["role"] == "x" and line["token"] == 2, 30, what="x re-acquired")
        m.stop()
        assert m.returncode == 0, m.stderr_tail()
    finally:
        m.kill()
    assert not m.bad_lines
    events = [(line["role"], line["event"], line["token"]) for line in m.log.lines]
    assert events.count(("3", "revoked", 1)) == 1 and ("x", "revoked", 2) in events
    assert all(line["member"] == "a" for line in m.log.lines)


def test_member_drains_on_sigterm_and_reports_its_workers(tmp_path: Path) -> None:
    m = MemberProcess("memory://cli-work", "a", ["x", 3], log_dir=tmp_path, extra_args=["--work", "0.3"])
    m.start()
    try:
        wait_until(lambda: len(m.reports(WORK)) == 2, 60, what="a worker started per role")
        m.stop()
        assert m.returncode == 0, m.stderr_tail()
    finally:
        m.kill()
    work = m.reports(WORK)
    revoked = {line["role"]: line["mono"] for line in m.log.lines if line["event"] == "revoked"}
    returned = {w["role"]: w["mono"] for w in work if w["state"] == "returned"}
    assert set(returned) == set(revoked) == {"x", "3"}
    assert all(returned[r] >= revoked[r] + 0.25 for r in returned)  # told to stop at the handover, then finished
    (drained,) = m.reports(DRAINED)
    assert drained["roles"] == ["3", "x"] and drained["successors"] == {} and drained["uncontended"] == ["3", "x"]
    assert 0.5 <= drained["seconds"] < 30 and f"a drained in {drained['seconds']:.3f} s" in m.stderr_tail()


def test_member_stops_when_its_controller_goes_away(tmp_path: Path) -> None:
    m = MemberProcess("memory://cli2", "a", ["x"], log_dir=tmp_path)
    m.start()
    try:
        m.log.wait_for(lambda line: line["event"] == "acquired", 60)
        assert m.proc is not None and m.proc.stdin is not None
        m.proc.stdin.close()
        m.proc.wait(30)
        assert m.returncode == 0
    finally:
        m.kill()


def test_member_drains_and_exits_when_nothing_reads_its_events(tmp_path: Path) -> None:
    """The reader of a member's event lines ends (a harness killed, a pipeline closed): the next line it writes
    finds no reader, and the member drains and exits 0 instead of leading on unseen, writing a traceback per event."""
    err = tmp_path / "stderr"
    with err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "elect", "member", "memory://cli-pipe", "--id", "a",
                                 "--roles", "x,y", "--control"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for _ in range(2):
            assert parse_line(proc.stdout.readline())["event"] == "acquired"
        proc.stdout.close()
        proc.stdin.write("resign x\n")  # an event to write: Revoked, to no reader
        proc.stdin.flush()
        assert proc.wait(30) == 0, err.read_text()
    finally:
        proc.kill()
        proc.wait()
    said = err.read_text()
    assert "a drained in" in said and "Traceback" not in said and "BrokenPipe" not in said, said


def test_bad_configuration_exits_2_with_the_rule() -> None:
    result = run_elect("member", "memory://g?revoke_timeout=-1")
    assert result.returncode == 2 and "revoke_timeout: must be > 0" in result.stderr
    result = run_elect("member", "nosuch://g")
    assert result.returncode == 2 and "known schemes" in result.stderr


def test_member_from_a_yaml_file(tmp_path: Path) -> None:
    config = tmp_path / "m.yaml"
    config.write_text("elector: memory\ngroup: y\nroles: [a]\nmember: from-yaml\n")
    m = MemberProcess("", "from-yaml", [], log_dir=tmp_path, extra_args=["--config", str(config)])
    m._argv.remove("")
    m.start()
    try:
        line = m.log.wait_for(lambda line: line["event"] == "acquired", 60)
        assert line["member"] == "from-yaml" and line["role"] == "a"
    finally:
        m.stop()


def test_watch_builds_the_table_from_event_lines(tmp_path: Path) -> None:
    lines = [
        '{"ts": 1, "mono": 1.0, "member": "a", "role": "r", "event": "acquired", "token": 1}',
        '{"ts": 2, "mono": 2.0, "member": "a", "role": "r", "event": "fenced", "token": 1, "until": 1.5}',
        '{"ts": 2, "mono": 2.1, "member": "b", "role": "r", "event": "acquired", "token": 2}',
        '{"ts": 2, "mono": 2.2, "member": "c", "role": "s", "event": "acquired", "token": 1}',
        '{"ts": 2, "mono": 2.3, "member": "d", "role": "s", "event": "acquired", "token": 2}',
    ]
    table = LeaderTable()
    for line in lines:
        table.apply(parse_line(line))
    assert table.rows == {"r": {"b": (2, 2.1)}, "s": {"c": (1, 2.2), "d": (2, 2.3)}}
    assert "OVERLAP" in table.render(now=3.0)
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run_elect("watch", "--once", str(path))
    assert result.returncode == 0 and "OVERLAP" in result.stdout and "5 changes" in result.stdout


def test_schemes_lists_memory() -> None:
    result = run_elect("schemes")
    assert result.returncode == 0 and "memory://" in result.stdout


def test_schemes_lists_only_the_options_a_scheme_takes() -> None:
    """kubernetes:// inherits the lease methods' security options but has no password login and is HTTPS only:
    its table leaves those out (they are refused if given) and keeps its own."""
    result = run_elect("schemes", "kubernetes")
    names = {line.split()[0] for line in result.stdout.splitlines()[1:] if not line.strip().startswith("URL")}
    assert result.returncode == 0 and {"token_file", "kubeconfig", "ttl", "ca"} <= names
    assert not names & {"user", "password_file", "password_env", "tls"}, names
    assert "user" in {line.split()[0] for line in run_elect("schemes", "etcd").stdout.splitlines()[1:]}


def test_leader_table_follows_what_an_observer_reads() -> None:
    table = LeaderTable()
    table.sync([Claim("0", "a", 3), Claim("1", "b", None)], now=1.0)
    table.sync([Claim("0", "a", 3), Claim("1", "c", None)], now=2.0)  # 1 moved to c; 0 unchanged since 1.0
    assert table.rows == {"0": {"a": (3, 1.0)}, "1": {"c": (None, 2.0)}}
    table.sync([Claim("0", "a", 7)], now=3.0)  # a new token is a new leadership; 1 is now unled
    assert table.rows == {"0": {"a": (7, 3.0)}, "1": {}}
    text = table.render(now=4.0)
    assert "7" in text and "-" in text and "changes" in text


def test_watch_refuses_a_url_of_a_method_without_a_store() -> None:
    result = run_elect("watch", "--once", "memory://g")
    assert result.returncode != 0 and "event lines" in result.stderr


def test_the_started_line_names_a_few_roles_and_counts_many() -> None:
    from elect_cli.member import _roles_said

    assert _roles_said(["b", "a"]) == "roles ['a', 'b']"
    said = _roles_said(str(i) for i in range(6000))
    assert said.startswith("6000 roles ['0', '1', '10',") and said.endswith("...") and len(said) < 120


def test_a_member_freezes_its_heap_at_start_and_once_its_leaderships_settle() -> None:
    """`elect member` keeps the objects of its start-up out of the cyclic collector's full scans (a 6,000-role
    member's took up to 310 ms): frozen at start, and again once its own events have been quiet for a while, not
    before."""
    import gc

    from elect.events import Acquired
    from elect.roles import parse_role
    from elect_cli.member import _HeapFreeze

    try:
        heap = _HeapFreeze(quiet=60.0)
        at_start = gc.get_freeze_count()
        assert at_start > 0
        heap(Acquired(parse_role("r"), "m0", 1))
        made = [[i] for i in range(1000)]  # containers made after the start are collectable, not frozen
        heap.poll()
        assert not heap.frozen and gc.get_freeze_count() == at_start
        heap.last -= 61.0  # as if its events had been quiet for longer than `quiet`
        heap.poll()
        assert heap.frozen and gc.get_freeze_count() >= at_start + len(made)
    finally:
        gc.unfreeze()


def test_a_yaml_typo_names_the_file_the_line_and_the_closest_key(tmp_path: Path) -> None:
    config = tmp_path / "elect.yaml"
    config.write_text("elector: memory\ngroup: g\nmember: a\nrole: [x]\n")
    result = run_elect("member", "--config", str(config))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{config}:4: unknown key 'role' (did you mean 'roles'?)" in result.stderr, result.stderr
    assert "a configuration takes elector, url, member, id, roles, require, options" in result.stderr


def test_a_member_without_roles_says_so(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "elect", "member", "memory://none", "--id", "a", "--control"],
                            input="stop\n", capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "contends for no roles" in result.stderr, result.stderr
    assert '"confirmed": false' in result.stderr and "led nothing" in result.stderr


def test_schemes_says_what_each_option_does_in_columns() -> None:
    result = run_elect("schemes", "etcd://")  # the scheme as a URL's head is taken too
    assert result.returncode == 0, result.stderr
    ttl = next(line for line in result.stdout.splitlines() if line.split()[0] == "ttl")
    assert "silence after which a holder's key may be taken over" in ttl
    lines = run_elect("schemes", "raft").stdout.splitlines()[1:]
    rows = [line for line in lines if not line.lstrip().startswith("URL")]
    starts = {line.find("'balanced'") for line in rows if line.split()[0] == "priority"} | \
        {line.find("''") for line in rows if line.split()[0] == "listen"}  # the default column, two rows
    assert len(starts) == 1 and -1 not in starts, "one column start (priority's type once broke the columns)"


def test_version() -> None:
    result = run_elect("--version")
    assert result.returncode == 0 and result.stdout.startswith("elect ")


def test_leader_table_ages_holders_from_the_record_where_the_store_keeps_one() -> None:
    table = LeaderTable()
    table.sync([Claim("0", "a", 3, since_ts=1000.0), Claim("1", "b", 4)], now=50.0, wall=1012.5)
    text = table.render(now=50.0)
    row0 = next(line for line in text.splitlines() if line.startswith("0 "))
    row1 = next(line for line in text.splitlines() if line.startswith("1 "))
    assert row0.rstrip().endswith("12.5s") and row1.rstrip().endswith("?")  # no store time, seen just now: unknown
    assert table.render(now=53.0).splitlines()[2].rstrip().endswith(">3.0s")  # at least since the watch saw it
    empty = LeaderTable()
    empty.sync([], now=1.0)
    assert not empty.rows
