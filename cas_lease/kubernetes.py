"""`kubernetes://`: the lease core on Kubernetes `coordination.k8s.io/v1` Leases, through the API server.

Layout in the namespace: one Lease per role (`roles_name`: `<prefix>-<role>`, or a readable slug and a hash where
the role's text is not a DNS label), written as client-go's `LeaseLock` writes it (`holderIdentity` the member id,
`acquireTime`, `renewTime`, `leaseDurationSeconds`, `leaseTransitions`) plus an annotation naming the holder's
session; and one Lease per member session (`<prefix>.member.<session>`) whose record annotation lists the roles it
contends for. A member renews by rewriting its own Lease (compare-and-swap on `resourceVersion`): its new resource
version is the proof of life the others time, on their own clocks, as for etcd. The watch of the group's Leases
makes handovers immediate; it and the lists select the group's label (`elect.io/group=PREFIX`), so other groups'
Leases in a shared namespace cost a member nothing. A role Lease made outside elect (by client-go) has no such
label until elect first writes it: it is found by name when creating it is refused, and timed by the versions the
member's own requests see.

The API server has no multi-object transaction, so a takeover that etcd makes in one (the role key, if its
holder's entry is unchanged) is two steps here: first the silent holder's member Lease is deleted on condition that
it is still at the version timed silent (`DeleteOptions.preconditions.resourceVersion`), then the role Lease is
rewritten on condition of its own version. Once the delete succeeds the holder can renew no more (its renewal is a
conditional update of a Lease that is gone), and as its last successful renewal is the one the contender timed,
it has stopped by its own clock: the argument of `cas_lease.core` holds with the delete in place of the compare.

Fencing token: `leaseTransitions`, which every writer of a `LeaseLock` (client-go, the Python client, elect)
raises by one when the holder changes. elect never deletes a role Lease (a release or an expiry clears
`holderIdentity`, keeping the count), and a Lease it creates starts from the newest resource version it has seen
(an etcd revision, and a count never rises faster than the revision), so the token keeps rising across a Lease
deleted by hand too, unless the delete and the create race a watch that has not yet shown the Lease.

For a client-go reader the record tells the truth: `renewTime` is rewritten at least every half of
`leaseDurationSeconds` (`lease_duration`) while the holder lives (with its own renewal, so a holder that
cannot renew stops rewriting), and the holder stops by its own clock (`renew_deadline`, less than half of it)
before a client-go candidate may take a record it last saw change `leaseDurationSeconds` ago. A Lease held by
a client-go candidate is timed the same way, by its record's duration.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import urlencode

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
from cas_lease.kube_api import Client, Expired, Refused, Unreachable, Watch, leases, resolve
from cas_lease.model import (
    ROLE_ACTIONS,
    Create,
    Expire,
    Holder,
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
from cas_lease.names import decode_holder, decode_record, encode_holder, encode_record
from cas_lease.options import KubernetesOptions
from elect.contract import Characteristics
from elect.errors import ElectError
from elect.json_http import JSON
from elect.reach import require_listening
from elect.roles import Role

log = logging.getLogger("cas_lease")

GROUP_LABEL = "elect.io/group"
KIND_LABEL = "elect.io/kind"
ROLE_ANNOTATION = "elect.io/role"
HOLDER_ANNOTATION = "elect.io/holder"
RECORD_ANNOTATION = "elect.io/record"
FENCED_KEPT = 1024
"""How many fenced sessions a member remembers (see `KubernetesStore._fence`)."""
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_TOKEN_BASE = 2**31 - 2**24  # leaseTransitions is an int32: room left for transitions after the base


def role_lease_name(prefix: str, role: Role) -> str:
    """The name of `role`'s Lease: `<prefix>-<role>` for a number or a DNS label (that is not all digits), else
    `<prefix>-<slug>.<hash>`: the dot, which no plain name holds, keeps the two forms apart, and the hash of the
    exact role keeps hashed names apart."""
    if isinstance(role, int):
        return f"{prefix}-{role}" if role >= 0 else _hashed(prefix, role)
    if _LABEL.fullmatch(role) and not role.isdigit() and len(prefix) + 1 + len(role) <= 253:
        return f"{prefix}-{role}"
    return _hashed(prefix, role)


def _hashed(prefix: str, role: Role) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", str(role).lower()).strip("-")[:40].strip("-") or "role"
    digest = hashlib.blake2b(f"{type(role).__name__}\0{role}".encode(), digest_size=5).hexdigest()
    return f"{prefix}-{slug}.{digest}"


def role_from_name(prefix: str, name: str) -> Role | None:
    """The role a plain Lease name (one without elect's annotation, e.g. made by client-go) stands for, or None."""
    rest = name[len(prefix) + 1:] if name.startswith(prefix + "-") else ""
    if not rest or "." in rest:
        return None
    return int(rest) if rest.isdigit() else rest


def micro_time(wall: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KubernetesStore:
    """The `Store` of `cas_lease.driver` on the Kubernetes API."""

    #: Role writes go one request each (the API has no batch); four lanes of 16 keep a survivor taking a dead
    #: member's roles from waiting on one connection's round trips.
    batch_size = 16
    parallel = 4

    def __init__(self, options: KubernetesOptions, member: str, roles: int = 0) -> None:
        self.options = options
        self.member = member
        self._endpoint = resolve(options)
        self._client = Client(self._endpoint)
        self._path = leases(options.namespace)
        # list and watch only this group's Leases: a namespace shared with other groups (or holding thousands of
        # their Leases) costs a member nothing then. A role Lease created outside elect (client-go) carries no
        # label until elect first writes it: such a one is found by name when a create is refused (see `_create`)
        self._selector = f"{GROUP_LABEL}={options.prefix}"
        self._listing = f"{self._path}?{urlencode({'labelSelector': self._selector})}"
        self._prefix = options.prefix
        self._member_prefix = f"{options.prefix}.member."
        self._duration = options.lease_seconds_for(roles)
        self._refresh_age = self._duration / 2 - options.interval  # rewrite a role Lease older than this
        # a renewal sent at s may move the deadline to s + renew_deadline only if every role Lease was written after
        # s + renew_deadline - leaseDurationSeconds: a client-go candidate may take one that long after its last write
        self._stale_age = self._duration - options.deadline
        self.session = ""
        self._member_rv = ""
        self._record: MemberRecord | None = None
        self._listener: Listener | None = None
        self._lock = threading.Lock()
        self._objects: dict[str, JSON] = {}  # our Leases as last seen (by name): for the resource versions
        self._written: dict[str, float] = {}  # role Lease name -> monotonic time this member last wrote it
        self._roles: dict[str, Role] = {}     # role Lease name -> role
        self._foreign: set[str] = set()       # role Leases whose holder is outside elect (a pseudo-member each)
        self._fenced: dict[str, None] = {}    # sessions whose member Lease this member deleted, oldest first
        # (at most FENCED_KEPT: one forgotten costs one DELETE answered 404 if its roles are taken over again)
        self._refresher: ThreadPoolExecutor | None = None
        # member sessions by the version last seen and when (this member's clock) it was first seen: a member Lease
        # unchanged for `_abandoned` belongs to a process long gone without closing (killed): it is deleted, on
        # condition of that version, as nothing else would ever remove it (etcd's leases do that there)
        self._member_versions: dict[str, tuple[int, float]] = {}
        self._abandoned = max(10 * options.ttl, 3.0 * self._duration)
        self._collected = time.monotonic()
        self._closed = threading.Event()
        self._watch: Watch | None = None
        self._watch_thread: threading.Thread | None = None
        self._watch_lock = threading.Lock()
        self._list_rv = 0
        self._delivered = 0
        self._delivered_cond = threading.Condition()

    @property
    def requests(self) -> int:
        return self._client.requests

    # ------------------------------------------------------------------------------------------ session
    def open(self, record: MemberRecord, listener: Listener, timeout: float) -> Opened:
        self._listener = listener

        def unavailable(exc: StoreError) -> str:
            return (f"the Kubernetes API at {self._endpoint.url} ({self._endpoint.source}) did not answer within "
                    f"{timeout:g} s (connect_timeout): {exc}")

        try:
            host = f"[{self._endpoint.host}]" if ":" in self._endpoint.host else self._endpoint.host
            require_listening(f"the Kubernetes API ({self._endpoint.source})", [f"{host}:{self._endpoint.port}"])
            opened = register_within(lambda budget: self._register(record, budget), timeout, self._closed,
                                     unavailable)
        except ElectError:
            self._client.close()
            raise
        self._watch_thread = threading.Thread(target=self._watch_loop, name=f"elect-kube-watch-{self.member}",
                                              daemon=True)
        self._watch_thread.start()
        return opened

    def reopen(self, record: MemberRecord, timeout: float) -> Opened:
        return self._register(record, timeout)

    def _register(self, record: MemberRecord, timeout: float) -> Opened:
        """Create this session's member Lease and read every Lease of the group."""
        session = secrets.token_hex(8)
        now = time.time()
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self._member_prefix + session,
                             "labels": {GROUP_LABEL: self._prefix, KIND_LABEL: "member"},
                             "annotations": {RECORD_ANNOTATION: encode_record(record).decode()}},
                "spec": {"holderIdentity": self.member, "leaseDurationSeconds": self._duration,
                         "acquireTime": micro_time(now), "renewTime": micro_time(now)}}
        status, data = self._call("POST", self._path, body, timeout)
        if status != 201:
            raise StoreError(f"member Lease not created: HTTP {status} {data.get('message', '')}")
        self.session, self._record = session, record
        self._member_rv = str(data["metadata"]["resourceVersion"])
        snapshot = self._list(timeout)
        return Opened(session, math.inf, [snapshot])

    def track(self, roles: Iterable[Role]) -> None:
        """Nothing to do: the watch covers the namespace."""

    def members(self, timeout: float) -> dict[str, MemberRecord]:
        status, data = self._call("GET", self._listing, None, timeout)
        if status != 200:
            raise StoreError(f"cannot list Leases: HTTP {status} {data.get('message', '')}")
        found: dict[str, MemberRecord] = {}
        for obj in data.get("items") or []:
            name = _name(obj)
            if name.startswith(self._member_prefix):
                found[name[len(self._member_prefix):]] = _record(obj)
        return found

    def close(self, timeout: float) -> None:
        self._closed.set()
        try:
            if self.session:  # the directory entry goes at once: the others need not time this member's silence
                self._call("DELETE", f"{self._path}/{self._member_prefix}{self.session}", None, timeout)
        except StoreError:
            pass
        finally:
            with self._watch_lock:
                if self._watch is not None:
                    self._watch.close()
            if self._refresher is not None:
                self._refresher.shutdown(wait=False, cancel_futures=True)
            self._client.close()
            if self._watch_thread is not None and self._watch_thread is not threading.current_thread():
                self._watch_thread.join(timeout + 1)

    # ------------------------------------------------------------------------------------------ actions
    def execute(self, action: StoreAction, timeout: float) -> list[Observation]:
        if isinstance(action, Renew):
            return self._renew(timeout)
        if isinstance(action, ROLE_ACTIONS):
            answered, seen = self.execute_batch([action], timeout)[0]
            if not answered:
                raise StoreError(f"{type(action).__name__} {action.role!r}: no answer")
            return seen
        if isinstance(action, Publish):
            self._record = action.record
            self._write_member(time.monotonic() + timeout)
            return []
        raise StoreError(f"kubernetes cannot {type(action).__name__}")

    def execute_batch(self, actions: Sequence[RoleAction], timeout: float) -> list[Outcome]:
        """Each action on its own (the API has no transaction), in order; an action whose request failed is
        unanswered, the others go on."""
        deadline = time.monotonic() + timeout
        outcomes: list[Outcome] = []
        for action in actions:
            try:
                outcomes.append((True, self._role_action(action, deadline)))
            except SessionLost:
                raise
            except StoreError as exc:
                log.debug("elect: kubernetes %s %r: %s", type(action).__name__, action.role, exc)
                outcomes.append((False, []))
        return outcomes

    def _role_action(self, action: RoleAction, deadline: float) -> list[Observation]:
        name = role_lease_name(self._prefix, action.role)
        with self._lock:
            self._roles[name] = action.role
        # a holder outside elect is timed by its role Lease's version: the write is conditional on exactly that one
        foreign = isinstance(action, Expire | Take) and action.holder.session == _pseudo_session(name)
        if isinstance(action, Expire | Take) and not foreign:
            refuted = self._fence(action.holder, action.version, deadline)
            if refuted is not None:
                return refuted
        for _ in range(4):  # a conflict with a mere rewrite of the same holding is tried again
            current = self._current(name)
            if isinstance(action, Create):
                if current is None:
                    return self._create(action.role, name, deadline)
                if _holder_identity(current):
                    return [self._role_seen(current, action.role)]
            elif isinstance(action, Expire | Take):
                if current is None or self._holder(current) != action.holder or \
                        (foreign and _rv(current) != action.version):
                    return self._seen_now(action.role, current)
            elif current is None or self._holder(current) != Holder(self.session, self.member, action.token):
                return self._seen_now(action.role, current)
            assert current is not None
            body = self._role_body(action, current)
            sent = time.monotonic()
            status, data = self._call("PUT", f"{self._path}/{name}", body, _left(deadline))
            if status == 200:
                with self._lock:
                    self._written[name] = sent
                return [self._remember(data, action.role)]
            if status == 404:
                self._forget(name)
                continue
            if status != 409:
                raise StoreError(f"update of Lease {name}: HTTP {status} {data.get('message', '')}")
            current = self._refetch(name, action.role, deadline)
            if foreign:  # the holder rewrote its record: alive
                return self._seen_now(action.role, current)
        raise StoreError(f"Lease {name} kept changing under a {type(action).__name__}")

    def _seen_now(self, role: Role, current: JSON | None) -> list[Observation]:
        """What a refused action shows: who holds the role now (and, held outside elect, that holder's version)."""
        if current is None:
            return [RoleSeen(role, None, self._list_rv)]
        return [*self._pseudo(current), self._role_seen(current, role)]

    def _fence(self, holder: Holder, version: int, deadline: float) -> list[Observation] | None:
        """Before taking a silent elect holder's role: delete its member Lease if still at `version` (the one timed
        silent), so it can renew no more. None to go on; else what refutes the silence (it renewed)."""
        with self._lock:
            done = holder.session in self._fenced
        if done or version == 0:
            return None
        status, data = self._call("DELETE", f"{self._path}/{self._member_prefix}{holder.session}",
                                  {"kind": "DeleteOptions", "apiVersion": "v1",
                                   "preconditions": {"resourceVersion": str(version)}}, _left(deadline))
        if status in (200, 404):  # deleted now, or gone already (its deadline passed: see the module's docstring)
            with self._lock:
                self._fenced[holder.session] = None
                if len(self._fenced) > FENCED_KEPT:
                    del self._fenced[next(iter(self._fenced))]
            return None
        if status == 409:
            status, data = self._call("GET", f"{self._path}/{self._member_prefix}{holder.session}", None,
                                      _left(deadline))
            if status == 200:
                return [MemberSeen(holder.session, _record(data), _rv(data), _rv(data))]
            return None
        raise StoreError(f"delete of member Lease {holder.session}: HTTP {status} {data.get('message', '')}")

    def _create(self, role: Role, name: str, deadline: float) -> list[Observation]:
        now = time.time()
        base = self._list_rv if self._list_rv < _MAX_TOKEN_BASE else 0
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "labels": {GROUP_LABEL: self._prefix, KIND_LABEL: "role"},
                             "annotations": {ROLE_ANNOTATION: json.dumps(role),
                                             HOLDER_ANNOTATION: encode_holder(self.member, self.session).decode()}},
                "spec": {"holderIdentity": self.member, "leaseDurationSeconds": self._duration,
                         "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": base}}
        sent = time.monotonic()
        status, data = self._call("POST", self._path, body, _left(deadline))
        if status == 201:
            with self._lock:
                self._written[name] = sent
            return [self._remember(data, role)]
        if status == 409:  # someone was first
            return self._seen_now(role, self._refetch(name, role, deadline))
        raise StoreError(f"create of Lease {name}: HTTP {status} {data.get('message', '')}")

    def _role_body(self, action: RoleAction, current: JSON) -> JSON:
        """The Lease `current` rewritten by `action`: this member made holder (one more transition), or released."""
        body: JSON = json.loads(json.dumps(current))
        meta, spec = body.setdefault("metadata", {}), body.setdefault("spec", {})
        annotations = meta.setdefault("annotations", {}) or {}
        meta["annotations"] = annotations
        meta["labels"] = {**(meta.get("labels") or {}), GROUP_LABEL: self._prefix, KIND_LABEL: "role"}  # watched
        now = micro_time(time.time())
        spec["leaseDurationSeconds"] = self._duration
        spec["renewTime"] = now
        if isinstance(action, Create | Take):
            annotations[ROLE_ANNOTATION] = json.dumps(action.role)
            annotations[HOLDER_ANNOTATION] = encode_holder(self.member, self.session).decode()
            spec["holderIdentity"] = self.member
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        else:
            annotations.pop(HOLDER_ANNOTATION, None)
            spec.pop("holderIdentity", None)
        return body

    # ------------------------------------------------------------------------------------------ renewal
    def _renew(self, timeout: float) -> list[Observation]:
        """Rewrite this member's Lease (a new resource version: it is alive), then the role Leases it holds that a
        client-go reader would soon find stale, and wait until the watch has delivered the member Lease's write:
        everything before it has then been reported (as for etcd), so the renewal extends only what is still ours.
        As for etcd (`EtcdStore._renew`, issue 61), the wait is at most a renew interval, and a watch that is only
        behind is left running while the renewal lists every Lease: restarting it from here could put it behind
        again on every renewal; one that stopped falls silent and its own read timeout restarts it (our member
        Lease is rewritten every renew interval)."""
        sent = time.monotonic()
        deadline = sent + timeout
        rv = self._write_member(deadline)
        seen = self._refresh_roles(sent, deadline)
        if sent - self._collected >= self._abandoned / 3:
            self._collected = sent
            self._pool().submit(self._collect)
        if self._delivered_through(rv, min(self.options.interval, _left(deadline))):
            return seen
        return [*seen, self._list(_left(deadline))]  # behind: read everything now, the watch catches up on its own

    def _write_member(self, deadline: float) -> int:
        """Rewrite this session's member Lease on condition of its last version; its new version."""
        name = self._member_prefix + self.session
        assert self._record is not None
        for _ in range(2):
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "resourceVersion": self._member_rv,
                                 "labels": {GROUP_LABEL: self._prefix, KIND_LABEL: "member"},
                                 "annotations": {RECORD_ANNOTATION: encode_record(self._record).decode()}},
                    "spec": {"holderIdentity": self.member, "leaseDurationSeconds": self._duration,
                             "renewTime": micro_time(time.time())}}
            status, data = self._call("PUT", f"{self._path}/{name}", body, _left(deadline))
            if status == 200:
                self._member_rv = str(data["metadata"]["resourceVersion"])
                return int(self._member_rv)
            if status == 409:  # an earlier write whose answer was lost landed after all: only a fence deletes it
                status, data = self._call("GET", f"{self._path}/{name}", None, _left(deadline))
                if status == 200:
                    self._member_rv = str(data["metadata"]["resourceVersion"])
                    continue
            if status == 404:
                raise SessionLost(f"member Lease of session {self.session} is gone (taken over as silent)")
            raise StoreError(f"renewal: HTTP {status} {data.get('message', '')}")
        raise StoreError(f"renewal: member Lease {name} changed under this member's own writes")

    def _refresh_roles(self, sent: float, deadline: float) -> list[Observation]:
        """Rewrite `renewTime` of the role Leases this session holds that are older than half their duration, oldest
        first, on `parallel` connections at once, for at most half the renewal's budget (what is left stays due for
        the next renewal: a cold start's hundreds spread over a few). Then the renewal may extend the leaderships
        only if no role Lease is so old that a client-go candidate, timing it on its own clock, could take it
        before the new deadline: StoreError (no extension) otherwise."""
        stop_at = sent + (deadline - sent) / 2
        with self._lock:
            written = dict(self._written)
            held = list(self._objects.items())
        own = [name for name, obj in held
               if (holder := self._holder(obj)) is not None and holder.session == self.session]
        due = sorted((name for name in own if sent - written.get(name, -math.inf) >= self._refresh_age),
                     key=lambda name: written.get(name, -math.inf))
        if len(due) <= 1:
            results = [self._refresh(name, deadline, stop_at) for name in due]
        else:
            results = list(self._pool().map(lambda name: self._refresh(name, deadline, stop_at), due))
        with self._lock:
            oldest = min((self._written.get(name, -math.inf) for name in own if name in self._objects), default=sent)
        if sent - oldest > self._stale_age:
            raise StoreError(f"role Leases not rewritten within {self._stale_age:g} s (the API server is too slow for "
                             f"{len(own)} roles at lease_duration={self._duration}): not extending")
        return [seen for found in results for seen in found]

    def _pool(self) -> ThreadPoolExecutor:
        if self._refresher is None:
            self._refresher = ThreadPoolExecutor(self.parallel, thread_name_prefix=f"elect-kube-refresh-{self.member}")
        return self._refresher

    def _note_member(self, session: str, rv: int | None) -> None:
        with self._lock:
            if rv is None:
                self._member_versions.pop(session, None)
            elif self._member_versions.get(session, (None, 0.0))[0] != rv:
                self._member_versions[session] = (rv, time.monotonic())

    def _collect(self) -> None:
        """Delete member Leases unchanged for `_abandoned` on this member's clock (see `_member_versions`), each on
        condition of the version seen: a member that renewed meanwhile keeps its Lease (409)."""
        now = time.monotonic()
        with self._lock:
            gone = [(session, rv) for session, (rv, since) in self._member_versions.items()
                    if session != self.session and now - since >= self._abandoned]
        for session, rv in gone[:20]:
            try:
                self._call("DELETE", f"{self._path}/{self._member_prefix}{session}",
                           {"kind": "DeleteOptions", "apiVersion": "v1",
                            "preconditions": {"resourceVersion": str(rv)}}, self.options.timeout)
            except StoreError as exc:
                log.debug("elect: kubernetes: removing abandoned member Lease %s: %s", session, exc)
                return

    def _refresh(self, name: str, deadline: float, stop_at: float) -> list[Observation]:
        current, role = self._current(name), self._roles.get(name)
        sent = time.monotonic()
        if current is None or role is None or sent >= stop_at:
            return []
        body = json.loads(json.dumps(current))
        body["spec"]["renewTime"] = micro_time(time.time())
        status, data = self._call("PUT", f"{self._path}/{name}", body, _left(deadline))
        if status == 200:
            with self._lock:
                self._written[name] = sent
            self._remember(data, role)
            return []
        if status in (404, 409):
            return self._seen_now(role, self._refetch(name, role, deadline))
        raise StoreError(f"rewrite of Lease {name}: HTTP {status} {data.get('message', '')}")

    def _delivered_through(self, rv: int, wait: float) -> bool:
        with self._delivered_cond:
            return self._delivered_cond.wait_for(lambda: self._delivered >= rv, wait)

    # ------------------------------------------------------------------------------------------ watch
    def _watch_loop(self) -> None:
        """Follow the group's Leases from the last list on; list again when the watch's version expired."""
        read_timeout = max(2.0, 4 * self.options.interval)
        while not self._closed.is_set():
            watch = Watch(self._client, self.options.namespace, str(self._list_rv), self.options.timeout,
                          read_timeout, self._selector)
            with self._watch_lock:
                if self._closed.is_set():
                    return
                self._watch = watch
            try:
                for kind, obj in watch.events():
                    self._on_event(kind, obj)
            except Expired:
                self._relist()
            except Refused as exc:
                log.warning("elect: kubernetes watch refused: %s", exc)
                self._closed.wait(1.0)
            except Exception as exc:  # any other failure of the stream: reconnect where it stopped
                log.debug("elect: kubernetes watch ended: %s", exc)
            finally:
                watch.close()
            self._closed.wait(0.05)

    def _relist(self) -> None:
        while not self._closed.is_set():
            try:
                snapshot = self._list(self.options.timeout)
            except StoreError as exc:
                log.debug("elect: kubernetes list failed: %s", exc)
                self._closed.wait(0.1)
                continue
            assert self._listener is not None
            self._listener.observed(snapshot)
            return

    def _on_event(self, kind: str, obj: JSON) -> None:
        assert self._listener is not None
        rv = _rv(obj)
        if kind != "BOOKMARK":
            for seen in self._decode(obj, deleted=kind == "DELETED"):
                self._listener.observed(seen)
        with self._delivered_cond:
            self._list_rv = max(self._list_rv, rv)
            self._delivered = max(self._delivered, rv)
            self._delivered_cond.notify_all()

    def _list(self, timeout: float) -> Snapshot:
        status, data = self._call("GET", self._listing, None, timeout)
        if status != 200:
            raise StoreError(f"cannot list Leases: HTTP {status} {data.get('message', '')}")
        rv = int((data.get("metadata") or {}).get("resourceVersion") or 0)
        roles: dict[Role, Holder] = {}
        members: dict[str, tuple[MemberRecord, int]] = {}
        listed: set[str] = set()
        for obj in data.get("items") or []:
            name = _name(obj)
            if name.startswith(self._member_prefix):
                members[name[len(self._member_prefix):]] = (_record(obj), _rv(obj))
                self._note_member(name[len(self._member_prefix):], _rv(obj))
                continue
            role = self._role_of(obj)
            if role is None:
                continue
            listed.add(name)
            self._remember(obj, role)
            holder = self._holder(obj)
            if holder is not None:
                roles[role] = holder
                pseudo = self._pseudo(obj)
                for seen in pseudo:
                    assert isinstance(seen, MemberSeen) and seen.record is not None
                    members[seen.session] = (seen.record, seen.version)
        with self._lock:
            for name in set(self._objects) - listed:
                self._objects.pop(name, None)
        with self._delivered_cond:
            self._list_rv = max(self._list_rv, rv)
            self._delivered = max(self._delivered, rv)
            self._delivered_cond.notify_all()
        return Snapshot(roles, members, rv)

    # ------------------------------------------------------------------------------------------ decoding
    def _decode(self, obj: JSON, *, deleted: bool) -> list[Observation]:
        name, rv = _name(obj), _rv(obj)
        if name.startswith(self._member_prefix):
            session = name[len(self._member_prefix):]
            self._note_member(session, None if deleted else rv)
            return [MemberSeen(session, None if deleted else _record(obj), 0 if deleted else rv, rv, in_order=True)]
        role = self._role_of(obj)
        if role is None:
            return []
        if deleted:
            was_foreign = self._forget(name)
            return [RoleSeen(role, None, rv), *([MemberSeen(_pseudo_session(name), None, 0, rv)]
                                                if was_foreign else [])]
        with self._lock:
            was_foreign = name in self._foreign
        seen: list[Observation] = [self._remember(obj, role)]
        pseudo = self._pseudo(obj)
        if pseudo:
            seen = [*pseudo, *seen]  # the holder's entry before its role: the core times it from its first sight
        elif was_foreign:
            seen.append(MemberSeen(_pseudo_session(name), None, 0, rv))
        return seen

    def _role_of(self, obj: JSON) -> Role | None:
        found = lease_role(self._prefix, obj)
        if found is not None:
            with self._lock:
                self._roles[_name(obj)] = found
        return found

    @staticmethod
    def _holder(obj: JSON) -> Holder | None:
        return lease_holder(obj)

    def _pseudo(self, obj: JSON) -> list[Observation]:
        """For a Lease held outside elect: its holder as a member of its own, contending for this role only, whose
        version is the Lease's (each renewal of the record changes it) and whose silence is the record's duration."""
        name, holder = _name(obj), self._holder(obj)
        foreign = holder is not None and holder.session == _pseudo_session(name)
        with self._lock:
            (self._foreign.add if foreign else self._foreign.discard)(name)
            role = self._roles.get(name)
        if not foreign or holder is None or role is None:
            return []
        duration = float((obj.get("spec") or {}).get("leaseDurationSeconds") or 0)
        record = MemberRecord(holder.member, frozenset({role}), silence=duration)
        return [MemberSeen(holder.session, record, _rv(obj), _rv(obj))]

    def _role_seen(self, obj: JSON, role: Role) -> RoleSeen:
        return RoleSeen(role, self._holder(obj), _rv(obj))

    # ------------------------------------------------------------------------------------------ the cache
    def _remember(self, obj: JSON, role: Role) -> RoleSeen:
        """Keep the newest version of `role`'s Lease (for the next conditional write) and say who holds it."""
        name = _name(obj)
        with self._lock:
            known = self._objects.get(name)
            if known is None or _rv(known) <= _rv(obj):
                self._objects[name] = obj
        return self._role_seen(obj, role)

    def _forget(self, name: str) -> bool:
        """Drop a deleted role Lease from the cache; whether its holder was outside elect."""
        with self._lock:
            self._objects.pop(name, None)
            foreign = name in self._foreign
            self._foreign.discard(name)
        return foreign

    def _current(self, name: str) -> JSON | None:
        with self._lock:
            return self._objects.get(name)

    def _refetch(self, name: str, role: Role, deadline: float) -> JSON | None:
        status, data = self._call("GET", f"{self._path}/{name}", None, _left(deadline))
        if status == 404:
            self._forget(name)
            return None
        if status != 200:
            raise StoreError(f"read of Lease {name}: HTTP {status} {data.get('message', '')}")
        self._remember(data, role)
        return data

    # ------------------------------------------------------------------------------------------ plumbing
    def _call(self, method: str, path: str, body: JSON | None, timeout: float) -> tuple[int, JSON]:
        try:
            return self._client.request(method, path, body, max(0.01, timeout))
        except Unreachable as exc:
            raise StoreError(f"Kubernetes API unreachable: {exc}") from None
        except Refused as exc:
            raise StoreRefused(str(exc)) from None


def lease_role(prefix: str, obj: JSON) -> Role | None:
    """The role a Lease stands for in group `prefix`: from elect's annotation (if of this group), else from a plain
    name (a Lease made by client-go for it); None for any other Lease."""
    name = _name(obj)
    if not name.startswith(prefix + "-"):
        return None
    meta = obj.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(ROLE_ANNOTATION)
    if raw is None:
        return role_from_name(prefix, name)
    if (meta.get("labels") or {}).get(GROUP_LABEL) != prefix:
        return None
    try:
        role = json.loads(raw)
    except ValueError:
        return None
    return role if isinstance(role, (str, int)) and not isinstance(role, bool) else None


def lease_acquired(obj: JSON) -> float | None:
    """When the Lease's holder took it (its `acquireTime`, wall seconds), or None."""
    stamp = (obj.get("spec") or {}).get("acquireTime")
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def lease_holder(obj: JSON) -> Holder | None:
    """Who holds a role Lease: an elect session (its annotation names the member the spec names), a holder outside
    elect (a pseudo-session of the Lease's own), or nobody; the token is `leaseTransitions`."""
    identity = _holder_identity(obj)
    if not identity:
        return None
    token = int((obj.get("spec") or {}).get("leaseTransitions") or 0)
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(HOLDER_ANNOTATION)
    if raw:
        holder = decode_holder(str(raw).encode(), token)
        if holder.member == identity:
            return holder
    return Holder(_pseudo_session(_name(obj)), identity, token)


def _left(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())


def _name(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _rv(obj: JSON) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _holder_identity(obj: JSON) -> str:
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


def _record(obj: JSON) -> MemberRecord:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(RECORD_ANNOTATION, "")
    return decode_record(str(raw).encode())


def _pseudo_session(name: str) -> str:
    return "lease:" + name


def characteristics(options: KubernetesOptions) -> Characteristics:
    """Exclusive while clock rates differ by less than `max_drift` (ttl / renew_deadline - 1); a crashed
    leader's roles move after about ttl, plus up to one renew interval for the last renewal to be seen."""
    return Characteristics(exclusive=True, max_overlap=0.0, max_failover=options.ttl + options.interval,
                           graceful_handover=True,
                           token="the role Lease's leaseTransitions (raised by every holder change)",
                           observes_leaders=True, transfers=True, weights=options.fair,
                           max_drift=options.max_drift)


def create(options: KubernetesOptions, member: str, roles: tuple[Role, ...]) -> LeaseElector:
    timing = options.timing(silence_takeover=True)
    store = KubernetesStore(options, member, len(roles))
    return LeaseElector("kubernetes", options, member, roles, store, timing, characteristics(options))

