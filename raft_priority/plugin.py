"""The `raft://` entry point: a light object that does not import grpc."""

from __future__ import annotations

from elect.registry import Plugin
from raft_priority.options import RaftOptions

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
