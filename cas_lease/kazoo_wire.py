"""What `zookeeper://` needs of ZooKeeper and of kazoo that kazoo 2.11 has no API for, in one place.

- Requests ZooKeeper 3.6 has and kazoo lacks: `AddWatch` (a persistent recursive watch) and `MultiRead` (many
  reads in one request, each answered on its own), and `multi` operations serialized once and kept
  (`Operations`), sent with `send`: kazoo's own requests go through the client's private `_call`, and so do
  these, since there is no public way to send a request kazoo does not know.
- Hooks into kazoo's connection: `hear_watch_events` (kazoo hands a watch event only to a one-shot watcher on
  that very path, so the events of a persistent watch are taken where the connection reads them),
  `hook_connect` (the session timeout the server granted, which kazoo keeps private, and why a connection
  attempt failed), and `died` (kazoo's connection thread ended by an exception inside kazoo, after which nothing
  reconnects).

Each touches kazoo's private attributes, checked where they are used, so that a kazoo without them fails at
once with a message rather than in the middle of a failover.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from cas_lease.driver import StoreError


class AddWatch:
    """ZooKeeper 3.6's addWatch request: a watch that stays (`RECURSIVE`: on every node below `path` too) and
    reports each node created, deleted or changed (`EVENTS`), never a list of children."""

    type = 106
    RECURSIVE = 1
    DELETED = 2
    EVENTS = (1, 2, 3)  # NodeCreated, NodeDeleted, NodeDataChanged

    def __init__(self, path: str, mode: int) -> None:
        self.path = path
        self.mode = mode

    def serialize(self) -> bytes:
        from kazoo.protocol.serialization import int_struct, write_string

        return bytes(write_string(self.path) + int_struct.pack(self.mode))

    @staticmethod
    def deserialize(data: bytes, offset: int) -> bool:
        return True  # the answer is its header alone

    def __repr__(self) -> str:
        return f"AddWatch({self.path!r}, mode={self.mode})"


class MultiRead:
    """ZooKeeper 3.6's multiRead request: a getData of each path, answered one by one (a node that does not exist
    fails its own read only, unlike a `multi`). The answer: per path (data, stat), or the error code of its read."""

    type = 22
    NO_NODE = -101

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytes:
        from kazoo.protocol.serialization import GetData

        return b"".join(Operations.op(GetData(path, False)) for path in self.paths) + Operations.END

    @staticmethod
    def deserialize(data: bytes, offset: int) -> list[tuple[bytes, Any] | int]:
        from kazoo.protocol.serialization import GetData, MultiHeader, ZnodeStat, int_struct, read_buffer, stat_struct

        answers: list[tuple[bytes, Any] | int] = []
        header, offset = MultiHeader.deserialize(data, offset)
        while not header.done:
            if header.type == GetData.type:
                value, offset = read_buffer(data, offset)
                answers.append((bytes(value or b""), ZnodeStat._make(stat_struct.unpack_from(data, offset))))
                offset += stat_struct.size
            else:  # an error (type -1): its code
                answers.append(int(int_struct.unpack_from(data, offset)[0]))
                offset += int_struct.size
            header, offset = MultiHeader.deserialize(data, offset)
        return answers

    def __repr__(self) -> str:
        return f"MultiRead({len(self.paths)} paths)"


class Operations:
    """`multi` operations as bytes on the wire, made once and kept. A renewal checks every role node the member
    holds, four times a second, and kazoo's `TransactionRequest` makes each check anew every time (its path joined
    and normalized, then serialized): 45 ms of Python per renewal at 2,000 roles, 18% of a core at rest."""

    #: The end of a `multi`: a header of type -1, done.
    END = b"\xff\xff\xff\xff\x01\xff\xff\xff\xff"

    def __init__(self) -> None:
        self._checks: dict[tuple[str, int], bytes] = {}

    def check(self, path: str, version: int) -> bytes:
        found = self._checks.get((path, version))
        if found is None:
            from kazoo.protocol.serialization import CheckVersion

            found = self._checks[(path, version)] = self.op(CheckVersion(path, version))
            if len(self._checks) > 100_000:  # versions only grow: old ones are not asked for again
                self._checks.clear()
        return found

    def write(self, path: str, data: bytes) -> bytes:
        from kazoo.protocol.serialization import SetData

        return self.op(SetData(path, data, -1))

    @staticmethod
    def op(op: Any) -> bytes:
        from kazoo.protocol.serialization import MultiHeader

        return bytes(MultiHeader(op.type, False, -1).serialize() + op.serialize())


def multi(operations: list[bytes]) -> Any:
    """A `multi` request of operations serialized beforehand (`Operations`), answered as kazoo's transactions."""
    from kazoo.protocol.serialization import Transaction

    class Multi:
        type = Transaction.type

        @staticmethod
        def serialize() -> bytes:
            return b"".join(operations) + Operations.END

        @staticmethod
        def deserialize(data: bytes, offset: int) -> list[Any]:
            return list(Transaction.deserialize(data, offset))

    return Multi()


def send(client: Any, request: Any) -> Any:
    """Send `request` on `client`'s connection; its pending result, as kazoo's own asynchronous calls give."""
    pending = client.handler.async_result()
    client._call(request, pending)
    return pending


def hear_watch_events(client: Any, deliver: Callable[[int, str], None]) -> None:
    """Pass every event of a persistent watch (`AddWatch.EVENTS`) to `deliver(kind, path)`, on the client's
    callback thread as kazoo's own watchers are, with the path unchrooted."""
    connection = getattr(client, "_connection", None)
    read = getattr(connection, "_read_watch_event", None)
    if read is None:
        raise StoreError("this kazoo has no ConnectionHandler._read_watch_event: cannot hear persistent watches")

    def reading(buffer: bytes, offset: int) -> Any:
        from kazoo.protocol.serialization import Watch
        from kazoo.protocol.states import Callback

        event, _ = Watch.deserialize(buffer, offset)
        if event.type in AddWatch.EVENTS:
            client.handler.dispatch_callback(Callback("watch", deliver, (event.type, client.unchroot(event.path))))
        return read(buffer, offset)

    connection._read_watch_event = reading  # type: ignore[union-attr]


def hook_connect(client: Any, granted: Callable[[float], None], failed: Callable[[str], None]) -> None:
    """Tell `granted` the session timeout (seconds) the server grants on each connection, and `failed` why an
    attempt failed. A TLS error raised while reading the server's answer would end kazoo's connection loop; it
    becomes a dropped connection, which kazoo retries."""
    connection = getattr(client, "_connection", None)
    connect = getattr(connection, "_connect", None)
    if connect is None:
        return

    def connecting(*args: Any) -> Any:
        from kazoo.exceptions import ConnectionDropped

        try:
            read_timeout, connect_timeout = connect(*args)
        except ssl.SSLError as exc:
            failed(f"{type(exc).__name__}: {exc}")
            raise ConnectionDropped(f"TLS: {exc}") from exc
        except Exception as exc:
            failed(f"{type(exc).__name__}: {exc}")
            raise
        granted(read_timeout * 1.5 / 1000.0)  # kazoo reads for 2/3 of the negotiated timeout, in ms
        return read_timeout, connect_timeout

    connection._connect = connecting  # type: ignore[union-attr]


def died(client: Any) -> bool:
    """kazoo's connection thread ended although the client was not stopped: an exception inside kazoo (seen: "xids
    do not match" after read time-outs under load) ends it, and then nothing reconnects."""
    connection = getattr(client, "_connection", None)
    stopped = getattr(connection, "connection_stopped", None)
    return client is not None and stopped is not None and stopped.is_set() and not client._stopped.is_set()
