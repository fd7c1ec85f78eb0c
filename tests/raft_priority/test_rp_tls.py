"""raft:// with mutual TLS (options ca, cert, key; `elect certs make`): members of the cluster's CA elect as
without TLS; a node without a certificate, with one of another CA, or with one naming another member can neither
vote nor lead, the group's leadership does not change, and the refused node says what refused it, within 10 s."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

import elect
from elect.config import spec_from_url
from elect.errors import ConfigError
from elect_bench.members import MemberProcess
from elect_bench.methods import METHODS
from elect_bench.methods import Group as MethodGroup
from elect_cluster.certs import make_authority, make_certs
from elect_cluster.waiting import wait_until

IDS = ("a", "b", "c")
P = 6
BOUND = 20.0  # generous: a noisy 2-core machine
WINDOW = 3.0  # how long an intruder is watched for doing any harm
QUIET = 4.0  # longer than the rebalance hysteresis (3 ET): a settled group has handed partitions back by then
_unique = itertools.count()


class TlsGroup:
    """Three raft:// nodes whose URLs carry ca/cert/key, as processes; `close` kills whatever is left."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.certs = tmp / "certs"
        make_certs(self.certs, IDS)
        group = MethodGroup(IDS, P, f"rp-tls-{next(_unique)}")
        self.urls = METHODS["raft"].member_urls(group, 1.0, {"data_dir": str(tmp / "state")})
        self.procs: list[MemberProcess] = []

    def tls(self, cert_name: str, certs: Path | None = None) -> dict[str, str]:
        where = certs or self.certs
        return {"ca": str(where / "ca.crt"), "cert": str(where / f"{cert_name}.crt"),
                "key": str(where / f"{cert_name}.key")}

    def start(self, node: str, tls: dict[str, str] | None) -> MemberProcess:
        url = self.urls[node] + ("&" + urlencode(tls) if tls else "")
        proc = MemberProcess(url, node, list(range(P)), log_dir=self.tmp)
        self.procs.append(proc)
        proc.start()
        return proc

    def settled(self, on: list[MemberProcess], *, every: bool = False) -> dict[int, str]:
        """Exactly one leader per role (`every`: and every member of `on` leads some: a node that came up last gets
        its partitions back only after the rebalance hysteresis, 3 ET, later than one leader per role)."""
        def one_each() -> dict[int, str] | None:
            held = {r: [p.member_id for p in on if p.alive and str(r) in p.log.leading()] for r in range(P)}
            if not all(len(v) == 1 for v in held.values()):
                return None
            leaders = {r: v[0] for r, v in held.items()}
            return leaders if not every or set(leaders.values()) == {p.member_id for p in on} else None

        return wait_until(one_each, BOUND, what="exactly one leader per role" + (", every node leading" * every))

    @staticmethod
    def quiet(on: list[MemberProcess]) -> None:
        """Wait until none of `on` has printed an event for QUIET seconds: at start-up a node that came up first
        may lead a partition whose higher-priority node came up later, and hands it back after the hysteresis."""
        def idle() -> bool:
            last = max((line["mono"] for p in on for line in p.log.lines), default=0.0)
            return time.monotonic() - last >= QUIET

        wait_until(idle, BOUND + QUIET, what=f"no event for {QUIET:g} s")

    def close(self) -> None:
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.kill()


@pytest.fixture
def tls_group(tmp_path: Path) -> Iterator[TlsGroup]:
    g = TlsGroup(tmp_path)
    try:
        yield g
    finally:
        g.close()


def test_members_of_the_cluster_ca_elect_and_hand_over(tls_group: TlsGroup) -> None:
    g = tls_group
    procs = [g.start(n, g.tls(n)) for n in IDS]
    leaders = g.settled(procs, every=True)  # balanced priorities: every node leads its own partitions
    victim = next(p for p in procs if p.member_id == leaders[0])
    victim.kill()
    g.settled([p for p in procs if p is not victim])


def _intruder_tls(g: TlsGroup, kind: str) -> dict[str, str] | None:
    if kind == "no certificate":
        return None
    assert kind == "another CA"
    other = g.tmp / "other-ca"
    make_certs(other, ["c"])
    return g.tls("c", other)


@pytest.mark.parametrize(("kind", "said"), [
    ("no certificate", "closes every connection at once: if the cluster uses mutual TLS"),
    ("another CA", "TLS with a"),
])
def test_a_node_the_cluster_does_not_trust_cannot_vote_or_lead(tls_group: TlsGroup, kind: str, said: str) -> None:
    g = tls_group
    a, b = g.start("a", g.tls("a")), g.start("b", g.tls("b"))
    g.settled([a, b])
    g.quiet([a, b])
    before = g.settled([a, b])
    marks = {p.member_id: len(p.log.lines) for p in (a, b)}
    c = g.start("c", _intruder_tls(g, kind))
    wait_until(lambda: said in c.stderr_path.read_text(errors="replace"), 10.0,
               what=f"c saying what refused it ({said!r})")
    with pytest.raises(TimeoutError):  # a deliberate window, ended early (failing) by any event of c's
        line = c.log.wait_for(lambda _l: True, WINDOW, what="any event of the intruder")
        pytest.fail(f"the intruder printed {line}")
    assert all(len(p.log.lines) == marks[p.member_id] for p in (a, b)), "leadership changed"
    assert g.settled([a, b]) == before


def test_batches_claiming_another_member_than_the_certificate_names_are_refused(tls_group: TlsGroup) -> None:
    """A client holding b's certificate whose batches claim to come from c (not an elect member: one refuses such
    files at start) is refused PERMISSION_DENIED by the server, and nothing changes."""
    import grpc

    from elect.config import parse_url, spec_from_url
    from raft_priority.grpc_link import METHOD
    from raft_priority.messages import Heartbeat
    from raft_priority.wire.codec import encode

    g = tls_group
    a, b = g.start("a", g.tls("a")), g.start("b", g.tls("b"))
    before = g.settled([a, b])
    g.quiet([a, b])
    marks = {p.member_id: len(p.log.lines) for p in (a, b)}
    host = parse_url(g.urls["a"]).hosts[0]
    cluster = str(spec_from_url(g.urls["a"]).options.cluster_id("a"))  # type: ignore[attr-defined]
    credentials = grpc.ssl_channel_credentials(root_certificates=(g.certs / "ca.crt").read_bytes(),
                                               private_key=(g.certs / "b.key").read_bytes(),
                                               certificate_chain=(g.certs / "b.crt").read_bytes())
    batch = encode([Heartbeat(0, "c", "a", 10**6, 1.0)], cluster, "c", "a").SerializeToString()
    with grpc.secure_channel(host, credentials, options=[("grpc.ssl_target_name_override", "a")]) as channel:
        deliver = channel.stream_unary(METHOD, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as refused:
            deliver(iter([batch]), timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert "names b" in str(refused.value.details())  # type: ignore[attr-defined]
    g.quiet([a, b])
    assert all(len(p.log.lines) == marks[p.member_id] for p in (a, b)), "leadership changed"
    assert g.settled([a, b]) == before


def test_tls_options_come_together_and_name_readable_files(tmp_path: Path) -> None:
    ca = make_authority(tmp_path)
    base = "raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002"
    with pytest.raises(ConfigError, match="cert, key: mutual TLS needs ca, cert and key together"):
        spec_from_url(f"{base}&ca={ca.cert}")
    with pytest.raises(ConfigError, match="key: no readable file"):
        spec_from_url(f"{base}&ca={ca.cert}&cert={ca.cert}&key={tmp_path / 'missing.key'}")


def test_tls_files_that_cannot_work_together_are_refused_naming_the_file(tmp_path: Path) -> None:
    """A certificate with another node's key, or the CA's own certificate given as the node's, is refused when the
    URL is read, naming the file at fault, rather than failing to listen with a traceback (or, the CA's certificate,
    running with credentials no peer should accept)."""
    make_certs(tmp_path, IDS)
    base = f"raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002&ca={tmp_path / 'ca.crt'}"
    with pytest.raises(ConfigError, match=r"key: the key in .*b\.key does not belong to the certificate in .*a\.crt"):
        spec_from_url(f"{base}&cert={tmp_path / 'a.crt'}&key={tmp_path / 'b.key'}")
    with pytest.raises(ConfigError, match=r"cert: .*ca\.crt is the CA's own certificate"):
        spec_from_url(f"{base}&cert={tmp_path / 'ca.crt'}&key={tmp_path / 'ca.key'}")
    with pytest.raises(ConfigError, match=r"ca: no CA certificate can be read from .*a\.key"):
        spec_from_url(f"raft://a@127.0.0.1:7001?peers=b@127.0.0.1:7002&ca={tmp_path / 'a.key'}"
                      f"&cert={tmp_path / 'a.crt'}&key={tmp_path / 'a.key'}")
    assert spec_from_url(f"{base}&cert={tmp_path / 'a.crt'}&key={tmp_path / 'a.key'}")  # the right pair
    with pytest.raises(ConfigError, match=r"cert: .*b\.crt names b, not this member 'a'"):  # another member's
        elect.connect(f"{base}&cert={tmp_path / 'b.crt'}&key={tmp_path / 'b.key'}", [0])  # made, never started


def test_a_node_that_cannot_listen_says_so_and_exits_without_a_traceback() -> None:
    """Its port taken by another process: `elect member` exits 3 (the infrastructure, here the machine, refused)
    with one line naming the address, not a traceback of its own clean-up."""
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "elect", "member", f"raft://a@127.0.0.1:{port}?peers=b@127.0.0.1:9",
                               "--roles", "x"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is taken" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
