"""A run cut short goes on from its checkpoint: the trials it has are kept, the rest are run, and a checkpoint
of another scenario is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from elect.errors import ConfigError
from elect_bench import scenario, suite
from elect_bench.provenance import Provenance

pytestmark = pytest.mark.infra


class Cut(Exception):
    """The session ending mid-run."""


def test_a_resumed_run_keeps_its_trials_and_runs_the_rest(tmp_path: Path) -> None:
    chosen = scenario.load({"methods": ["etcd"], "faults": ["kill"], "trials": 2, "roles": 2})
    saved: list[dict[str, Any]] = []

    def checkpoint(so_far: suite.RunResult) -> None:
        saved.append(json.loads(json.dumps(so_far.to_json(), default=str)))
        raise Cut

    with pytest.raises(Cut):
        suite.run(chosen, tmp_path / "first", lambda *_: None, command="elect bench", checkpoint=checkpoint)
    (first,) = saved[0]["trials"]
    result = suite.run(chosen, tmp_path / "second", lambda *_: None, command="elect bench --resume",
                       resume=saved[0])
    trials = result.cells[0].trials
    assert [t.trial for t in trials] == [0, 1]
    assert trials[0].history == first["history"]  # kept as it was, not run again
    assert result.made.command == "elect bench (resumed: elect bench --resume)"
    assert result.made.started == saved[0]["started"] and result.made.seconds > saved[0]["seconds"]


def test_a_checkpoint_of_another_scenario_is_refused(tmp_path: Path) -> None:
    chosen = scenario.load({"methods": ["etcd"], "faults": ["kill"], "trials": 2})
    other = suite.RunResult(scenario.load({"methods": ["etcd"], "faults": ["kill"], "trials": 3}), [], {},
                            Provenance("x", 0.0, 1.0)).to_json()
    with pytest.raises(ConfigError, match="trials"):
        suite.run(chosen, tmp_path, lambda *_: None, resume=json.loads(json.dumps(other, default=str)))
