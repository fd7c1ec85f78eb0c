"""The harness: elect's methods and the anchors as real member processes, struck by real faults, judged by one
checker, measured and reported (`elect bench`, `elect soak`); and the seeded simulation of every core
(`elect_bench.simulation`). Where to start: `suite.py` runs a scenario, `trial.py` one trial of it, `faults/` the
faults, `checker.py` and `measures.py` the judging; docs/architecture.md has a row for every module."""
