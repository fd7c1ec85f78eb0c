"""`etcd://`: the lease core on etcd, through the v3 JSON gateway.

Layout under /PREFIX/: `roles/<role>` (value: holder member and session; written only when the role changes
hands: created if absent, or taken over from a silent holder in one compare-and-swap, so the revision of that
write, the key's mod revision, is the fencing token) and `members/<lease id>` (value: member and the roles it
contends for; bound to the member's lease). Each renewal is one transaction that touches the member's
own entry (new mod revision: the holder is alive); the watch, once it has delivered that very write, has shown
the member everything before it (`_renew`). The watch makes handovers immediate. etcd's lease
(whole seconds, expiry swept coarsely) is only the backstop that clears a dead member's directory
entry: contenders time a silent holder themselves (see `cas_lease.core`).

Role keys are deliberately *not* bound to the lease: etcd may revoke a lease at a moment no member can
bound (etcd < 3.4.31 / 3.5.13: a leader resumed after a pause revokes every lease its frozen lessor
thinks expired, etcd-io/etcd#15247, fixed by #16822), which would free a role while its holder's own
deadline still runs. So a role key goes only by its holder's Delete or a contender's Expire, and
Expire waits until the holder's directory entry has not changed (a revoke deleting it is a change) for
`ttl` on the contender's clock, the rule the core's safety argument rests on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from cas_lease.core import Timing
from cas_lease.driver import (
    LeaseElector,
    Listener,
    Opened,
    Outcome,
    SessionLost,
    StoreError,
    StoreRefused,
    register_within,
)
from cas_lease.model import (
    ROLE_ACTIONS,
    Create,
    Expire,
    Holder,
    KeepAlive,
    LeaseSeen,
    MemberRecord,
    MemberSeen,
    Observation,
    Publish,
    Renew,
    RoleAction,
    RoleSeen,
    Snapshot,
    StoreAction,
    Take,
)
from cas_lease.names import decode_holder, decode_record, encode_holder, encode_record, role_name, role_of
from cas_lease.options import EtcdOptions
from elect.contract import Characteristics
from elect.errors import ElectError
from elect.etcd_gateway import (
    Access,
    Gateway,
    GatewayError,
    Refused,
    Tokens,
    Unreachable,
    WatchStream,
    b64,
    range_end,
    revision,
    unb64,
)
from elect.json_http import JSON
from elect.reach import require_listening
from elect.roles import Role

log = logging.getLogger("cas_lease")


class TooManyOps(StoreError):
    """etcd refused a transaction for its number of operations (`--max-txn-ops`)."""


class EtcdStore:
    """The `Store` of `cas_lease.driver` on etcd."""

    def __init__(self, options: EtcdOptions, member: str) -> None:
        self.options = options
        self.member = member
        self._access = Access.of(options)
        self._tokens = Tokens()  # one authentication for all this member's connections (`elect.etcd_gateway`)
        # the loop thread's gateway: open, members, close, the watch
        self._gw = Gateway(options.endpoints, self._access, self._tokens)
        self._local = threading.local()  # each lane's own gateway (`_lane_gateway`): one HTTP connection per thread
        self._lane_gateways: list[Gateway] = []
        self._prefix = options.key_prefix
        self._roles = self._prefix + "roles/"
        self._members = self._prefix + "members/"
        self._lease = 0
        self.session = ""
        self._listener: Listener | None = None
        self._closed = threading.Event()
        self._watch: WatchStream | None = None
        self._watch_thread: threading.Thread | None = None
        self._watch_lock = threading.Lock()
        self._next_rev = 0           # where a restarted watch resumes
        self._delivered = 0          # every change up to this revision has been reported (`_on_watch`)
        self._delivered_cond = threading.Condition()
        self._gaps = 0               # times the watch started again from "now" (after a compaction): changes missed
        self._covered = 0            # gaps a renewal has since read every key for
        self._watch_requests = 0
        self._behind = 0             # renewals that found the watch behind and read every key instead

    #: etcd refuses a transaction with more operations than its `--max-txn-ops` (128 by default), counting a nested
    #: transaction's compares against what the outer one leaves: 126 role transactions of at most 2 compares each
    #: make 128. A server set lower is met by halving (`execute_batch`).
    batch_size = 126
    #: Batches under way at once, each on its own connection: etcd applies concurrent transactions in one Raft
    #: proposal where it can (`bench/bare/etcd_creates.py --per 126`, 2,000 creates: 14,500/s on one connection,
    #: 21,000/s on two, 22,700/s on four). Two halve the rounds of a survivor taking a dead member's thousands
    #: (`bench/bare/takeover.py etcd 6000`: the spread from first to last acquisition 0.28-0.35 s on one lane,
    #: 0.21-0.24 s on two); more only add threads to a process already sharing two cores with the store.
    parallel = 2

    @property
    def requests(self) -> int:
        return self._gw.requests + sum(gw.requests for gw in self._lane_gateways) + self._watch_requests

    def _lane_gateway(self) -> Gateway:
        """This thread's gateway (`http.client` connections are not thread-safe; the lanes run at once)."""
        gw: Gateway | None = getattr(self._local, "gateway", None)
        if gw is None:
            gw = self._local.gateway = Gateway(self.options.endpoints, self._access, self._tokens)
            self._lane_gateways.append(gw)
        return gw

    # ------------------------------------------------------------------------------------------ session
    def open(self, record: MemberRecord, listener: Listener, timeout: float) -> Opened:
        self._listener = listener

        def unavailable(exc: StoreError) -> str:
            where = ",".join(self.options.endpoints)
            hint = ("; it closed every connection without an answer: if it serves TLS only, give ca= (and "
                    "cert=, key=)" if not self.options.uses_tls and "without response" in str(exc) else "")
            return f"etcd at {where} did not answer within {timeout:g} s (connect_timeout): {exc}{hint}"

        try:
            require_listening("etcd", self.options.endpoints)
            opened = register_within(lambda budget: self._register(record, budget), timeout, self._closed,
                                     unavailable)
        except ElectError:
            self._gw.close()
            raise
        snapshot = opened.observations[0]
        assert isinstance(snapshot, Snapshot)
        self._next_rev = snapshot.rev + 1
        self._delivered = snapshot.rev
        self._watch_thread = threading.Thread(target=self._watch_loop, name=f"elect-etcd-watch-{self.member}",
                                              daemon=True)
        self._watch_thread.start()
        return opened

    def reopen(self, record: MemberRecord, timeout: float) -> Opened:
        return self._register(record, timeout)

    def members(self, timeout: float) -> dict[str, MemberRecord]:
        data = self._txn([], [self._range(self._members)], [], timeout)
        return {unb64(kv.get("key")).decode(errors="replace")[len(self._members):]:
                decode_record(unb64(kv.get("value"))) for kv in _kvs(data.get("responses", [{}])[0])}

    def _register(self, record: MemberRecord, timeout: float) -> Opened:
        """Grant a lease, enter the membership directory under it, and read everything."""
        sent = time.monotonic()
        grant = self._call("lease/grant", {"TTL": self.options.lease_seconds}, timeout)
        lease, ttl = int(grant.get("ID", 0)), int(grant.get("TTL", 0))
        if not lease or ttl <= 0:
            raise StoreError(f"lease not granted: {grant}")
        self._lease, self.session = lease, f"{lease:x}"
        self._call("kv/put", {"key": b64(self._member_key(self.session)), "value": b64(encode_record(record)),
                              "lease": lease}, timeout)
        data = self._txn([], [self._range(self._roles), self._range(self._members)], [], timeout)
        return Opened(self.session, sent + ttl, [self._snapshot(data, 0)])

    def track(self, roles: Iterable[Role]) -> None:
        """Nothing to do: the watch covers the whole prefix."""

    def close(self, timeout: float) -> None:
        self._closed.set()
        try:
            if self._lease:
                self._call("lease/revoke", {"ID": self._lease}, timeout)  # drops the directory entry
        except StoreError:
            pass
        finally:
            with self._watch_lock:
                if self._watch is not None:
                    self._watch.close()
            self._gw.close()
            for gw in self._lane_gateways:
                gw.close()
            if self._watch_thread is not None and self._watch_thread is not threading.current_thread():
                self._watch_thread.join(timeout + 1)

    # ------------------------------------------------------------------------------------------ actions
    def execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        gw = self._lane_gateway()
        if isinstance(action, Renew):
            return self._renew(gw, timeout)
        if isinstance(action, KeepAlive):
            sent = time.monotonic()
            data = self._call("lease/keepalive", {"ID": self._lease}, timeout, gw).get("result", {})
            ttl = int(data.get("TTL", 0))
            if ttl <= 0:
                raise SessionLost(f"lease {self.session} expired")
            return [LeaseSeen(sent + ttl)]
        if isinstance(action, ROLE_ACTIONS):
            answered, seen = self.execute_batch([action], timeout)[0]
            if not answered:
                raise StoreError(f"{type(action).__name__} {action.role!r}: no answer")
            return seen
        if isinstance(action, Publish):
            self._call("kv/put", {"key": b64(self._member_key(self.session)),
                                  "value": b64(encode_record(action.record)), "lease": self._lease}, timeout, gw)
            return []
        raise StoreError(f"etcd cannot {type(action).__name__}")

    def execute_batch(self, actions: Sequence[RoleAction], timeout: float) -> list[Outcome]:
        """One transaction of nested ones, one per action, each with its own compares: the outer one always
        succeeds and each inner one decides for its own role (etcd applies them all at one revision)."""
        inner = [self._role_txn(action) for action in actions]
        try:
            data = self._call("kv/txn", {"compare": [], "success": [{"request_txn": txn} for txn in inner],
                                         "failure": []}, timeout, self._lane_gateway())
        except TooManyOps:
            if len(actions) == 1:
                raise StoreError("etcd refuses even a single role's transaction: too many operations") from None
            half = len(actions) // 2
            self.batch_size = max(1, min(self.batch_size, half))
            log.warning("elect: etcd refused %d operations in one transaction (its --max-txn-ops); batches of %d "
                        "from now on", len(actions), self.batch_size)
            return self.execute_batch(actions[:half], timeout) + self.execute_batch(actions[half:], timeout)
        rev = revision(data)
        responses = data.get("responses", [])
        if len(responses) != len(actions):
            raise StoreError(f"etcd answered {len(responses)} of {len(actions)} transactions")
        return [self._role_outcome(action, response.get("response_txn", {}), rev)
                for action, response in zip(actions, responses, strict=True)]

    def _role_txn(self, action: RoleAction) -> JSON:
        """One role's transaction. A role key is written only when it changes hands (renewals touch the member's
        own entry), so its mod revision names the write that made its holder: the fencing token, and what an
        expiry, a takeover and a release compare."""
        key = self._role_key(action.role)
        delete = {"request_delete_range": {"key": b64(key)}}
        if isinstance(action, Create | Take):
            # no lease: only Delete and Expire (both timed by the core) may remove a role key
            value = encode_holder(self.member, self.session, since=time.time())
            put = {"request_put": {"key": b64(key), "value": b64(value)}}
            if isinstance(action, Create):
                return {"compare": [_compare(key, "CREATE", 0)], "success": [put],
                        "failure": [self._range(key, prefix=False)]}
            return self._silent(key, action.holder, action.version, put)
        if isinstance(action, Expire):
            return self._silent(key, action.holder, action.version, delete)
        return {"compare": [_compare(key, "MOD", action.token)], "success": [delete],
                "failure": [self._range(key, prefix=False)]}

    def _silent(self, key: str, holder: Holder, version: int, write: JSON) -> JSON:
        """`write` to `key` if `holder` still holds it and its membership entry is still at `version` (silent)."""
        member = self._member_key(holder.session)
        return {"compare": [_compare(key, "MOD", holder.token), _compare(member, "MOD", version)],
                "success": [write], "failure": [self._range(key, prefix=False), self._range(member, prefix=False)]}

    def _role_outcome(self, action: RoleAction, txn: JSON, rev: int) -> Outcome:
        """What one inner transaction came to (`txn`: its response, without a header of its own): answered either
        way, with what etcd holds now when its compares failed (another member was first)."""
        data = {**txn, "header": {"revision": rev}}
        if txn.get("succeeded"):
            if isinstance(action, Create | Take):
                return True, [RoleSeen(action.role, Holder(self.session, self.member, rev), rev)]
            return True, [RoleSeen(action.role, None, rev)]
        if isinstance(action, Expire | Take):
            return True, [self._role_seen(action.role, data), self._member_seen(action.holder.session, data)]
        return True, [self._role_seen(action.role, data)]

    def _renew(self, gw: Gateway, timeout: float) -> list[Observation]:
        """Touch this member's entry (a new mod revision: it is alive) and make sure what the core knows is current
        as of that revision, so the renewal extends only keys still this member's. Usually the watch does that:
        once it has delivered the touch itself, it has delivered everything before it, queued to the loop ahead
        of this renewal's outcome, so the renewal costs one small transaction whatever the number of roles (it
        read every key before: at 6,000 roles a megabyte of JSON four times a second per member, and renewals
        timed out). When the watch may have missed something (it restarted after a compaction) or has not
        delivered the touch within a renew interval, the renewal reads every key as well.

        A watch that is merely behind is left running: etcd serves a watch that starts at a past revision (every
        restart does) from a loop that runs every 100 ms, so restarting one that has not caught up yet only
        puts it back at the end of that wait. Restarting it from here made a loop at ttl=0.1 (request budget
        50 ms): every renewal restarted the watch before etcd delivered to it, and ended too late for the
        leadership it extended to outlive the next one (issue 61). A watch that has stopped for good falls
        silent, and its stream's read timeout restarts it (our own touches reach it every renew interval)."""
        deadline = time.monotonic() + timeout
        key = self._member_key(self.session)
        touch = {"request_put": {"key": b64(key), "ignore_value": True, "ignore_lease": True}}
        gaps = self._gaps
        full = self._covered < gaps
        reads = [self._range(self._roles), self._range(self._members)] if full else []
        data = self._txn([_compare(key, "CREATE", 0, "GREATER")], [touch, *reads], [], timeout, gw)
        if not data.get("succeeded"):
            raise SessionLost(f"membership entry of session {self.session} is gone (lease expired)")
        rev = revision(data)
        if full:
            self._covered = max(self._covered, gaps)
            return [self._snapshot(data, 1)]
        # the extension counts from when the renewal was sent, but the core extends only when it ends: waiting
        # longer than a renew interval would leave the extended leadership too little time to be renewed again
        wait = min(self.options.interval, max(0.0, deadline - time.monotonic()))
        if self._delivered_through(rev, wait) and self._gaps == gaps:
            return []
        self._behind += 1
        data = self._txn([], [self._range(self._roles), self._range(self._members)], [],
                         max(0.01, deadline - time.monotonic()), gw)
        return [self._snapshot(data, 0)]

    def _delivered_through(self, rev: int, wait: float) -> bool:
        """Whether the watch has delivered every change up to `rev` (waiting up to `wait` seconds for it)."""
        with self._delivered_cond:
            return self._delivered_cond.wait_for(lambda: self._delivered >= rev, wait)

    # ------------------------------------------------------------------------------------------ watch
    def _watch_loop(self) -> None:
        """Follow the prefix from the last delivered revision on, moving between endpoints on failure."""
        read_timeout = max(1.0, 4 * self.options.interval)
        index = self._gw.current
        while not self._closed.is_set():
            if self._next_rev <= 0:
                self._gaps += 1  # from now on: what changed meanwhile is read by the next renewal
            stream = WatchStream(self._gw, index, self._prefix, self._next_rev, self.options.timeout, read_timeout)
            with self._watch_lock:
                if self._closed.is_set():
                    return
                self._watch = stream
            self._watch_requests += 1
            try:
                for result in stream.results():
                    self._on_watch(result)
            except Exception as exc:  # any failure of the stream means: reconnect where it stopped
                log.debug("elect: etcd watch ended: %s", exc)
            finally:
                stream.close()
            index = (index + 1) % len(self._gw.endpoints)
            self._closed.wait(0.05)

    def _on_watch(self, result: JSON) -> None:
        assert self._listener is not None
        if result.get("compact_revision"):
            self._next_rev = 0  # resume from now; the next renewal's snapshot fills the gap
            raise OSError("watch compacted")
        if result.get("canceled"):
            raise OSError(f"watch canceled: {result.get('cancel_reason', '')}")
        events = result.get("events", [])
        for event in events:
            kv = event.get("kv", {})
            rev = int(kv.get("mod_revision", 0))
            seen = self._decode(kv, deleted=event.get("type") == "DELETE", rev=rev)
            if seen is not None:
                self._listener.observed(seen)
            self._next_rev = max(self._next_rev, rev + 1)
        if events:  # reported, in order, after everything before them (since the watch last started)
            with self._delivered_cond:
                self._delivered = max(self._delivered, self._next_rev - 1)
                self._delivered_cond.notify_all()

    # ------------------------------------------------------------------------------------------ decoding
    def _decode(self, kv: JSON, *, deleted: bool, rev: int) -> Observation | None:
        key = unb64(kv.get("key")).decode(errors="replace")
        if key.startswith(self._roles):
            role = role_of(key[len(self._roles):])
            return RoleSeen(role, None if deleted else self._holder(kv), rev)
        if key.startswith(self._members):
            session = key[len(self._members):]
            if deleted:
                return MemberSeen(session, None, 0, rev, in_order=True)
            return MemberSeen(session, decode_record(unb64(kv.get("value"))), int(kv.get("mod_revision", 0)), rev,
                              in_order=True)
        return None

    def _holder(self, kv: JSON) -> Holder:
        """The holder a role key names; its token the key's mod revision (see `_role_txn`)."""
        return decode_holder(unb64(kv.get("value")), int(kv.get("mod_revision", 0)),
                             f"{int(kv.get('lease', 0)):x}")

    def _snapshot(self, data: JSON, first: int) -> Snapshot:
        responses = data.get("responses", [])
        roles: dict[Role, Holder] = {}
        members: dict[str, tuple[MemberRecord, int]] = {}
        for kv in _kvs(responses[first]):
            key = unb64(kv.get("key")).decode(errors="replace")
            roles[role_of(key[len(self._roles):])] = self._holder(kv)
        for kv in _kvs(responses[first + 1]):
            key = unb64(kv.get("key")).decode(errors="replace")
            members[key[len(self._members):]] = (decode_record(unb64(kv.get("value"))), int(kv.get("mod_revision", 0)))
        return Snapshot(roles, members, revision(data))

    def _role_seen(self, role: Role, data: JSON) -> RoleSeen:
        kvs = _kvs(data.get("responses", [{}])[0])
        return RoleSeen(role, self._holder(kvs[0]) if kvs else None, revision(data))

    def _member_seen(self, session: str, data: JSON) -> MemberSeen:
        responses = data.get("responses", [])
        kvs = _kvs(responses[1]) if len(responses) > 1 else []
        if not kvs:
            return MemberSeen(session, None, 0, revision(data))
        kv = kvs[0]
        return MemberSeen(session, decode_record(unb64(kv.get("value"))), int(kv.get("mod_revision", 0)),
                          revision(data))

    # ------------------------------------------------------------------------------------------ plumbing
    def _role_key(self, role: Role) -> str:
        return self._roles + role_name(role)

    def _member_key(self, session: str) -> str:
        return self._members + session

    def _range(self, key: str, prefix: bool = True) -> JSON:
        request = {"key": b64(key)}
        if prefix:
            request["range_end"] = b64(range_end(key))
        return {"request_range": request}

    def _txn(self, compare: list[JSON], success: list[JSON], failure: list[JSON], timeout: float,
             gw: Gateway | None = None) -> JSON:
        return self._call("kv/txn", {"compare": compare, "success": success, "failure": failure}, timeout, gw)

    def _call(self, path: str, body: JSON, timeout: float, gw: Gateway | None = None) -> JSON:
        try:
            return (gw or self._gw).call(path, body, timeout)
        except GatewayError as exc:
            if exc.not_found and "lease" in exc.message:
                raise SessionLost(exc.message) from None
            if "too many operations" in exc.message:
                raise TooManyOps(exc.message) from None
            raise StoreError(str(exc)) from None
        except Unreachable as exc:
            raise StoreError(f"etcd unreachable: {exc}") from None
        except Refused as exc:
            raise StoreRefused(str(exc)) from None


def _compare(key: str, target: str, value: int, result: str = "EQUAL") -> JSON:
    field = {"CREATE": "create_revision", "MOD": "mod_revision"}[target]
    return {"key": b64(key), "target": target, "result": result, field: value}


def _kvs(response: JSON) -> list[JSON]:
    found: Any = response.get("response_range", {}).get("kvs", [])
    return list(found)


def characteristics(options: EtcdOptions) -> Characteristics:
    """Exclusive while clock rates differ by less than `max_drift` (ttl / renew_deadline - 1); a crashed
    leader's roles move after about ttl, plus up to one renew interval for the last renewal to be seen."""
    return Characteristics(exclusive=True, max_overlap=0.0, max_failover=options.ttl + options.interval,
                           graceful_handover=True,
                           token="etcd revision of the write that gave the role's key its holder",
                           observes_leaders=True, transfers=True, weights=options.fair,
                           max_drift=options.max_drift)


def timing(options: EtcdOptions) -> Timing:
    """The core's clocks for these options (the simulator's members take the same)."""
    return options.timing(silence_takeover=True, keepalive_interval=options.lease_seconds / 3)


def create(options: EtcdOptions, member: str, roles: tuple[Role, ...]) -> LeaseElector:
    store = EtcdStore(options, member)
    return LeaseElector("etcd", options, member, roles, store, timing(options), characteristics(options))
