"""`Elector.metrics` on memory:// and a test driver, and a real `elect member` serving them over HTTP."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hand_driven import HandDriven
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import elect
from elect.base import TIMINGS_KEPT
from elect.errors import MissingExtra
from elect.member_reports import LEADER, METRICS
from elect.metrics import FAILOVER, FENCE_LAG, LEADER_GAUGE, RENEWAL, STEP, Metrics, MetricsObserver
from elect_bench.members import MemberProcess
from elect_cluster.waiting import wait_until

_groups = itertools.count()

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def group_url() -> str:
    return f"memory://metrics-{next(_groups)}-{time.monotonic_ns()}"


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def samples(metrics: Metrics) -> Samples:
    return parse(generate_latest(metrics.registry).decode())


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def test_the_gauge_counters_and_failover_follow_a_handover() -> None:
    url = group_url()
    a, b = elect.connect(url, ["r", "s"], member="a"), elect.connect(url, ["r", "s"], member="b")
    ma, mb = a.metrics(), b.metrics()
    assert ma.registry is not mb.registry  # a registry per elector
    with a:
        wait_until(lambda: a.leading() == {"r", "s"}, 10, what="a leads both roles")
        with b:
            a.resign("r")
            wait_until(lambda: b.is_leader("r"), 10, what="b takes r over")
            sa, sb = samples(ma), samples(mb)
            assert value(sa, LEADER_GAUGE, member="a", role="r") == 0
            assert value(sa, LEADER_GAUGE, member="a", role="s") == 1
            assert value(sb, LEADER_GAUGE, member="b", role="r") == 1
            assert value(sb, LEADER_GAUGE, member="b", role="s") == 0
            assert value(sa, "elect_transitions_total", member="a", role="r", kind="acquired") == 1
            assert value(sa, "elect_transitions_total", member="a", role="r", kind="revoked") == 1
            assert value(sb, "elect_transitions_total", member="b", role="r", kind="acquired") == 1
            # b saw r without a leader during the handover, then acquired it: one failover, timed
            assert value(sb, FAILOVER + "_count", member="b") == 1
            assert 0 <= value(sb, FAILOVER + "_sum", member="b") < 5  # type: ignore[operator]
            assert value(sa, FAILOVER + "_count", member="a") == 0  # a never took over from anyone
            assert value(sa, RENEWAL + "_count", member="a") is None  # memory does not renew: no such histogram
    assert "elect_leader" not in generate_latest(REGISTRY).decode()  # never the process-wide default registry


def test_several_electors_of_one_member_id_in_one_process_do_not_clash() -> None:
    electors = [elect.connect(group_url(), ["r"], member="a") for _ in range(3)]
    for e in electors:
        e.metrics()
        e.start()
    try:
        wait_until(lambda: all(e.is_leader("r") for e in electors), 10, what="each leads r in its own group")
        assert all(value(samples(e.metrics()), LEADER_GAUGE, member="a", role="r") == 1 for e in electors)
        assert electors[0].metrics() is electors[0].metrics()  # made once
    finally:
        for e in electors:
            e.stop()


def test_metrics_made_while_leading_count_the_current_leaderships_and_follow_the_roles() -> None:
    e = elect.connect(group_url(), ["r"], member="a")
    with e:
        wait_until(lambda: e.is_leader("r"), 10, what="a leads r")
        m = e.metrics()
        assert value(samples(m), LEADER_GAUGE, member="a", role="r") == 1
        e.add_roles(["t"])
        wait_until(lambda: e.is_leader("t"), 10, what="a leads t")
        e.remove_roles(["r"])
        wait_until(lambda: not e.is_leader("r"), 10, what="r handed over")
        found = samples(m)
        assert value(found, LEADER_GAUGE, member="a", role="t") == 1
        assert value(found, LEADER_GAUGE, member="a", role="r") is None  # no longer contended for: the series goes
        assert value(found, "elect_transitions_total", member="a", role="r", kind="revoked") == 1


class Renewing(HandDriven):
    """Leaderships with deadlines, renewals reported by hand."""

    renewal = "what a test says a renewal took"


def test_a_fence_is_counted_with_its_lag_and_renewals_where_the_method_renews() -> None:
    e = Renewing("a", ["r"])
    m = e.metrics()
    e.start()
    try:
        e._acquire("r", 3, time.monotonic() + 0.1)
        e._renewed(0.004)
        wait_until(lambda: value(samples(m), LEADER_GAUGE, member="a", role="r") == 0, 10,
                   what="the fence at the deadline")
        found = samples(m)
        assert value(found, "elect_transitions_total", member="a", role="r", kind="fenced") == 1
        assert value(found, FENCE_LAG + "_count", member="a") == 1
        assert 0 <= value(found, FENCE_LAG + "_sum", member="a") < 5  # type: ignore[operator]
        assert value(found, RENEWAL + "_count", member="a") == 1
        assert value(found, RENEWAL + "_sum", member="a") == pytest.approx(0.004)
        assert value(found, FAILOVER + "_count", member="a") is None  # cannot see leaders: not measured
    finally:
        e.stop()


class Timed(HandDriven):
    """A method that times the steps of its handovers."""

    steps = (("asked_to_done", "what a test says a step took"),)


def test_the_steps_a_method_times_are_kept_and_exported_per_step() -> None:
    e = Timed("a", ["r"])
    e._timed("asked_to_done", 0.25)  # before the metrics are made: kept all the same
    m = e.metrics()
    for _ in range(TIMINGS_KEPT + 1):
        e._timed("asked_to_done", 0.5)
    kept = e.timings()["asked_to_done"]
    assert len(kept) == TIMINGS_KEPT and set(kept) == {0.5}  # the latest only
    found = samples(m)
    assert value(found, STEP + "_count", member="a", step="asked_to_done") == TIMINGS_KEPT + 1
    assert value(found, STEP + "_sum", member="a", step="asked_to_done") == pytest.approx(0.5 * (TIMINGS_KEPT + 1))
    assert Renewing("b", ["r"]).timings() == {}


def test_metrics_without_prometheus_client_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if not installed
    with pytest.raises(MissingExtra, match=r"pip install 'elect\[metrics\]'"):
        elect.connect(group_url(), ["r"], member="a").metrics()


def test_serving_in_process_on_a_port_the_os_chooses() -> None:
    e = elect.connect(group_url(), ["r"], member="a")
    m = e.metrics()
    port = m.serve(0)
    try:
        with e:
            wait_until(lambda: e.is_leader("r"), 10, what="a leads r")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                assert value(parse(response.read().decode()), LEADER_GAUGE, member="a", role="r") == 1
    finally:
        m.close()


def run_elect(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elect", *args], capture_output=True, text=True, timeout=timeout)


def test_a_member_process_serves_its_metrics_over_http_and_watch_reads_them(tmp_path: Path) -> None:
    m = MemberProcess(group_url(), "a", ["x", 3], log_dir=tmp_path,
                      extra_args=["--metrics-port", "0", "--observe"])
    m.start()
    try:
        report = wait_until(lambda: m.reports(METRICS), 60, what="the metrics port on stderr")[0]
        assert report["port"] > 0 and report["url"] == f"http://127.0.0.1:{report['port']}/metrics"
        wait_until(lambda: m.log.leading() == {"x", "3"}, 60, what="a leads both roles")

        def scrape() -> Samples:
            with urllib.request.urlopen(report["url"], timeout=10) as response:
                assert response.status == 200
                return parse(response.read().decode())

        wait_until(lambda: value(scrape(), LEADER_GAUGE, member="a", role="x") == 1, 30, what="x's leader gauge")
        m.resign("x")  # the only member: it hands x over to nobody, then takes it back
        m.log.wait_for(lambda line: line["role"] == "x" and line["token"] == 2, 30, what="x re-acquired")

        def acquired_twice() -> Samples | None:
            found = scrape()
            twice = value(found, "elect_transitions_total", member="a", role="x", kind="acquired") == 2
            return found if twice else None

        found = wait_until(acquired_twice, 30, what="two acquisitions of x counted")
        assert value(found, "elect_transitions_total", member="a", role="x", kind="revoked") == 1
        assert value(found, LEADER_GAUGE, member="a", role="3") == 1
        # --observe: the member saw itself lead, then nobody during its own resign, then itself again (reported on
        # stderr by another subscriber than the metrics': they may come after the counters moved)

        def seen() -> list[tuple[str | None, int | None]]:
            return [(r["leader"], r["token"]) for r in m.reports(LEADER) if r["role"] == "x"]

        wait_until(lambda: len(seen()) >= 3, 30, what="three leader changes of x reported")
        assert seen() == [("a", 1), (None, None), ("a", 2)], seen()

        table = run_elect("watch", "--metrics", f"127.0.0.1:{report['port']}", "--once")
        assert table.returncode == 0, table.stderr
        rows = {line.split()[0]: line.split()[1] for line in table.stdout.splitlines()[1:-1]}
        assert rows == {"3": "a", "x": "a"}, table.stdout
        m.stop()
        assert m.returncode == 0, m.stderr_tail()
    finally:
        m.kill()


def test_watch_metrics_names_what_it_cannot_read(tmp_path: Path) -> None:
    from elect_cluster.ports import free_port

    dead = f"127.0.0.1:{free_port()}"
    result = run_elect("watch", "--metrics", dead, "--once")
    assert result.returncode == 3 and f"metrics at http://{dead}/metrics" in result.stderr
    result = run_elect("watch", "--metrics", "nonsense", "--once")
    assert result.returncode == 2 and "--metrics: expected HOST:PORT" in result.stderr
    result = run_elect("watch", "--metrics", dead, "memory://g")
    assert result.returncode == 2 and "not both" in result.stderr


def test_a_metrics_observer_keeps_the_endpoints_it_can_read() -> None:
    e = elect.connect(group_url(), ["r", "s"], member="a")
    m = e.metrics()
    port = m.serve(0)
    from elect_cluster.ports import free_port

    try:
        with e:
            wait_until(lambda: e.leading() == {"r", "s"}, 10, what="a leads both")
            e.remove_roles(["s"])
            e.add_roles(["s"])  # contended again, maybe not yet led: a row either way
            observer = MetricsObserver([f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}"])
            claims = observer.claims(5)
            assert {c.role for c in claims} <= {"r", "s"} and ("r", "a") in {(c.role, c.member) for c in claims}
            assert observer.roles == {"r", "s"} and "Connection refused" in observer.note
    finally:
        m.close()


def test_member_observe_on_a_method_that_cannot_exits_2_with_why() -> None:
    from elect_cluster.ports import free_port

    a, b = free_port(), free_port()
    result = run_elect("member", f"pysyncobj://a@127.0.0.1:{a}?peers=b@127.0.0.1:{b}&partitions=1", "--observe")
    assert result.returncode == 2 and "pysyncobj:// cannot observe who leads" in result.stderr, result.stderr
