"""Scenario files of every kind: fault names become fault objects, and each kind reads its own keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from elect.errors import ConfigError
from elect_bench import scenario
from elect_bench.faults import fault
from elect_bench.idle import IdleScenario
from elect_bench.neli_depth import Handover, NeliScenario


def test_fault_names_become_fault_objects() -> None:
    chosen = scenario.load({"methods": "etcd", "faults": "kill, cut"})
    assert chosen.faults == (fault("kill"), fault("cut"))
    assert chosen.on_hosts  # a cut needs network-namespace hosts
    assert not scenario.load({"methods": ["etcd"], "faults": ["pause"]}).on_hosts
    with pytest.raises(ConfigError, match="unknown fault 'crash'"):
        scenario.load({"faults": ["crash"]})
    with pytest.raises(ConfigError, match="a fault needs at least 2 members"):
        scenario.load({"faults": ["stop"], "members": 1})
    assert scenario.load({"faults": ["none"], "members": 1}).members == 1


def test_every_bundled_scenario_has_a_kind_its_runner_reads() -> None:
    kinds = {name: scenario.kind(scenario.read(name))
             for name in ("default", "demo", "infra", "lease", "load", "raft", "sim", "idle", "neli", "envelope")}
    assert kinds == {"default": "trials", "demo": "trials", "infra": "trials", "lease": "trials", "load": "trials",
                     "raft": "trials", "sim": "simulation", "idle": "idle", "neli": "neli", "envelope": "envelope"}
    idle = IdleScenario.from_mapping(scenario.read("idle"))
    assert idle.partitions == (100, 1000, 10000) and idle.methods == ("raft", "raft-loud")
    neli = NeliScenario.from_mapping(scenario.read("neli"))
    assert neli.cells[-1] == Handover("kafka-full", fault("pause"), (("heartbeat_timeout", "3.5"),))
    assert neli.cells[-1].as_method.name == "kafka-full heartbeat_timeout=3.5"
    assert neli.rebalance == (fault("kill"), fault("stop")) and neli.base.needs == ("kafka",)
    with pytest.raises(ConfigError, match="idle scenario"):
        scenario.load("idle")
    with pytest.raises(ConfigError, match="unknown scenario kind"):
        scenario.kind({"kind": "soak"})


def test_the_bundled_names_are_the_shipped_files_and_an_unknown_one_lists_them() -> None:
    shipped = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "bench").glob("*.yaml"))
    assert scenario.bundled() == shipped
    assert all(scenario.kind(scenario.read(name)) in scenario.KINDS for name in shipped)
    with pytest.raises(ConfigError, match="bundled: anchors, anchors-load, default"):
        scenario.read("nosuch")


def test_kinds_reject_what_they_cannot_run() -> None:
    with pytest.raises(ConfigError, match="use infrastructure"):
        IdleScenario.from_mapping({"kind": "idle", "methods": ["etcd"]})
    with pytest.raises(ConfigError, match="unknown idle scenario key"):
        IdleScenario.from_mapping({"kind": "idle", "faults": ["kill"]})
    with pytest.raises(ConfigError, match="METHOD FAULT"):
        NeliScenario.from_mapping({"cells": ["kafka-fast"]})
    with pytest.raises(ConfigError, match="bare consumers"):
        NeliScenario.from_mapping({"cells": ["kafka-fast kill"], "rebalance": ["cut"]})
    with pytest.raises(ConfigError, match="need a kafka method"):
        NeliScenario.from_mapping({"cells": ["etcd kill"], "rebalance": ["kill"]})


def test_the_secure_scenario_runs_plain_and_secured_methods_on_two_clusters() -> None:
    from elect_bench.methods import METHODS, Group
    from elect_cluster.endpoints import Endpoints

    secure = scenario.load("secure")
    assert secure.plain_needs == ("etcd", "zookeeper", "kafka", "kubernetes") == secure.secure_needs
    assert [m for m in secure.methods if METHODS[m].secure] == ["etcd-tls", "zookeeper-tls", "kafka-fast-sasl",
                                                                 "kubernetes-secure"]
    with pytest.raises(ConfigError, match="TLS, which the relays that count requests cannot read"):
        scenario.load({"methods": ["etcd-tls"], "meter": True})
    with pytest.raises(ConfigError, match=r"HTTPS .*kube_requests\.py"):  # the Kubernetes API is never plain
        scenario.load({"methods": ["kubernetes"], "meter": True})
    with pytest.raises(ConfigError, match="plain cluster only"):
        scenario.load({"methods": ["etcd-tls"], "faults": ["infra"], "store_members": 3})
    plain = Endpoints(etcd=("h:1",))
    with pytest.raises(ValueError, match="secured etcd"):
        METHODS["etcd-tls"].member_urls(Group(("a",), 2, "g", plain), 1.0)
    secured = Endpoints(etcd=("h:2",), security=(("ca", "/s/ca.crt"), ("user", "elect"),
                                                  ("password_file", "/s/elect.password")))
    urls = METHODS["etcd-tls"].member_urls(Group(("a",), 2, "g", Endpoints(etcd=("h:1",), secured=secured)), 1.0)
    from urllib.parse import unquote

    assert urls["a"].startswith("etcd://h:2/g?") and "password_file=/s/elect.password" in unquote(urls["a"])
    assert "ttl=1" in urls["a"]
    kube = Endpoints(kubernetes=("h:4",), kubeconfig="/s/member.kubeconfig", security=secured.security)
    urls = METHODS["kubernetes-secure"].member_urls(
        Group(("a",), 2, "g", Endpoints(kubernetes=("h:3",), secured=kube)), 1.0)
    assert urls["a"].startswith("kubernetes://h:4/default?")  # the secured cluster's API server
    assert "kubeconfig=/s/member.kubeconfig" in unquote(urls["a"]) and "password" not in urls["a"]  # HTTPS, a token


def test_an_envelope_runs_cuts_through_its_base_point() -> None:
    """The envelope's points: the base, then each axis's values with every other axis at the base (not the
    product); a method held below a limit on an axis does not run past it, and says why."""
    from elect_bench.envelope import EnvelopeScenario, Point

    env = EnvelopeScenario.from_mapping({"methods": ["etcd", "raft"], "budget": 1.0, "roles": 6, "members": 3,
                                         "rest": 5, "sweep": {"budget": [0.5, 1.0], "roles": [60, 600],
                                                              "busy": [2]},
                                         "limits": {"raft": {"roles": 60}}, "why": {"raft": "too slow here"}})
    assert env.points() == [Point(1.0, 6, 3, 0), Point(0.5, 6, 3, 0), Point(1.0, 60, 3, 0), Point(1.0, 600, 3, 0),
                            Point(1.0, 6, 3, 2)]
    assert [env.axis_of(p) for p in env.points()] == ["base", "budget", "roles", "roles", "busy"]
    # its JSON reads back equal (a resumed run compares the checkpoint's scenario with this)
    floored = EnvelopeScenario.from_mapping({"methods": ["etcd"], "rest": 5,
                                             "floor": {"budgets": [0.1, 1], "busy": [0, 2]}})
    assert json.loads(json.dumps(floored.to_json())) == floored.to_json()
    assert env.held("raft", Point(1.0, 600, 3, 0)) == "roles above 60: too slow here"
    assert env.held("etcd", Point(1.0, 600, 3, 0)) is None
    # a budget a method's members refuse is not run either, and the refusal says why
    neli = EnvelopeScenario.from_mapping({"methods": ["kafka-fast", "kafka-fast-848"], "rest": 5,
                                          "sweep": {"budget": [0.5]}})
    refused = neli.held("kafka-fast", Point(0.5, 6, 3, 0))
    assert refused is not None and refused.startswith("refuses D = 0.5 s: session_timeout: the classic group")
    assert neli.held("kafka-fast", Point(1.0, 6, 3, 0)) is None and neli.held("kafka-fast-848", Point(0.5, 6, 3, 0)) \
        is None
    assert scenario.kind({"sweep": {"roles": [6]}}) == "envelope"
    # `--methods` may run fewer methods than the file's limits name; a limit of no known method is a typo
    only = EnvelopeScenario.from_mapping({"methods": ["etcd"], "rest": 5, "limits": {"raft": {"roles": 60}}})
    assert only.held("etcd", Point(1.0, 600, 3, 0)) is None
    with pytest.raises(ConfigError, match="raftt"):
        EnvelopeScenario.from_mapping({"methods": ["etcd"], "rest": 5, "limits": {"raftt": {"roles": 60}}})
    bundled = EnvelopeScenario.from_mapping(scenario.read("envelope"))
    assert bundled.floor is not None and bundled.floor.rest == 600 and bundled.cost > 0
    assert {p.roles for p in bundled.points()} == {6, 60, 600, 6000}
    with pytest.raises(ConfigError, match="unknown sweep axis"):
        EnvelopeScenario.from_mapping({"rest": 5, "sweep": {"partitions": [6]}})
    with pytest.raises(ConfigError, match="rest"):
        EnvelopeScenario.from_mapping({"sweep": {"roles": [6]}})


def test_false_failovers_count_per_member_hour_at_rest() -> None:
    from elect_bench.cell_measures import false_failovers
    from elect_bench.trial import TrialResult

    trials = [TrialResult("etcd", "kill", 0, True, members=3, rest=600.0, rest_changes=2),
              TrialResult("etcd", "kill", 1, True, members=3, rest=600.0, rest_changes=0)]
    assert false_failovers(trials) == pytest.approx(2 / 1.0)  # 2 ends over 3 members x 1,200 s = 1 member-hour
    assert math.isnan(false_failovers([]))


def test_an_envelope_cut_short_gets_the_report_of_its_checkpoint_saying_what_did_not_run(tmp_path: Path) -> None:
    from elect_bench import envelope, report
    from elect_bench.envelope import EnvelopeScenario

    env = EnvelopeScenario.from_mapping({"methods": ["etcd"], "rest": 5, "trials": 1, "faults": ["kill"],
                                         "floor": {"budgets": [1.0], "busy": [0]}, "cost": 5})
    saved = {"scenario": env.to_json(), "command": "elect bench tiny.yaml", "started": 0.0, "seconds": 12.0,
             "load": [], "trials": {}, "floor": [], "cost_trials": [], "kafka_broker": ""}
    result = envelope.run(env, tmp_path, lambda *_: None, resume=saved, report_only=True)
    assert result.cut_short and result.made.seconds == 12.0
    missing = result.missing()
    assert len(missing) == 3 and missing[0].endswith("/ etcd / kill: 0 of 1 trials")
    assert missing[1:] == ["the floor of etcd: no budget held through all its windows (not all run)",
                           "the cost of etcd: not run"]
    _, md = report.write(result, tmp_path / "out", [])
    assert "**Cut short**" in md.read_text()
    # a budget held idle but whose busy window never ran is not a floor
    from elect_bench.envelope import FloorRun
    from elect_bench.trial import TrialResult

    busy = EnvelopeScenario.from_mapping({"methods": ["etcd"], "rest": 5, "floor": {"budgets": [1.0], "busy": [0, 2]}})
    cut = envelope.run(busy, tmp_path, lambda *_: None, resume=saved | {"scenario": busy.to_json()}, report_only=True)
    cut.floor.append(FloorRun("etcd", 1.0, 0, 5.0, "hold", TrialResult("etcd", "none", 0, True)))
    assert cut.floors() == {"etcd": None}
    cut.floor.append(FloorRun("etcd", 1.0, 2, 5.0, "hold", TrialResult("etcd", "none", 0, True)))
    assert cut.floors() == {"etcd": 1.0}
    with pytest.raises(ConfigError, match="needs the checkpoint"):
        envelope.run(env, tmp_path, lambda *_: None, report_only=True)
