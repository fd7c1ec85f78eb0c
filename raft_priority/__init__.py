"""Raft leader election per partition (multi-raft) with ZEP006 priority decay, as a pure core.

Layers, each usable alone:

* :mod:`raft_priority.core` -- :class:`RaftGroup`, one member of one election group: a state machine
  fed messages and ticks (``now`` in seconds) whose output accumulates into an `elect.core.Ready`
  (hard state to persist, leadership changes, messages, leaders seen), with ``next_tick``, when to
  tick it again. No I/O, clocks or threads.
* :mod:`raft_priority.host` -- :class:`NodeHost`, all groups of one node behind one lazy timer heap
  and one accumulator: the node's `elect.core.Core`.
* :mod:`raft_priority.priorities` -- :func:`assign_priorities`: members and priorities per partition.
* :mod:`raft_priority.storage` -- :class:`HardStateLog`: term and vote of every group of a node, one fsync per save.

The deterministic simulator that runs this core on virtual time lives in :mod:`elect_bench.simulation`.

The ``raft://`` elector is built on top (imported only when used, so ``import raft_priority`` needs no
grpc): :mod:`raft_priority.options` (URL options, light), :mod:`raft_priority.wire.codec` (core
messages <-> ``proto/raft.proto`` batches), :mod:`raft_priority.grpc_link` (the gRPC server and
per-peer streams), :mod:`raft_priority.outbox` (batches per peer, deferred acknowledgements, held
TimeoutNows), :mod:`raft_priority.elector` (``RaftElector``, on the library's one driver loop,
:mod:`elect.driver`), :mod:`raft_priority.plugin` (the ``raft`` entry point).

The driver loops: receive a batch of messages -> ``host.step_all``; at ``host.next_wakeup()`` ->
``host.tick``; then take ``host.ready()`` and handle it in order: persist, apply the changes, send.
"""

from raft_priority.config import GroupSpec, PriorityMode, RaftConfig
from raft_priority.core import RaftGroup, RaftState
from raft_priority.host import NodeHost
from raft_priority.messages import (
    HardState,
    Heartbeat,
    HeartbeatResponse,
    Message,
    PreVoteRequest,
    PreVoteResponse,
    TimeoutNow,
    VoteRequest,
    VoteResponse,
)
from raft_priority.priorities import assign_priorities
from raft_priority.storage import HardStateLog

__all__ = [
    "GroupSpec",
    "HardState",
    "HardStateLog",
    "Heartbeat",
    "HeartbeatResponse",
    "Message",
    "NodeHost",
    "PreVoteRequest",
    "PreVoteResponse",
    "PriorityMode",
    "RaftConfig",
    "RaftGroup",
    "RaftState",
    "TimeoutNow",
    "VoteRequest",
    "VoteResponse",
    "assign_priorities",
]
