"""Asking a raft:// node about its cluster's membership, or to change it: one JSON request per gRPC call
(``Raft/Admin`` beside ``Raft/Deliver`` on the node's port), so `elect raft ...`, a joining node and another
member all speak to any node the same way.

Requests: ``{"op": "members"}``; ``{"op": "reconfigure", "cluster": ID, "add": {"ID": "HOST:PORT"}, "remove":
["ID"]}``. A reconfigure names the cluster it means (as members batches do), and a node that does not lead the
cluster group answers with the leader it knows of (``{"leader": ID, "address": HOST:PORT}``), where the caller asks
again. Under mutual TLS only holders of a certificate of the cluster's CA reach the port at all.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import grpc

from elect.errors import ConfigError, InfrastructureUnavailable
from raft_priority.grpc_link import ADMIN, Tls


def ask(address: str, request: dict[str, Any], timeout: float = 5.0, tls: Tls | None = None,
        peer: str | None = None, wait: bool = True) -> dict[str, Any]:
    """One request to the node at HOST:PORT; InfrastructureUnavailable if it cannot be reached in ``timeout`` (at
    once on a refused connection when not ``wait``). Under TLS the node's certificate must name ``peer``."""
    if tls is None:
        channel = grpc.insecure_channel(address)
    else:
        options = [("grpc.ssl_target_name_override", peer)] if peer else []
        channel = grpc.secure_channel(address, tls.channel(), options=options)
    try:
        call = channel.unary_unary(ADMIN, request_serializer=None, response_deserializer=None)
        raw = call(json.dumps(request).encode(), timeout=timeout, wait_for_ready=wait)
    except grpc.RpcError as exc:
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        raise InfrastructureUnavailable(f"raft node at {address} did not answer within {timeout:g} s: "
                                        f"{details or exc}") from None
    finally:
        channel.close()
    answer = json.loads(raw)
    if not isinstance(answer, dict):
        raise InfrastructureUnavailable(f"raft node at {address} answered {answer!r}, not a JSON object")
    return answer


def members(address: str, timeout: float = 5.0, tls: Tls | None = None, peer: str | None = None) -> dict[str, Any]:
    """The configuration as the node at ``address`` holds it (`RaftElector.members`)."""
    answer = ask(address, {"op": "members"}, timeout, tls, peer)
    if "error" in answer:
        raise ConfigError(f"raft node at {address}: {answer['error']}")
    return answer


def reconfigure(address: str, add: dict[str, str] | None = None, remove: list[str] | None = None,
                timeout: float = 30.0, tls: Tls | None = None, peer: str | None = None) -> dict[str, Any]:
    """Ask the cluster of the node at ``address`` to add and remove members, following the answers to the leader of
    the cluster group, and wait until the committed configuration shows the change; returns that configuration."""
    deadline = time.monotonic() + timeout
    where, first = address, peer
    cluster = members(address, timeout, tls, peer)["cluster"]
    request = {"op": "reconfigure", "cluster": cluster, "add": add or {}, "remove": remove or []}
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise InfrastructureUnavailable(f"the membership change was not committed within {timeout:g} s "
                                            f"(last asked {where})")
        try:
            answer = ask(where, request, min(left, 5.0 if where == address else 1.0), tls, peer)
        except InfrastructureUnavailable:
            if where == address:
                raise
            where, peer = address, first  # the leader it named is gone: ask again where we began
            continue
        if "error" in answer:
            raise ConfigError(f"raft node at {where}: {answer['error']}")
        if answer.get("address"):
            where = str(answer["address"])  # the cluster group's leader, as that node knows it
            peer = str(answer.get("leader") or "") or None
        conf = answer.get("members")
        if isinstance(conf, dict) and _done(conf, add or {}, remove or []):
            return conf
        time.sleep(min(0.05, max(left, 0)))  # the change is under way; the deadline bounds the wait


def _done(conf: dict[str, Any], add: dict[str, str], remove: list[str]) -> bool:
    if not conf.get("committed"):
        return False
    voters = {m["id"]: m["address"] for m in conf.get("members", []) if m.get("voter")}
    return all(voters.get(m) == a for m, a in add.items()) and not any(m in voters for m in remove)
