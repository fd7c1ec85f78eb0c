"""kubernetes:// on a real kube-apiserver (Kubernetes' own, built by ./setup, on etcd): what only this store has.

The behaviour every method shares (kill, stop, pause, transfer, drain, ...) is the conformance suite's; here: the
record a client-go reader sees, a holder outside elect (written as client-go's LeaseLock writes it) respected while
it renews and taken once silent for its own duration, the token across a Lease deleted by hand, and the refusals.
"""

from __future__ import annotations

import itertools
import json
import math
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from lease_helpers import unique

import elect
from cas_lease.kubernetes import micro_time, role_lease_name
from elect.config import spec_from_url
from elect.errors import AccessRefused, InfrastructureUnavailable
from elect_bench.methods import kube_prefix
from elect_cluster.local import LocalCluster
from elect_cluster.ports import free_ports
from elect_cluster.waiting import holds_for, wait_until

pytestmark = pytest.mark.infra

TTL = 1.0


class Admin:
    """Requests to the API server as its administrator (what kubectl or client-go would do beside elect)."""

    def __init__(self, cluster: LocalCluster) -> None:
        member = cluster.members("kubernetes")[0]
        self.base = f"https://{member.address}/apis/coordination.k8s.io/v1/namespaces/default/leases"
        self.token = Path(member.extra["admin_token_file"]).read_text().strip()
        self.context = ssl.create_default_context(cafile=member.extra["ca"])

    def call(self, method: str, name: str = "", body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(self.base + (f"/{name}" if name else ""), method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context) as response:
                return int(response.status), json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def lease(self, name: str) -> dict[str, Any]:
        status, data = self.call("GET", name)
        assert status == 200, (status, data)
        return data


@pytest.fixture
def admin(kubernetes: LocalCluster) -> Admin:
    return Admin(kubernetes)


@pytest.fixture
def group(kubernetes: LocalCluster) -> Callable[..., str]:
    """`group(name, **params)`: the URL of a fresh group (its own Lease prefix) as the member user."""
    endpoints = kubernetes.endpoints

    def make(name: str, **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"ttl": str(TTL), "kubeconfig": endpoints.kubeconfig,
                                                  "prefix": kube_prefix(unique(name)), **params}.items())
        return f"kubernetes://{endpoints.kubernetes[0]}/default?{query}"

    return make


@pytest.fixture
def electors() -> Iterator[list[elect.Elector]]:
    made: list[elect.Elector] = []
    yield made
    for e in made:
        e.stop()


def prefix_of(url: str) -> str:
    return url.split("prefix=")[1].split("&")[0]


def test_a_role_lease_reads_as_client_go_writes_it_and_its_renew_time_keeps_moving(
        group: Callable[..., str], admin: Admin, electors: list[elect.Elector]) -> None:
    url = group("record")
    a = elect.connect(url, ["orders", "Odd role/7"], member="member-a")
    electors.append(a)
    a.start()
    wait_until(lambda: a.leading() == {"orders", "Odd role/7"}, 20.0, what="a leading both roles")
    prefix = prefix_of(url)
    for role in ("orders", "Odd role/7"):
        lease = admin.lease(role_lease_name(prefix, role))
        spec = lease["spec"]
        assert spec["holderIdentity"] == "member-a"
        assert spec["leaseDurationSeconds"] == 2  # max(1, ceil(2 ttl))
        assert spec["leaseTransitions"] == a.leadership(role).token  # type: ignore[union-attr]
        assert json.loads(lease["metadata"]["annotations"]["elect.io/role"]) == role
    assert admin.lease(f"{prefix}-orders")["spec"]["holderIdentity"] == "member-a"  # a DNS label: a plain name

    def renewed_since(seen: str) -> bool:
        return bool(admin.lease(f"{prefix}-orders")["spec"]["renewTime"] != seen)

    first = admin.lease(f"{prefix}-orders")["spec"]["renewTime"]
    began = time.monotonic()
    wait_until(lambda: renewed_since(first), 5.0, what="renewTime rewritten")
    assert time.monotonic() - began <= 1.0 + 0.5  # at least every half of leaseDurationSeconds (and a poll)


def test_a_holder_outside_elect_is_left_alone_while_it_renews_and_taken_once_silent_for_its_duration(
        group: Callable[..., str], admin: Admin, electors: list[elect.Elector]) -> None:
    """A record as client-go's LeaseLock writes it (holderIdentity, leaseDurationSeconds, renewTime,
    leaseTransitions; no label, so outside the member's watch), renewed every 0.5 s: an elect member contending for
    the role must wait; once the renewals stop it takes the Lease after the record's 2 s (timed on its own clock
    from the last change its own requests saw)."""
    url = group("foreign")
    name = f"{prefix_of(url)}-x"
    now = micro_time(time.time())
    status, _ = admin.call("POST", body={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                         "metadata": {"name": name},
                                         "spec": {"holderIdentity": "client-go-1", "leaseDurationSeconds": 2,
                                                  "acquireTime": now, "renewTime": now, "leaseTransitions": 4}})
    assert status == 201
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(0.5):
            lease = admin.lease(name)
            lease["spec"]["renewTime"] = micro_time(time.time())
            admin.call("PUT", name, lease)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        a = elect.connect(url, ["x"], member="a")
        electors.append(a)
        a.start()
        holds_for(lambda: not a.is_leader("x") and admin.lease(name)["spec"]["holderIdentity"] == "client-go-1",
                  4.0, 0.1, what="a waiting while client-go-1 renews")  # twice the record's duration
    finally:
        stop.set()
        renewer.join()
    silent = time.monotonic()
    wait_until(lambda: a.is_leader("x"), 10.0, what="a taking the silent holder's Lease")
    took = time.monotonic() - silent
    assert took >= 1.5, took  # not before the record's own duration (less the last renewal's age)
    lease = admin.lease(name)
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseTransitions"] == 5
    assert a.leadership("x").token == 5  # type: ignore[union-attr]
    # labelled as the group's once elect wrote it: its members' list and watch (by that label) see it from now on
    assert lease["metadata"]["labels"] == {"elect.io/group": prefix_of(url), "elect.io/kind": "role"}


def test_a_client_go_style_takeover_of_an_elect_lease_is_seen_and_respected(
        group: Callable[..., str], admin: Admin, electors: list[elect.Elector]) -> None:
    """What client-go does with an expired record: rewrite it with its own holderIdentity and one more transition,
    keeping the annotations it read. The elect member must see a holder outside elect, not its own session."""
    url = group("taken")
    a = elect.connect(url, ["x"], member="a")
    electors.append(a)
    a.start()
    wait_until(lambda: a.is_leader("x"), 20.0, what="a leading x")
    a.stop()  # released: holderIdentity cleared, the count kept
    name = f"{prefix_of(url)}-x"
    lease = admin.lease(name)
    assert not lease["spec"].get("holderIdentity")
    lease["spec"].update(holderIdentity="client-go-2", leaseDurationSeconds=30, renewTime=micro_time(time.time()),
                         leaseTransitions=lease["spec"]["leaseTransitions"] + 1)
    assert admin.call("PUT", name, lease)[0] == 200
    b = elect.connect(url, ["x"], member="b")
    electors.append(b)
    b.start()
    holds_for(lambda: not b.is_leader("x"), 3.0, 0.1, what="b waiting: client-go-2 holds x for 30 s")


def test_the_token_keeps_rising_across_a_lease_deleted_by_hand(group: Callable[..., str], admin: Admin,
                                                                electors: list[elect.Elector]) -> None:
    url = group("deleted")
    a = elect.connect(url, ["x"], member="a")
    electors.append(a)
    a.start()
    wait_until(lambda: a.is_leader("x"), 20.0, what="a leading x")
    first = a.leadership("x").token  # type: ignore[union-attr]
    a.stop()
    assert admin.call("DELETE", f"{prefix_of(url)}-x")[0] == 200
    b = elect.connect(url, ["x"], member="b")
    electors.append(b)
    b.start()
    wait_until(lambda: b.is_leader("x"), 20.0, what="b leading x")
    assert b.leadership("x").token > first  # type: ignore[union-attr]


def test_a_user_without_the_lease_role_is_refused_naming_the_verb(kubernetes: LocalCluster) -> None:
    where = kubernetes.endpoints.kubernetes[0]
    nobody = kubernetes.members("kubernetes")[0].extra["nobody_kubeconfig"]
    e = elect.connect(f"kubernetes://{where}/default?prefix=refused&kubeconfig={nobody}&connect_timeout=5", ["x"],
                      member="n")
    with pytest.raises(AccessRefused, match=r"forbids create on leases\.coordination\.k8s\.io.*get, list, watch"):
        e.start()


def test_a_wrong_token_is_refused_at_once(kubernetes: LocalCluster, tmp_path: Path) -> None:
    member = kubernetes.members("kubernetes")[0]
    token = tmp_path / "token"
    token.write_text("not-a-token\n")
    e = elect.connect(f"kubernetes://{member.address}/default?prefix=wrong&ca={member.extra['ca']}"
                      f"&token_file={token}&connect_timeout=10", ["x"], member="w")
    began = time.monotonic()
    with pytest.raises(AccessRefused, match="did not accept this client's credentials"):
        e.start()
    assert time.monotonic() - began < 5.0
    assert "not-a-token" not in str(e)


def test_a_closed_api_server_port_is_reported_at_once(kubernetes: LocalCluster) -> None:
    ca = kubernetes.members("kubernetes")[0].extra["ca"]
    port = free_ports(1)[0]
    e = elect.connect(f"kubernetes://127.0.0.1:{port}/default?ca={ca}&connect_timeout=600", ["x"], member="u")
    with pytest.raises(InfrastructureUnavailable, match="refused the connection: is it running"):
        e.start()  # at once: nothing listens there


def test_micro_time_is_what_the_api_server_keeps(admin: Admin, group: Callable[..., str]) -> None:
    name = f"{prefix_of(group('micro'))}-t"
    stamp = time.time()
    status, data = admin.call("POST", body={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                            "metadata": {"name": name}, "spec": {"renewTime": micro_time(stamp)}})
    assert status == 201, data
    kept = datetime.strptime(data["spec"]["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
    assert abs(kept - stamp) < 1e-5


def test_a_member_holding_hundreds_of_roles_keeps_them_at_rest(group: Callable[..., str], admin: Admin,
                                                                electors: list[elect.Elector]) -> None:
    """Every role Lease it holds is rewritten within half of leaseDurationSeconds (for client-go readers), inside
    its renewals: 300 of them at once (after the cold start) must spread over renewals rather than take one past
    its budget, or every leadership lapses. lease_duration=6: one round of rewrites within the rest below."""
    roles = list(range(300))
    url = group("many", lease_duration="6")
    a = elect.connect(url, roles, member="a")
    electors.append(a)
    lost: list[object] = []
    a.subscribe(lambda event: lost.append(event) if type(event).__name__ in ("Revoked", "Fenced") else None)
    a.start()
    wait_until(lambda: len(a.leading()) == len(roles), 30.0, what="a leading 300 roles")
    holds_for(lambda: not lost, 5.0, 0.2, what="no leadership lost")  # past the first round of rewrites (2.75 s)
    assert len(a.leading()) == len(roles)
    ours = prefix_of(url) + "-"
    leases = [item for item in admin.call("GET")[1]["items"] if item["metadata"]["name"].startswith(ours)]
    assert len(leases) == len(roles)
    assert all(item["spec"]["renewTime"] > item["spec"]["acquireTime"] for item in leases)  # every one rewritten


def test_an_elect_member_and_a_client_go_candidate_on_one_lease_never_both_lead(kubernetes: LocalCluster,
                                                                                 tmp_path: Path) -> None:
    """client-go's own leaderelection (the client-go anchor, LeaseDuration 2 s) contending for the same Lease as
    elect members: it waits while an elect holder lives, takes over once it was killed, and an elect member waits
    for it in turn until it releases on a graceful stop. Leaderships, as both print them, never overlap."""
    endpoints = kubernetes.endpoints
    prefix = kube_prefix(unique("interop"))
    url = (f"kubernetes://{endpoints.kubernetes[0]}/default?ttl={TTL}&prefix={prefix}"
           f"&kubeconfig={endpoints.kubeconfig}")
    go_url = (f"client-go://{endpoints.kubernetes[0]}/default?prefix={prefix}&kubeconfig={endpoints.kubeconfig}"
              "&lease_duration=2s&renew_deadline=1500ms&retry_period=200ms")
    from elect_bench.anchors import command
    from elect_bench.members import MemberProcess

    a = MemberProcess(url, "a", ["x"], log_dir=tmp_path)
    c = MemberProcess(go_url, "c", ["x"], log_dir=tmp_path, command=command(go_url, "c", ["x"], sys.executable))
    b = MemberProcess(url, "b", ["x"], log_dir=tmp_path)
    members = [a, c, b]
    try:
        a.start()
        wait_until(lambda: "x" in a.log.leading(), 20.0, what="a leading x")
        c.start()
        holds_for(lambda: "x" not in c.log.leading(), 4.0, 0.1, what="c waiting while a renews")  # 2x duration
        killed = time.monotonic()
        a.kill()
        wait_until(lambda: "x" in c.log.leading(), 15.0, what="client-go taking x from the killed member")
        b.start()
        holds_for(lambda: "x" not in b.log.leading(), 4.0, 0.1, what="b waiting while client-go renews")
        c.stop(timeout=20.0)  # ReleaseOnCancel: the holder cleared
        wait_until(lambda: "x" in b.log.leading(), 15.0, what="b taking x once client-go released it")
    finally:
        for m in members:
            m.stop(timeout=20.0)
    spans = []  # (start, end, member) of every leadership, as its member printed it (a killed one ends at the kill)
    for m in members:
        start: float | None = None
        for line in m.log.lines:
            if line["event"] == "acquired":
                start = line["mono"]
            elif start is not None:
                spans.append((start, line["mono"], m.member_id))
                start = None
        if start is not None:
            spans.append((start, killed if m is a else math.inf, m.member_id))
    spans.sort()
    for (_, end, first), (start, _, then) in itertools.pairwise(spans):
        assert end <= start, f"{first} led x until {end:.3f}, {then} from {start:.3f}"
    # leaseTransitions, one per holder: a member that fenced itself and resumed its own Lease (a slow renewal on a
    # busy machine) acquires under the same token again, which the contract allows (nobody led in between)
    held = [(m.member_id, line["token"]) for m in members for line in m.log.lines if line["event"] == "acquired"]
    changes = [pair for i, pair in enumerate(held) if i == 0 or pair != held[i - 1]]
    tokens = [token for _, token in changes]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens), held


def test_the_observer_reads_who_holds_what_with_the_members_tokens(group: Callable[..., str],
                                                                   electors: list[elect.Elector]) -> None:
    """`elect watch kubernetes://...` reads the role Leases without joining."""
    url = group("observe")
    a = elect.connect(url, ["orders", "Odd role/7"], member="a")
    electors.append(a)
    a.start()
    wait_until(lambda: a.leading() == {"orders", "Odd role/7"}, 20.0, what="a leading both roles")
    spec = spec_from_url(url, member="watcher")
    observer = spec.plugin.observe(spec.options)
    try:
        claims = {c.role: (c.member, c.token) for c in observer.claims(5.0)}
    finally:
        observer.close()
    tokens = {role: a.leadership(role).token for role in ("orders", "Odd role/7")}  # type: ignore[union-attr]
    assert claims == {role: ("a", token) for role, token in tokens.items()}


def test_a_member_lease_left_by_a_process_long_gone_is_removed(group: Callable[..., str], admin: Admin,
                                                                electors: list[elect.Elector]) -> None:
    """Nothing else would ever delete the member Lease of a process that was killed holding no role (etcd's own
    leases do that there): members remove one unchanged for max(10 ttl, 3 lease_duration) on their own clocks,
    on condition of the version they saw."""
    url = group("abandoned", ttl="0.3")  # lease_duration 1 s: abandoned after 3 s unchanged
    name = f"{prefix_of(url)}.member.deadbeefdeadbeef"
    record = json.dumps({"member": "gone", "roles": ["x"]})
    labels = {"elect.io/group": prefix_of(url), "elect.io/kind": "member"}  # as a member writes its own
    assert admin.call("POST", body={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                    "metadata": {"name": name, "labels": labels,
                                                 "annotations": {"elect.io/record": record}},
                                    "spec": {"holderIdentity": "gone"}})[0] == 201
    a = elect.connect(url, ["x"], member="a")
    electors.append(a)
    a.start()
    began = time.monotonic()
    wait_until(lambda: admin.call("GET", name)[0] == 404, 15.0, what="the abandoned member Lease removed")
    assert time.monotonic() - began >= 2.0  # not before it had been unchanged that long (less a's start)
    assert admin.call("GET", f"{prefix_of(url)}.member.{a._store.session}")[0] == 200  # type: ignore[attr-defined]
