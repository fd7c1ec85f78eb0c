"""A fenced resource for the benchmark: a store that refuses writes carrying a stale fencing token, a
workload that writes to it from every member while it believes it leads, and a checker of what was written.

- `store`: the server, run as its own process (`python -m elect_bench.fenced.store`);
- `client`: one line-protocol connection to it;
- `writer`: the workload inside `elect member --write-to` (writes while the member leads a role);
- `process`: the store as a child process of the harness;
- `check`: judges the store's attempt log, its dump and the writers' acknowledgements;
- `workload`: all of it from the harness's side (start the store, flags for each member, judge, stop).

A workload is `none`, `fenced` (the store refuses stale tokens: fencing at work) or `unfenced` (the store
takes every write: what an application without fencing would see).
"""

from __future__ import annotations

WORKLOADS = ("none", "fenced", "unfenced")

__all__ = ["WORKLOADS"]
