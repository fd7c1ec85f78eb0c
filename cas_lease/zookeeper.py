"""`zookeeper://`: the lease core on ZooKeeper, with kazoo.

Layout under /PATH: `roles/<role>` (persistent; value: holder member and session while held, empty while
free; the zxid of the write that made its holder, the node's mzxid while held, is the fencing token) and
`members/<session id>` (ephemeral, value: member and the roles it contends for). Each renewal rewrites the
member's own node (a new version: the holder is alive; a write, which only the ensemble's leader commits, so a
server that has lost touch with the quorum cannot confirm it). Contenders time a holder's silence on their own
clock, as on etcd (`cas_lease.core`): a role node changes hands only by its holder's release or by a
contender's expiry after the holder's member node has not changed for `session_timeout`, with a compare on the
role node's version and the member node's version in one `multi`. The role node is never deleted, so its version
only grows and the compare cannot be fooled by a node deleted and created again in between (ABA); ZooKeeper's
`multi` cannot compare a creation zxid. The member's ZooKeeper session is asked for twice `session_timeout`:
its expiry only clears the directory.

Why not ephemeral role nodes (this store's first layout): the server's expiry is not a bound the holder can
keep. Found by `elect soak zookeeper` (infra-pause): an ensemble leader frozen for about `syncLimit` wakes with
its session tracker due and expires sessions before it processes the touches its followers queued meanwhile
(their reads were answered locally the whole time); re-elected with the highest zxid, it commits those expiries,
so a live holder's ephemeral role node vanished while the holder's own deadline ran (overlaps of 0-18 ms).
etcd has the same shape (etcd-io/etcd#15247). Now a premature expiry only deletes the member node: its
deletion counts as a change, so contenders wait `session_timeout` from it, and the holder, whose renewals fail
from then on, has stopped by its deadline (its last successful renewal was committed before the deletion).

A leader also stops when its connection is SUSPENDED (on the thread that hears it, not when the loop gets to
it), and in any case `renew_deadline` after its last successful renewal was sent.

Watches are armed with kazoo's asynchronous calls and re-armed on every event and reconnection, so
no kazoo callback ever blocks on a disconnected server.

Security: TLS to ZooKeeper's secure client port (`ca`, `cert`, `key`), and with `user` a digest identity
(`user:password`). Every node the elector creates (the group's node, `members`, `roles`, and the nodes under
them) then carries the ACL: ALL for that identity, READ for anyone. ZooKeeper checks a delete against the
*parent's* ACL and a create likewise, so no other client can delete, create or overwrite a role or member
node; reading stays open because who leads a role is no secret (member ids and session ids only) and
`elect watch` and monitoring then need no password. ZooKeeper's digest scheme has no user database (any
user:password is a valid identity), so a wrong password shows as nodes owned by another identity: `open`
checks the group's nodes' ACLs and refuses to run on nodes it does not own alone (`AccessRefused`).
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cas_lease import kazoo_wire
from cas_lease.core import Timing
from cas_lease.driver import (
    LeaseElector,
    Listener,
    Opened,
    Outcome,
    Refuted,
    SessionLost,
    StoreError,
)
from cas_lease.model import (
    ROLE_ACTIONS,
    Create,
    Delete,
    Expire,
    Holder,
    MemberRecord,
    MemberSeen,
    Observation,
    Publish,
    Renew,
    RoleAction,
    RoleSeen,
    StoreAction,
    Take,
)
from cas_lease.names import decode_holder, decode_record, encode_holder, encode_record, role_name
from cas_lease.options import ZooKeeperOptions
from elect.contract import Characteristics
from elect.errors import AccessRefused, ConfigError, InfrastructureUnavailable
from elect.reach import require_listening
from elect.roles import Role
from elect.secrets import tls_refusal

log = logging.getLogger("cas_lease")

Report = Callable[[bytes | None, Any, int], None]

GONE = 2 ** 63
"""The order (rev) of a report that a member node is gone: after every other, as a session's node never returns."""

HALVINGS = 3
"""How many times a refused `multi` of role actions is halved and sent again (at most 2**3 parts): a few refusals
among many are found and answered; a batch refused throughout (its member's view of the roles was behind: another
member took them all first) is given up after 14 requests and decided again on what the watches show by then."""

ABSENT = -1
"""The version `_held` notes for a role node that does not exist."""

SESSION_FACTOR = 2.0
"""The ZooKeeper session asked for is this many times `session_timeout`: contenders time a holder's silence
over `session_timeout` themselves, and a session that outlived that would let the server's expiry (a change of
the member node) restart their timing on every failover."""


class _NodeWatch:
    """Reports one node's state (data, stat, rev) as read now and after every change, until stopped.

    `rev` orders reports: 2 x mzxid while the node exists, 2 x (last mzxid seen) + 1 once it is gone.

    One read per change: the member's one persistent recursive watch on the group's tree (`ZooKeeperStore`)
    says which node changed, and a read (`_Reads`, batched with the other watches' reads) sees it. Member nodes
    are rewritten by every renewal and every member watches every other, so this is most of what a member asks of
    ZooKeeper at rest.
    """

    def __init__(self, store: ZooKeeperStore, path: str, report: Report) -> None:
        self._store = store
        self.path = path
        self._report = report
        self._last = 0
        self.first = threading.Event()
        self.stopped = False

    def read(self) -> None:
        """Read the node now (its report follows); a node that does not exist is reported gone."""
        if not self.stopped:
            self._store.reads.read(self)

    def gone(self) -> None:
        """The node is known to be gone (seen by another request): report it now."""
        self._deliver(None, None)

    def seen(self, data: bytes, stat: Any) -> None:
        """The node as another request read it: report it now (an older read is ordered out by its rev)."""
        self._deliver(data, stat)

    def _deliver(self, data: bytes | None, stat: Any) -> None:
        if self.stopped:
            return
        if stat is None:
            rev = 2 * self._last + 1
        else:
            self._last = max(self._last, int(stat.mzxid))
            rev = 2 * int(stat.mzxid)
        self._report(data, stat, rev)
        self.first.set()


class _Reads:
    """The watches' reads, many in one request (`kazoo_wire.MultiRead`): a read asked for while another request is on
    its way goes in the next one, sent when that one is answered. So a member at rest reads a changed node in one
    round trip as before, and one that sees thousands of role nodes change at once (a member that stopped freed
    2,000, and the survivors write them again) pays one request per batch rather than per node: kazoo's Python costs
    about 0.1 ms per request, and with three reads per freed role in each survivor that was most of a handover's
    time (`bench/bare/takeover.py zookeeper 6000 --fault stop`). The server answers a session's requests in order,
    so a read sent after a change was heard sees it, as a single read would."""

    #: Reads per request: the answers of one request must fit the server's `jute.maxbuffer` (1 MB by default); a
    #: role node's answer is about 130 bytes, a member node's carries the roles its member contends for.
    size = 500

    def __init__(self, store: ZooKeeperStore) -> None:
        self._store = store
        self._pending: dict[str, _NodeWatch] = {}  # by path: a node asked for twice before it is sent is read once
        self._sending = False
        self._lock = threading.Lock()

    def read(self, watch: _NodeWatch) -> None:
        with self._lock:
            self._pending[watch.path] = watch
            if self._sending:
                return  # goes with the next request, once the one on its way is answered
            self._sending = True
        self._send()

    def _send(self) -> None:
        with self._lock:
            if not self._pending:
                self._sending = False
                return
            paths = list(itertools.islice(self._pending, self.size))
            batch = [self._pending.pop(path) for path in paths]
        watcher = self._store.client
        if watcher is None:  # closed
            with self._lock:
                self._sending = False
            return
        self._store.count()
        try:
            pending = kazoo_wire.send(watcher, kazoo_wire.MultiRead([(watcher.chroot or "") + w.path for w in batch]))
        except Exception:  # the client is closing: nothing more to read
            with self._lock:
                self._sending = False
            return
        pending.rawlink(lambda result: self._answered(batch, result))

    def _answered(self, batch: list[_NodeWatch], result: Any) -> None:
        try:
            answers: list[tuple[bytes, Any] | int] = result.get()
        except Exception:  # connection trouble: every watch reads again once connected (`ZooKeeperStore._rearm`)
            answers = []
        for watch, answer in zip(batch, answers, strict=False):
            if isinstance(answer, tuple):
                watch.seen(*answer)
            elif answer == kazoo_wire.MultiRead.NO_NODE:
                watch.gone()
        self._send()


class ZooKeeperStore:
    """The `Store` of `cas_lease.driver` on ZooKeeper."""

    def __init__(self, options: ZooKeeperOptions, member: str) -> None:
        self.options = options
        self.member = member
        self._requests = 0
        self._members = options.root + "/members"
        self._roles = options.root + "/roles"
        self.session = ""
        self._record = b""  # this member's record as last written: every renewal writes it again
        self._client: Any = None  # the member's session: its node, renewals, every write
        self._watcher: Any = None  # a session of its own for the watches (see `_connect`)
        self._listener: Listener | None = None
        self._tracked: dict[Role, _NodeWatch] = {}
        self._tracked_paths: dict[str, _NodeWatch] = {}  # the same watches by their node's path (for events)
        self._watching = threading.Event()  # the persistent watch was added (or refused: `_watch_refused`)
        self._watch_refused: str | None = None
        self._freeing: set[Role] = set()  # roles whose release is on its way to the store: left out of renewals
        self._unreported: set[Role] = set()  # roles noted in `_held` since the last renewal reported them
        self._held: dict[Role, tuple[int, Holder | None, int]] = {}  # role -> (rev, holder, node version; -1: no
        # node) as seen last
        self._ours: dict[Role, int] = {}  # the roles `_held` shows this session holding, with their node version
        self._checks_made: tuple[list[tuple[Role, int]], bytes] | None = None  # `_renewal_checks`, for these roles
        self._member_watches: dict[str, _NodeWatch] = {}
        self.reads = _Reads(self)
        self._checks = kazoo_wire.Operations()
        self._lock = threading.Lock()
        self._children_first = threading.Event()
        self.negotiated: float | None = None
        self._password = options.password()  # read once, at creation; in no message
        self._connect_error: str | None = None  # the last reason a connection attempt failed (TLS refusals)

    @property
    def requests(self) -> int:
        return self._requests

    def count(self, n: int = 1) -> None:
        self._requests += n

    @property
    def client(self) -> Any:
        """The watches' client (`_NodeWatch` arms its watches there)."""
        return self._watcher

    # ------------------------------------------------------------------------------------------ session
    def open(self, record: MemberRecord, listener: Listener, timeout: float) -> Opened:
        self._listener = listener
        where = ",".join(self.options.hosts)
        require_listening("ZooKeeper", self.options.hosts)
        try:
            self._connect(timeout)
        except Exception as exc:
            self._shutdown()
            said = self._connect_error or ""
            refused = self._tls_refusal()
            if refused is not None:
                raise AccessRefused(refused) from None
            hint = ("; it closed every connection: if it serves TLS only, give ca= (and cert=, key=)"
                    if not self.options.uses_tls and "closed" in said.lower() else "")
            raise InfrastructureUnavailable(f"ZooKeeper at {where} did not answer within {timeout:g} s "
                                            f"(connect_timeout): {exc}{f' (last: {said})' if said else ''}{hint}") \
                from None
        try:
            self._check_session_timeout()
            for path in (self._members, self._roles):
                self._client.ensure_path_async(path).get(timeout=timeout)
            self._check_acls(timeout)
            self.track(record.roles or ())
            return self._register(record, timeout)
        except StoreError as exc:
            self._shutdown()
            if "NoAuth" in str(exc):
                raise AccessRefused(self._not_ours(self._members, str(exc))) from None
            raise InfrastructureUnavailable(f"ZooKeeper at {where}: {exc}") from None
        except BaseException:
            self._shutdown()
            raise

    def reopen(self, record: MemberRecord, timeout: float) -> Opened:
        if self._connection_died():  # nothing will reconnect this client: a new one, with a new session
            log.warning("elect: %s: the ZooKeeper client's connection loop stopped; starting a new client",
                        self.member)
            self._shutdown()
            try:
                self._connect(timeout)
            except Exception as exc:
                self._shutdown()
                raise StoreError(f"a new ZooKeeper client did not connect: {exc}") from None
        if not self._client.connected:
            raise StoreError("not connected to ZooKeeper")
        if self._watcher is None or kazoo_wire.died(self._watcher):
            self._stop_client(self._watcher)
            self._watcher = self._start_client(timeout, watches=True)
        return self._register(record, timeout)

    def _acl(self) -> list[Any] | None:
        """ALL for this member's digest identity, READ for anyone; None without a user (ZooKeeper's open ACL)."""
        if not self.options.user:
            return None
        from kazoo.security import ACL, Id, Permissions, make_digest_acl

        return [make_digest_acl(self.options.user, self._password or "", all=True),
                ACL(Permissions.READ, Id("world", "anyone"))]

    def _check_acls(self, timeout: float) -> None:
        """With a user: the group's nodes must be this identity's alone to change (else another identity, a wrong
        password, or a group made without a user, could create or delete role nodes)."""
        from kazoo.security import Permissions

        wanted = self._acl()
        if wanted is None:
            return
        mine = wanted[0].id
        change = Permissions.CREATE | Permissions.DELETE | Permissions.WRITE
        for path in (self.options.root, self._members, self._roles):
            self.count()
            acls, _ = self._client.get_acls_async(path).get(timeout=timeout)
            ours = any(acl.id == mine and acl.perms & change == change for acl in acls)
            others = [f"{acl.id.scheme}:{acl.id.id.split(':')[0]}" for acl in acls
                      if acl.id != mine and acl.perms & change]
            if not ours or others:
                raise AccessRefused(self._not_ours(path, f"its ACL lets {', '.join(others) or 'no one else'} "
                                                         "change it"))

    def _not_ours(self, path: str, detail: str) -> str:
        who = f"the user {self.options.user!r}" if self.options.user else "a client without user="
        return (f"ZooKeeper at {','.join(self.options.hosts)} refused {who} on {path}: the group's nodes belong to "
                f"another identity (a wrong user or password, or a group made without user=) ({detail})")

    def _connect(self, timeout: float) -> None:
        """Two new clients, each connected within `timeout` (kazoo's own retries reconnect them after a drop): the
        member's session, which makes every write, and one for the watches. ZooKeeper answers a session's requests
        in order, and every member re-arms a watch with a read after each change of a node it watches (a role
        changing hands, another member's renewal): in one session a renewal waited behind those reads, hundreds
        at a cold start or a failover of 600 roles (a 200-write `multi` sent behind 1,200 reads: 105 ms in one
        session, 16 ms in a session of its own, on an idle machine), and renewals timed out. Only the member's
        session's state fences its leaderships; the watches' session re-arms every watch when it reconnects."""
        deadline = time.monotonic() + timeout
        self._client = self._start_client(timeout, watches=False)
        self._watcher = self._start_client(max(0.0, deadline - time.monotonic()), watches=True)

    def _start_client(self, timeout: float, *, watches: bool) -> Any:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        from cas_lease.kazoo_poll import PollHandler

        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_delay=0.5)
        o = self.options
        self._connect_error = None
        client = KazooClient(hosts=",".join(o.hosts), timeout=o.session_timeout * SESSION_FACTOR,
                             connection_retry=retry, logger=logging.getLogger("cas_lease.kazoo"),
                             handler=PollHandler(), **client_security(o, self._password, self._acl()))
        kazoo_wire.hook_connect(client, self._granted if not watches else lambda _seconds: None, self._connect_failed)
        if watches:
            kazoo_wire.hear_watch_events(client, self._on_event)
        client.add_listener(self._on_watcher_state if watches else self._on_state)
        started = client.start_async()  # as KazooClient.start, but a TLS refusal ends the wait at once
        deadline = time.monotonic() + timeout
        while not started.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if self._tls_refusal() is not None or time.monotonic() >= deadline:
                break
        if not client.connected:
            self._stop_client(client)
            raise ConnectionError(self._tls_refusal() or f"no connection within {timeout:g} s")
        return client

    def _tls_refusal(self) -> str | None:
        """What the last failed connection attempt says was refused (TLS), if anything."""
        said = self._connect_error
        if said is None:
            return None
        return tls_refusal(said, "ZooKeeper", ",".join(self.options.hosts), tls=self.options.uses_tls)

    def _connection_died(self) -> bool:
        """kazoo's connection thread of the member's session ended although the client was not stopped
        (`kazoo_wire.died`)."""
        return kazoo_wire.died(self._client)

    def _register(self, record: MemberRecord, timeout: float) -> Opened:
        """(Re)arm every watch, wait for their first reports, then enter the membership directory under the current
        session. In that order because the others count a member from the moment its node appears: one that
        appeared before it could see the roles (600 role watches armed at a cold start take a while) was left the
        roles it did not yet take, which their holders shed to it and took back after `fair_delay`, again and
        again, for seconds."""
        deadline = time.monotonic() + timeout
        self._rearm()
        self._watching.wait(timeout)
        if self._watch_refused is not None:
            raise StoreError(self._watch_refused)
        self._children_first.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            watches = [*self._member_watches.values(), *self._tracked.values()]
        for watch in watches:  # the first reports are queued before the core decides anything (those still on
            # their way after `timeout`, thousands of roles on a busy machine, come later: the core takes them then)
            watch.first.wait(max(0.0, deadline - time.monotonic()))
        try:
            session = f"{self._client.client_id[0]:x}"
            self.count()
            data = encode_record(record)
            self._client.create_async(self._member_path(session), data, ephemeral=True).get(
                timeout=max(self.options.timeout, deadline - time.monotonic()))
        except Exception as exc:
            raise self._error(exc) from None
        with self._lock:
            self.session = session
            self._ours = {role: version for role, (_, holder, version) in self._held.items()
                          if holder is not None and holder.session == session}
        self._record = data
        return Opened(session, math.inf, [])

    def _granted(self, seconds: float) -> None:
        self.negotiated = seconds

    def _connect_failed(self, why: str) -> None:
        self._connect_error = why  # kept: why connecting failed (a TLS refusal is named at start)

    def _check_session_timeout(self) -> None:
        granted = self.negotiated
        if granted is None:
            return
        if granted <= self.options.deadline:
            raise ConfigError(f"ZooKeeper granted a session timeout of {granted:g} s, not longer than "
                              f"renew_deadline {self.options.deadline:g} s: lower renew_deadline or raise the "
                              "server's maxSessionTimeout", parameter="session_timeout")
        if granted > self.options.session_timeout * SESSION_FACTOR + 1e-6:
            log.info("elect: ZooKeeper raised the session timeout to %g s; a dead member's directory entry "
                     "stays that long (its roles move after session_timeout all the same)", granted)

    def _on_state(self, state: str) -> None:
        """kazoo's connection states, from its connection thread: queue them, never block."""
        listener = self._listener
        if listener is None:
            return
        if state == "SUSPENDED":
            listener.suspended()
        elif state == "LOST":
            listener.gone()

    def _on_watcher_state(self, state: str) -> None:
        """The watches' session (re)connected: every watch is armed again (a new session has none)."""
        listener = self._listener
        if listener is not None and state == "CONNECTED":
            listener.on_loop(self._rearm)

    def track(self, roles: Iterable[Role]) -> None:
        wanted = set(roles)
        fresh = []
        with self._lock:
            for role in list(self._tracked):
                if role not in wanted:
                    gone = self._tracked.pop(role)
                    gone.stopped = True
                    self._tracked_paths.pop(gone.path, None)
            for role in wanted - set(self._tracked):
                watch = self._tracked[role] = _NodeWatch(self, self._role_path(role), self._role_report(role))
                self._tracked_paths[watch.path] = watch
                fresh.append(watch)
        if self._watching.is_set() and self._watcher is not None and self._watcher.connected:
            for watch in fresh:  # (before the watch is added, `_rearm` lists and reads them all)
                watch.read()

    def close(self, timeout: float) -> None:
        for watch in [*self._tracked.values(), *self._member_watches.values()]:
            watch.stopped = True
        self._listener = None
        self._shutdown()

    def _shutdown(self) -> None:
        self._stop_client(self._client)  # closes the session: the server drops our ephemeral nodes at once
        self._stop_client(self._watcher)

    @staticmethod
    def _stop_client(client: Any) -> None:
        if client is None:
            return
        try:
            client.stop()
            client.close()
        except Exception as exc:
            log.info("elect: closing the ZooKeeper client: %s", exc)

    # ------------------------------------------------------------------------------------------ watches
    def _rearm(self) -> None:
        """Watch the group's tree and read it all again (a new connection of the watches' session has no watch):
        one persistent recursive watch on the group's node (ZooKeeper 3.6+), which reports every node created,
        changed or deleted below it from then on, then the member and role nodes listed and each existing one read.
        A role node not yet made (every one, in a new group) costs nothing past the listing: its creation comes as
        an event. One-shot watches per node, as before, cost two requests per node to arm and one to re-arm per
        change: at 6,000 roles most of a member's time at a cold start."""
        watcher = self._watcher
        if watcher is None or not watcher.connected:
            return  # armed once it connects (its CONNECTED comes here again)
        self.count(3)
        added = kazoo_wire.send(watcher, kazoo_wire.AddWatch((watcher.chroot or "") + self.options.root,
                                                             kazoo_wire.AddWatch.RECURSIVE))
        added.rawlink(self._on_added)
        watcher.get_children_async(self._members).rawlink(self._on_children)
        watcher.get_children_async(self._roles).rawlink(self._read_roles)

    def _on_added(self, result: Any) -> None:
        from kazoo.exceptions import UnimplementedError

        try:
            result.get()
        except UnimplementedError:
            self._watch_refused = (f"ZooKeeper at {','.join(self.options.hosts)} has no persistent watches "
                                   "(addWatch: ZooKeeper 3.6 or later), which zookeeper:// needs")
        except Exception:  # connection trouble: added again once connected
            return
        self._watching.set()

    def _read_roles(self, listed: Any) -> None:
        """Report each tracked role node: read the ones that exist, the others are reported absent at once."""
        try:
            names: set[str] | None = set(listed.get())
        except Exception:  # connection trouble: each read finds out for itself
            names = None
        with self._lock:
            watches = list(self._tracked.values())
        for watch in watches:
            if names is None or watch.path.rpartition("/")[2] in names:
                watch.read()
            else:
                watch.gone()

    def _on_children(self, result: Any) -> None:
        try:
            children = result.get()
        except Exception:
            return
        for name in children:
            self._member_watch(name).read()
        self._children_first.set()

    def _member_watch(self, name: str) -> _NodeWatch:
        with self._lock:
            watch = self._member_watches.get(name)
            if watch is None:
                watch = self._member_watches[name] = _NodeWatch(self, f"{self._members}/{name}",
                                                                self._member_report(name))
            return watch

    def _on_event(self, kind: int, path: str) -> None:
        """A node below the group's node was created, changed (`kazoo_wire.AddWatch.DELETED`: deleted): read it."""
        if path.startswith(self._roles + "/"):
            with self._lock:
                watch = self._tracked_paths.get(path)
            if watch is not None:
                watch.gone() if kind == kazoo_wire.AddWatch.DELETED else watch.read()
        elif path.startswith(self._members + "/"):
            name = path[len(self._members) + 1:]
            if kind == kazoo_wire.AddWatch.DELETED:
                with self._lock:
                    gone = self._member_watches.get(name)
                if gone is not None:
                    gone.gone()
            else:
                self._member_watch(name).read()

    def _role_report(self, role: Role) -> Report:
        def report(data: bytes | None, stat: Any, rev: int) -> None:
            holder = self._holder(data, stat)
            self._note(role, holder, rev, stat)
            self._emit(RoleSeen(role, holder, rev))
        return report

    def _member_report(self, session: str) -> Report:
        def report(data: bytes | None, stat: Any, rev: int) -> None:
            if stat is None:
                with self._lock:
                    watch = self._member_watches.pop(session, None)
                if watch is not None:
                    watch.stopped = True  # session ids are never reused: nothing more to see
                self._emit(MemberSeen(session, None, 0, rev))
            else:
                self._emit(MemberSeen(session, decode_record(data or b""), _version(stat), rev))
        return report

    def _emit(self, seen: Observation) -> None:
        listener = self._listener
        if listener is not None:
            listener.observed(seen)

    # ------------------------------------------------------------------------------------------ actions
    def execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        if isinstance(action, ROLE_ACTIONS):
            answered, seen = self.execute_batch([action], timeout)[0]
            if not answered:
                raise StoreError(f"{type(action).__name__} {action.role!r}: no answer")
            return seen
        if self._connection_died():
            raise SessionLost("the ZooKeeper client's connection loop stopped")
        try:
            return self._execute(action, timeout)
        except (StoreError, ConfigError):
            raise
        except Exception as exc:
            raise self._error(exc) from None

    def _execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        from kazoo.exceptions import NoNodeError

        client = self._client
        self.count()
        if isinstance(action, Renew):
            return self._renew(timeout)
        if isinstance(action, Create):
            return self._create(action.role, timeout)
        if isinstance(action, Expire | Take):
            return self._expire(action, timeout)
        if isinstance(action, Delete):
            return self._release(action.role, action.token, timeout)
        if isinstance(action, Publish):
            data = encode_record(action.record)
            try:
                client.set_async(self._member_path(self.session), data).get(timeout=timeout)
            except NoNodeError:
                raise SessionLost(f"membership node of session {self.session} is gone") from None
            self._record = data
            return []
        raise StoreError(f"ZooKeeper cannot {type(action).__name__}")

    #: Role actions in one `multi`. The member's session answers its requests in order, and its renewals are among
    #: them: a renewal waits behind the batches sent before it, so batches are kept small (100: tens of ms) and one
    #: at a time. With 1,000 a batch and two at once, renewals at a cold start of 6,000 roles took 0.2-0.46 s and
    #: every leadership lapsed again and again (25,000 fences in 14 s).
    batch_size = 100
    #: Batches under way at once (see `batch_size`): two pipelined on the session, so a renewal waits behind at most
    #: two small ones while a survivor taking over thousands is never idle between a batch and the next
    #: (`bench/bare/takeover.py zookeeper 6000`, kill p99 over 6 runs: one lane 1.01-1.38 s, two 1.08-1.29 s over 8;
    #: no leadership lapsed at the cold start with either).
    parallel = 2

    def execute_batch(self, actions: Sequence[RoleAction], timeout: float) -> list[Outcome]:
        """The actions as one `multi`: a conditional write per role node at the version this store last saw it
        (`_held`), so no read comes first, and one request for all (in kazoo a `multi` of 500 writes took 10 ms
        where 500 pipelined requests took 200 ms). A `multi` is all or nothing and names only its first failure, so
        one that fails (a node moved on: another member was first, or a holder renewed) is halved and each half sent
        again (`HALVINGS`), and an action refused on its own is answered by a read (`_read_back`): a few refusals
        among hundreds of actions cost a few requests each. An action this store cannot write blind (an expiry of a
        holder whose member node was never seen) takes the one-at-a-time path. Roles being released are left out of the
        renewals made meanwhile (`_renew`), whose version check the release would otherwise refute."""
        if self._connection_died():
            raise SessionLost("the ZooKeeper client's connection loop stopped")
        freeing = {a.role for a in actions if isinstance(a, Delete)}
        with self._lock:  # a renewal made meanwhile leaves them out: its check would race the release
            self._freeing |= freeing
        try:
            return self._batch(actions, timeout)
        except (StoreError, ConfigError):
            raise
        except Exception as exc:
            raise self._error(exc) from None
        finally:
            with self._lock:
                self._freeing -= freeing

    def _batch(self, actions: Sequence[RoleAction], timeout: float) -> list[Outcome]:
        deadline = time.monotonic() + timeout
        outcomes: list[Outcome | None] = [None] * len(actions)
        pending: list[tuple[int, list[tuple[str, tuple[Any, ...]]]]] = []  # (index, its operations)
        for i, action in enumerate(actions):
            ops = self._blind(action)
            if isinstance(ops, list) and ops and isinstance(ops[0], RoleSeen | MemberSeen):
                outcomes[i] = (True, ops)  # what this store knows already answers it
            elif ops is None:
                outcomes[i] = self._one(action, deadline)
            else:
                pending.append((i, ops))
        refused: list[int] = []
        groups = [(pending, 0)] if pending else []
        while groups:  # a multi that fails names only its first failure: halve it, a few times
            group, depth = groups.pop()
            if self._multi(actions, group, outcomes, deadline):
                continue
            if len(group) == 1:
                refused.append(group[0][0])
            elif depth < HALVINGS:
                groups += [(group[len(group) // 2:], depth + 1), (group[:len(group) // 2], depth + 1)]
            # else: left unanswered (not done); the core tries again after `retry_interval`, on a fresher view
        self._read_back(actions, refused, outcomes, deadline)
        return [outcome if outcome is not None else (False, []) for outcome in outcomes]

    def _multi(self, actions: Sequence[RoleAction], group: list[tuple[int, list[tuple[str, tuple[Any, ...]]]]],
               outcomes: list[Outcome | None], deadline: float) -> bool:
        """Send `group`'s operations as one `multi`; True (and each action's outcome) if it went through."""
        from kazoo.exceptions import NoNodeError

        txn = self._client.transaction()
        for _, ops in group:
            for name, args in ops:
                getattr(txn, name)(*args)
        self.count()
        results = txn.commit_async().get(timeout=max(0.0, deadline - time.monotonic()))
        if any(isinstance(r, Exception) for r in results):
            if len(group) == 1 and isinstance(actions[group[0][0]], Delete) and isinstance(results[0], NoNodeError):
                raise SessionLost(f"membership node of session {self.session} is gone")
            return False
        stats = self._stats(results, deadline)
        at = 0
        for i, ops in group:
            at += len(ops)
            outcomes[i] = (True, [self._written(actions[i], stats[at - 1])])
        return True

    def _read_back(self, actions: Sequence[RoleAction], refused: list[int], outcomes: list[Outcome | None],
                   deadline: float) -> None:
        """Answer each refused action (its node moved on: another member was first, or a holder renewed) with what
        the store holds now: its role node and, for an expiry, the holder's member node, read all at once."""
        from kazoo.exceptions import SessionExpiredError

        reads = []
        for i in refused:
            action = actions[i]
            reads.append((i, self._client.get_async(self._role_path(action.role)),
                          self._client.get_async(self._member_path(action.holder.session))
                          if isinstance(action, Expire | Take) else None))
        self.count(sum(1 if member is None else 2 for _, _, member in reads))
        for i, role_read, member_read in reads:
            action = actions[i]
            try:
                seen: list[Observation] = [self._role_seen(action.role, *self._got(role_read, deadline))]
                if isinstance(action, Expire | Take) and member_read is not None:
                    data, stat = self._got(member_read, deadline)
                    seen.append(MemberSeen(action.holder.session, None, 0, GONE) if stat is None else
                                MemberSeen(action.holder.session, decode_record(data or b""), _version(stat),
                                           2 * int(stat.mzxid)))
            except SessionExpiredError:
                raise SessionLost("ZooKeeper session expired") from None
            except Exception as exc:
                log.info("elect: ZooKeeper read of %r: %s", action.role, exc)
                continue
            outcomes[i] = (True, seen)

    @staticmethod
    def _got(request: Any, deadline: float) -> tuple[bytes | None, Any]:
        """A pipelined read's data and stat, (None, None) if the node does not exist."""
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = request.get(timeout=max(0.0, deadline - time.monotonic()))
            return data, stat
        except NoNodeError:
            return None, None

    def _blind(self, action: RoleAction) -> list[Any] | None:
        """The `multi` operations that do `action` without reading first, (name, arguments) each, its last one the
        write of the role node; or what this store already knows shows instead (a list of observations: nothing
        to do); or None (do it the one-at-a-time way)."""
        with self._lock:
            rev, holder, version = self._held.get(action.role, (0, None, ABSENT))
        path = self._role_path(action.role)
        if isinstance(action, Create):
            mine = encode_holder(self.member, self.session)
            if holder is not None:
                return [RoleSeen(action.role, holder, rev)]
            if version == ABSENT:
                return [("create", (path, mine))]
            return [("set_data", (path, mine, version))]
        if isinstance(action, Expire | Take):
            if holder != action.holder or version == ABSENT:
                return [RoleSeen(action.role, holder, rev)]
            if action.version <= 0:
                return None  # no member node was seen: its absence is checked by a read first
            data = encode_holder(self.member, self.session) if isinstance(action, Take) else b""
            return [("check", (self._member_path(action.holder.session), action.version - 1)),
                    ("set_data", (path, data, version))]
        if holder is None or holder.session != self.session or holder.token != action.token:
            return [RoleSeen(action.role, holder, rev)]  # not ours any more: nothing to free
        return [("check", (self._member_path(self.session), -1)), ("set_data", (path, b"", version))]

    def _one(self, action: RoleAction, deadline: float) -> Outcome:
        try:
            return True, self._execute(action, max(0.0, deadline - time.monotonic()))
        except SessionLost:
            raise
        except Exception as exc:
            log.info("elect: ZooKeeper %s %r: %s", type(action).__name__, action.role, exc)
            return False, []

    def _stats(self, results: list[Any], deadline: float) -> list[Any]:
        """Each operation's stat in a `multi` that succeeded. A create answers with its path only, but every
        operation of a `multi` is one transaction with one zxid: taken from a write's stat, or (creates alone)
        from one node read back."""
        zxid = next((int(r.mzxid) for r in results if hasattr(r, "mzxid")), None)
        if zxid is None:
            created = next(r for r in results if isinstance(r, str))
            self.count()
            zxid = int(self._client.exists_async(created).get(timeout=max(0.0, deadline - time.monotonic())).mzxid)
        return [r if hasattr(r, "mzxid") else _Created(zxid) for r in results]

    def _written(self, action: RoleAction, stat: Any) -> RoleSeen:
        """The role node as `action`'s successful write left it."""
        rev = 2 * int(stat.mzxid)
        holder = Holder(self.session, self.member, int(stat.mzxid)) if isinstance(action, Create | Take) else None
        self._note(action.role, holder, rev, stat)
        return RoleSeen(action.role, holder, rev)

    def _renew(self, timeout: float) -> list[Observation]:
        """Rewrite this member's node (a write: only a live session, through the ensemble's leader, renews) in one
        `multi` with a version check on every role node last seen as this member's. A contender may have freed
        one while this member was cut off and its watch has not said so yet: then the renewal fails as a whole
        (nothing is extended), the changed nodes are read and reported, and the next renewal leaves them out.
        So a renewal that counts proves, atomically, that every role this member holds is still its own, which
        is what lets the core adopt its own nodes again after a lapse; no read's freshness is relied on. The
        renewal also reports every role as this store saw it when the multi was made: a watch report noted here
        may still wait in the loop's queue, and the core must not count the renewal on an older view than the one
        the checks were made from: what changed in it since the last renewal reported it (every role each time was
        6,000 observations four times a second at 6,000 roles)."""
        from kazoo.exceptions import NoNodeError, RolledBackError

        with self._lock:  # sent under the lock: a release made after it is sent after it (one session, in order)
            # what changed since the last renewal reported: anything older went out with an earlier one
            changed_since, self._unreported = self._unreported, set()
            known = [RoleSeen(role, self._held[role][1], self._held[role][0]) for role in changed_since]
            ours = [(role, version) for role, version in self._ours.items() if role not in self._freeing]
            chroot = self._client.chroot or ""  # what kazoo puts before every path it sends
            pending = kazoo_wire.send(self._client, kazoo_wire.multi([
                self._checks.write(chroot + self._member_path(self.session), self._record),
                self._renewal_checks(chroot, ours)]))
        try:
            results = pending.get(timeout=timeout)
        except Exception:
            with self._lock:  # not reported after all: the next renewal does
                self._unreported |= changed_since
            raise
        if isinstance(results[0], NoNodeError):
            raise SessionLost(f"membership node of session {self.session} is gone")
        changed = [role for (role, _), result in zip(ours, results[1:], strict=True)
                   if isinstance(result, Exception) and not isinstance(result, RolledBackError)]
        if not changed and not any(isinstance(result, Exception) for result in results):
            return list(known)
        seen: list[Observation] = [*known, *(self._role_seen(role, *self._read(self._role_path(role), timeout))
                                             for role in changed)]
        raise Refuted(f"renewal refused: {', '.join(map(str, changed)) or 'the member node'} changed", seen)

    def _renewal_checks(self, chroot: str, ours: list[tuple[Role, int]]) -> bytes:
        """The version checks of `ours`, in its order, as one run of `multi` operations, made again only when `ours`
        changed: at rest a renewal of thousands of roles sends the same checks four times a second, and making them
        cost 10-30 ms of Python each time."""
        made = self._checks_made
        if made is None or made[0] != ours:
            made = self._checks_made = (ours, b"".join(self._checks.check(chroot + self._role_path(role), version)
                                                       for role, version in ours))
        return made[1]

    def _note(self, role: Role, holder: Holder | None, rev: int, stat: Any) -> None:
        """Remember who holds `role`, and the node's version, as seen at `rev` (reports arrive from the watch and
        from requests, in any order: the newest counts, as in the core)."""
        with self._lock:
            if rev >= self._held.get(role, (-1, None, 0))[0]:
                version = int(stat.version) if stat is not None else ABSENT
                self._held[role] = (rev, holder, version)
                self._unreported.add(role)
                if holder is not None and holder.session == self.session:
                    self._ours[role] = version
                else:
                    self._ours.pop(role, None)

    def _create(self, role: Role, timeout: float) -> list[Observation]:
        """Take a free role: create its node holding us, or write us into its empty node (compared on its version)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError

        path, mine = self._role_path(role), encode_holder(self.member, self.session)
        try:
            _, stat = self._client.create_async(path, mine, include_data=True).get(timeout=timeout)
            return [self._role_seen(role, mine, stat)]
        except NodeExistsError:
            pass
        data, stat = self._read(path, timeout)
        if stat is None or data:
            return [self._role_seen(role, data, stat)]
        try:
            self.count()
            stat = self._client.set_async(path, mine, version=stat.version).get(timeout=timeout)
            return [self._role_seen(role, mine, stat)]
        except BadVersionError:  # taken (or freed again) meanwhile: report what is there now
            return [self._role_seen(role, *self._read(path, timeout))]

    def _expire(self, action: Expire | Take, timeout: float) -> list[Observation]:
        """Free a silent holder's role (`Take`: write this member in its place), in one `multi` comparing the role
        node's version (still that holder's node: versions only grow) and the holder's member node's version (still
        silent since the core timed it)."""
        role, holder = action.role, action.holder
        mine = encode_holder(self.member, self.session) if isinstance(action, Take) else b""
        path, member = self._role_path(role), self._member_path(holder.session)
        data, stat = self._read(path, timeout)
        seen = self._holder(data, stat)
        if seen != holder:
            return [self._role_seen(role, data, stat)]
        txn = self._client.transaction()
        if action.version > 0:
            txn.check(member, action.version - 1)
        else:  # the core saw no member node: a session's node never comes back once gone, so see it is absent now
            self.count()
            if self._client.exists_async(member).get(timeout=timeout) is not None:
                return [self._member_now(holder.session, timeout)]
        txn.set_data(path, mine, version=stat.version)
        self.count()
        results = txn.commit_async().get(timeout=timeout)
        written = results[-1]
        if not isinstance(written, Exception):
            return [self._role_seen(role, mine, written)]
        return [self._role_seen(role, *self._read(path, timeout)), self._member_now(holder.session, timeout)]

    def _release(self, role: Role, token: int, timeout: float) -> list[Observation]:
        """Free a role this session holds with `token`, only while the session (owner of its member node) lives."""
        from kazoo.exceptions import NoNodeError

        path = self._role_path(role)
        data, stat = self._read(path, timeout)
        holder = self._holder(data, stat)
        if holder is None or holder.session != self.session or holder.token != token:
            return [self._role_seen(role, data, stat)]  # not ours any more: nothing to free
        txn = self._client.transaction()
        txn.check(self._member_path(self.session), -1)
        txn.set_data(path, b"", version=stat.version)
        self.count()
        results = txn.commit_async().get(timeout=timeout)
        if isinstance(results[0], NoNodeError):
            raise SessionLost(f"membership node of session {self.session} is gone")
        if not isinstance(results[1], Exception):
            self._note(role, None, 2 * int(results[1].mzxid), results[1])
            return [RoleSeen(role, None, 2 * int(results[1].mzxid))]
        return [self._role_seen(role, *self._read(path, timeout))]

    def _read(self, path: str, timeout: float) -> tuple[bytes | None, Any]:
        """A node's data and stat, (None, None) if it does not exist."""
        from kazoo.exceptions import NoNodeError

        try:
            self.count()
            data, stat = self._client.get_async(path).get(timeout=timeout)
            return data, stat
        except NoNodeError:
            return None, None

    def _member_now(self, session: str, timeout: float) -> MemberSeen:
        data, stat = self._read(self._member_path(session), timeout)
        if stat is None:
            return MemberSeen(session, None, 0, GONE)
        return MemberSeen(session, decode_record(data or b""), _version(stat), 2 * int(stat.mzxid))

    def _role_seen(self, role: Role, data: bytes | None, stat: Any) -> RoleSeen:
        rev = 2 * int(stat.mzxid) if stat is not None else 1
        holder = self._holder(data, stat)
        self._note(role, holder, rev, stat)
        return RoleSeen(role, holder, rev)

    def members(self, timeout: float) -> dict[str, MemberRecord]:
        from kazoo.exceptions import NoNodeError

        try:
            self.count()
            children = self._client.get_children_async(self._members).get(timeout=timeout)
            pending = [(name, self._client.get_async(f"{self._members}/{name}")) for name in children]
            self.count(len(pending))
            found = {}
            for name, result in pending:
                try:
                    found[name] = decode_record(result.get(timeout=timeout)[0] or b"")
                except NoNodeError:
                    continue  # gone since it was listed
            return found
        except Exception as exc:
            raise self._error(exc) from None

    def _error(self, exc: Exception) -> StoreError:
        from kazoo.exceptions import SessionExpiredError

        if isinstance(exc, SessionExpiredError):
            return SessionLost("ZooKeeper session expired")
        return StoreError(f"{type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------------------------------ names
    def _holder(self, data: bytes | None, stat: Any) -> Holder | None:
        """The holder a role node names (None: free, or no node), its token the zxid of the write that made it."""
        if stat is None or not data:
            return None
        return decode_holder(data, int(stat.mzxid))

    def _role_path(self, role: Role) -> str:
        return f"{self._roles}/{role_name(role)}"

    def _member_path(self, session: str) -> str:
        return f"{self._members}/{session}"


@dataclass(frozen=True)
class _Created:
    """The stat of a node a `multi` created: its zxid, version 0."""

    mzxid: int
    version: int = 0


def _version(stat: Any) -> int:
    """A member node's version as the core compares it: the node's data version + 1 (0 stands for no node)."""
    return int(stat.version) + 1


def client_security(options: ZooKeeperOptions, password: str | None, acl: list[Any] | None = None) -> dict[str, Any]:
    """KazooClient's keyword arguments for the options' TLS and digest identity (and the ACL of nodes it makes)."""
    security: dict[str, Any] = {}
    if options.uses_tls:
        security |= {"use_ssl": True, "ca": options.ca, "certfile": options.cert, "keyfile": options.key,
                     "verify_certs": True, "check_hostname": True}
    if options.user:
        security |= {"auth_data": [("digest", f"{options.user}:{password}")]}
    if acl is not None:
        security |= {"default_acl": acl}
    return security


def characteristics(options: ZooKeeperOptions) -> Characteristics:
    """Exclusive while clock rates differ by less than `max_drift` (session_timeout / renew_deadline - 1); a
    crashed leader's roles move once a contender has timed `session_timeout` of its silence from its last renewal
    seen, bounded here by one renew interval of slack."""
    return Characteristics(exclusive=True, max_overlap=0.0,
                           max_failover=options.session_timeout + options.interval, graceful_handover=True,
                           token="zxid of the write that gave the role's node its holder", observes_leaders=True,
                           transfers=True, weights=options.fair, max_drift=options.max_drift)


def timing(options: ZooKeeperOptions) -> Timing:
    """The core's clocks for these options (the simulator's members take the same)."""
    return options.timing(silence_takeover=True)


def create(options: ZooKeeperOptions, member: str, roles: tuple[Role, ...]) -> LeaseElector:
    store = ZooKeeperStore(options, member)
    return LeaseElector("zookeeper", options, member, roles, store, timing(options), characteristics(options))
