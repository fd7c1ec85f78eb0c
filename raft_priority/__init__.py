"""Raft leader election per partition (multi-raft) with ZEP006 priority decay, as a pure core.

Layers, each usable alone:

* :mod:`raft_priority.core` -- :class:`RaftGroup`, one member of one election group: a state machine
  fed messages and ticks (``now`` in seconds), producing an :class:`Output` (hard state to persist,
  leadership changes, messages) and a ``deadline`` for the next tick. No I/O, clocks or threads.
* :mod:`raft_priority.host` -- :class:`NodeHost`, all groups of one node behind one lazy timer heap.
* :mod:`raft_priority.priorities` -- :func:`assign_priorities`: members and priorities per partition.
* :mod:`raft_priority.storage` -- :class:`HardStateStore`: fsynced term/vote per group.

The deterministic simulator that runs this core on virtual time lives in :mod:`elect_bench.simulation`.

The ``raft://`` elector is built on top (imported only when used, so ``import raft_priority`` needs no
grpc): :mod:`raft_priority.options` (URL options, light), :mod:`raft_priority.transport` (wire codec for
``proto/raft.proto``, per-peer gRPC streams, the driver thread), :mod:`raft_priority.elector`
(``RaftElector``), :mod:`raft_priority.plugin` (the ``raft`` entry point).

A driver (gRPC transport, the ``raft://`` elector) loops: receive a batch of messages ->
``host.step_all``; at ``host.next_deadline()`` -> ``host.tick``; after each call handle the Output:
persist, deliver changes, then send (see :class:`Output`).
"""

from raft_priority.config import GroupSpec, PriorityMode, RaftConfig
from raft_priority.core import RaftGroup, Role
from raft_priority.host import NodeHost
from raft_priority.messages import (
    HardState,
    Heartbeat,
    HeartbeatResponse,
    LeaderHint,
    LeadershipChange,
    Message,
    Output,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from raft_priority.priorities import assign_priorities
from raft_priority.storage import HardStateStore

__all__ = [
    "GroupSpec",
    "HardState",
    "HardStateStore",
    "Heartbeat",
    "HeartbeatResponse",
    "LeaderHint",
    "LeadershipChange",
    "Message",
    "NodeHost",
    "Output",
    "PreVoteRequest",
    "PreVoteResponse",
    "PriorityMode",
    "RaftConfig",
    "RaftGroup",
    "Role",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
    "assign_priorities",
]
