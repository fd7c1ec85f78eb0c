"""The `raft://` and `pysyncobj://` entry points: light objects that import neither grpc nor pysyncobj."""

from __future__ import annotations

from elect.registry import Plugin
from raft_priority.options import PySyncObjOptions, RaftOptions

PLUGIN = Plugin(
    scheme="raft",
    summary="Raft election per partition over gRPC, ZEP006 priority decay with balanced priorities "
            "(priority=balanced|zeebe|off)",
    options=RaftOptions,
    factory="raft_priority.elector:create",
    url_parts={"hosts": "listen"},
    extra="raft",
    requires=("grpc", "google.protobuf"),
    member_required=True,
)

PYSYNCOBJ = Plugin(
    scheme="pysyncobj",
    summary="baseline: PySyncObj (an independent Raft), one SyncObj per partition",
    options=PySyncObjOptions,
    factory="raft_priority.pysyncobj_elector:create",
    url_parts={"hosts": "listen"},
    extra="pysyncobj",
    requires=("pysyncobj",),
    member_required=True,
)
