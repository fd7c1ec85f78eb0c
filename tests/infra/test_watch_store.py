"""`elect watch URL`: who holds what, read from the real store (etcd keys, ZooKeeper nodes, the Kafka
consumer group's assignment), agreeing with what the members themselves say they lead."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

import elect
from elect import config
from elect.contract import Elector
from elect.observe import Claim
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra


def _url(scheme: str, infra: Endpoints, unique: str) -> str:
    hosts = ",".join(getattr(infra, {"etcd": "etcd", "zookeeper": "zookeeper", "kafka": "kafka"}[scheme]))
    if scheme == "kafka":
        return f"kafka://{hosts}/{unique}?group={unique}&partitions=4&session_timeout=1"
    return f"{scheme}://{hosts}/{unique}?ttl=1" if scheme == "etcd" else f"{scheme}://{hosts}/{unique}"


@pytest.fixture
def members() -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


@pytest.mark.parametrize("scheme", ["etcd", "zookeeper"])
def test_the_store_shows_what_the_members_lead(scheme: str, infra: Endpoints, members: ExitStack) -> None:
    url = _url(scheme, infra, f"watch-{uuid.uuid4().hex[:8]}")
    group: list[Elector] = [members.enter_context(elect.connect(url, roles=[0, 1, 2, 3], member=m))
                            for m in ("a", "b")]
    spec = config.spec_from_url(url, member="watch")
    observer = spec.plugin.observe(spec.options)
    members.callback(observer.close)

    def agree() -> tuple[list[Claim]] | None:
        believed = {str(r): e.member for e in group for r in e.leading()}
        claims = observer.claims(timeout=5.0)
        seen = {c.role: c.member for c in claims}
        return (claims,) if len(believed) == 4 and seen == believed else None

    (claims,) = wait_until(agree, 60, 0.1, what=f"{scheme}: the store's holders to match the members' own view")
    assert {c.member for c in claims} <= {"a", "b"}
    tokens = {str(r): lead.token for e in group for r in e.leading() if (lead := e.leadership(r))}
    assert {c.role: c.token for c in claims} == tokens  # the store keeps the fencing token the members were given
    shown = subprocess.run([sys.executable, "-m", "elect", "watch", "--once", url], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert all(f"{c.member}" in shown.stdout for c in claims) and "OVERLAP" not in shown.stdout


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_kafka_group_shows_what_the_members_lead(protocol: str, infra: Endpoints, members: ExitStack) -> None:
    # Apache Kafka lists a group's members and their assignments, for either group protocol.
    url = _url("kafka", infra, f"watch-{uuid.uuid4().hex[:8]}") + f"&protocol={protocol}"
    group = [members.enter_context(elect.connect(url, roles=[0, 1, 2, 3], member=m)) for m in ("a", "b")]
    # both members leading: the group has rebalanced for b's join (on the classic protocol b may join a moment after
    # a led every role, and the watch would read the assignment in between)
    wait_until(lambda: len({r for e in group for r in e.leading()}) == 4 and all(e.leading() for e in group), 60,
               0.1, what="every role led, by both members")
    shown = subprocess.run([sys.executable, "-m", "elect", "watch", "--once", url], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0, shown.stderr
    leaders = {e.member for e in group if e.leading()}
    assert leaders and all(m in shown.stdout for m in leaders) and "OVERLAP" not in shown.stdout, shown.stdout


def test_a_broker_that_does_not_list_group_members_is_reported(tansu: Endpoints, members: ExitStack) -> None:
    # The light Tansu broker answers DescribeGroups without members (Apache Kafka lists them with
    # their assignments): the watch says so instead of showing an empty table.
    url = _url("kafka", tansu, f"watch-{uuid.uuid4().hex[:8]}")
    group = [members.enter_context(elect.connect(url, roles=[0, 1, 2, 3], member=m)) for m in ("a", "b")]
    wait_until(lambda: len({r for e in group for r in e.leading()}) == 4, 60, 0.1, what="every role led")
    shown = subprocess.run([sys.executable, "-m", "elect", "watch", "--once", url], capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 3 and "lists no members" in shown.stderr, shown.stderr


@pytest.mark.parametrize("scheme", ["etcd", "zookeeper", "kafka", "kubernetes"])
def test_an_unreachable_store_is_reported_at_once_not_hung(scheme: str) -> None:
    """A closed port: exit 3 with the refusal named, well inside a connect_timeout of 600 s (the clients of
    ZooKeeper and Kafka retry a refused port until their timeout; the watch asks once first)."""
    from elect_cluster.ports import free_port

    url = f"{scheme}://127.0.0.1:{free_port()}/nobody?connect_timeout=600"
    shown = subprocess.run([sys.executable, "-m", "elect", "watch", "--once", url], capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 3 and "refused" in shown.stderr.lower(), shown.stderr
    assert "Traceback" not in shown.stderr


def test_a_member_meeting_a_closed_port_says_so_at_once() -> None:
    """A refused connection will not change by waiting: reported at once, not after connect_timeout (issue 54)."""
    from elect_cluster.ports import free_port

    url = f"etcd://127.0.0.1:{free_port()}/nobody?connect_timeout=600"
    shown = subprocess.run([sys.executable, "-m", "elect", "member", url, "--id", "a", "--roles", "r"],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 3 and "refused the connection" in shown.stderr, shown.stderr
    assert "is it running" in shown.stderr and "Traceback" not in shown.stderr
