"""ZooKeeper: standalone, or an ensemble of N nodes, from the Debian ``zookeeper`` package's jars. tickTime is 50
ms: the server expires sessions in buckets of one tick, rounding each expiry up to the next tick, so a dead
client's ephemeral nodes vanish at most one tick after its session timeout (at 200 ms ticks, up to 0.2 s after
it). Session timeouts are allowed from 200 ms to 60 s (set explicitly: the defaults, 2 and 20 ticks, would cap
sessions at 1 s). The AdminServer is disabled so no node grabs port 8080, and all four-letter words are enabled
because the health probe uses ``srvr``.

Secured (``security``): the nodes serve clients only on ZooKeeper's secure client port (Netty, TLS with the
server certificate in PEM, a client certificate of the cluster's CA required: ``ssl.clientAuth=need``), and
the probe speaks ``srvr`` over TLS with the client certificate. Digest authentication needs nothing on the
server: the elector's nodes carry ACLs naming its digest identity (cas_lease/zookeeper.py).
"""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path

from .errors import MissingBinary, NotReady
from .ports import free_ports
from .process import ProcessSpec
from .security import Security, context_of
from .service import Member, find_program

_FIX = "apt-get install zookeeper default-jre-headless (Debian/Ubuntu), or run ./setup"
TICK_MS = 50
JVM_OPTS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS")


def classpath(netty: bool = False) -> str:
    """zookeeper.jar (its manifest lists its dependencies) plus exactly one SLF4J binding; with `netty`, the Netty
    jars its manifest leaves out (the codec holds TLS's SslHandler) for the Netty connection factory.

    ``/usr/share/java/*`` would put half a dozen SLF4J bindings on the classpath and let chance pick one.
    """
    jars = Path(os.environ.get("ELECT_ZOOKEEPER_JARS", "/usr/share/java"))  # where Debian puts them
    main = jars / "zookeeper.jar"
    if not main.is_file():
        raise MissingBinary(f"ZooKeeper not found ({main} is missing). Fix: {_FIX}")
    entries = [str(main)]
    if netty:
        entries += [str(jars / name) for name in ("netty-codec.jar", "netty-resolver.jar") if (jars / name).is_file()]
    for binding in ("slf4j-simple.jar", "slf4j-nop.jar"):
        if (jars / binding).is_file():
            entries.append(str(jars / binding))
            break
    return ":".join(entries)


def find_java() -> str:
    """Path of java: ``$ELECT_JAVA_BIN``, else PATH, else /usr/bin/java."""
    return find_program("java", "ELECT_JAVA_BIN", _FIX, "/usr/bin/java")


def four_letter(host: str, port: int, command: str, timeout: float = 2.0,
                context: ssl.SSLContext | None = None) -> str:
    """Send a four-letter word (``srvr``, ``ruok``, ``mntr``...) and return the whole answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            sock = context.wrap_socket(raw, server_hostname=host) if context is not None else raw
            sock.sendall(command.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError as exc:
        raise NotReady(f"no ZooKeeper at {host}:{port}: {exc}") from exc
    return b"".join(chunks).decode(errors="replace")


def mode(host: str, port: int, timeout: float = 2.0, context: ssl.SSLContext | None = None) -> str:
    """``standalone``, ``leader``, ``follower`` or ``observer`` from ``srvr``; NotReady if not serving."""
    answer = four_letter(host, port, "srvr", timeout, context)
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    raise NotReady(f"ZooKeeper {host}:{port}: {answer.strip() or 'empty answer to srvr'}")


class ZooKeeperService:
    """ZooKeeper nodes, each a JVM running QuorumPeerMain with its own zoo.cfg and data dir."""

    name = "zookeeper"
    max_members = 7

    def __init__(self, security: Security | None = None) -> None:
        self.security = security

    def preflight(self) -> None:
        find_java()
        classpath()

    def plan(self, root: Path, host: str, count: int) -> list[Member]:
        java, cp = find_java(), classpath(netty=self.security is not None)
        ports = free_ports(3 * count, host)
        clients, quorum, election = ports[:count], ports[count:2 * count], ports[2 * count:]
        servers = [f"server.{i + 1}={host}:{quorum[i]}:{election[i]}" for i in range(count)] if count > 1 \
            else []
        members = []
        for i in range(count):
            node = root / f"zookeeper-{i}"
            data = node / "data"
            data.mkdir(parents=True, exist_ok=True)
            (data / "myid").write_text(f"{i + 1}\n")
            cfg = node / "zoo.cfg"
            cfg.write_text("\n".join([
                f"tickTime={TICK_MS}",
                f"initLimit={10_000 // TICK_MS}",  # 10 s for a follower to connect and sync: generous when loaded
                f"syncLimit={3_000 // TICK_MS}",  # 3 s of silence before a follower is dropped
                "minSessionTimeout=200",
                "maxSessionTimeout=60000",
                f"dataDir={data}",
                *(self._client_port(node, host, clients[i])),
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                "maxClientCnxns=0",
                *servers,
            ]) + "\n")
            argv = (java, *JVM_OPTS, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg))
            spec = ProcessSpec(argv=argv, cwd=str(node), log=str(root / f"zookeeper-{i}.log"),
                               drop_env=("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "ZOO"))
            ports_i = {"client": clients[i]}
            if count > 1:
                ports_i |= {"quorum": quorum[i], "election": election[i]}
            extra = {"security": str(self.security.root)} if self.security is not None else {}
            members.append(Member("zookeeper", i, host, ports_i, spec, extra=extra))
        return members

    def _client_port(self, node: Path, host: str, port: int) -> list[str]:
        """The client port's settings: plain, or (secured) only the TLS port with client certificates required."""
        sec = self.security
        if sec is None:
            return [f"clientPort={port}", f"clientPortAddress={host}"]
        keystore = node / "server.pem"  # ZooKeeper's PEM key store: the key and the certificate in one file
        keystore.touch(mode=0o600)
        keystore.write_text(sec.server_key.read_text() + sec.server_cert.read_text())
        return [f"secureClientPort={port}", f"secureClientPortAddress={host}",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"ssl.keyStore.location={keystore}", "ssl.keyStore.type=PEM",
                f"ssl.trustStore.location={sec.ca}", "ssl.trustStore.type=PEM",
                "ssl.clientAuth=need",
                "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider"]

    def configure(self, members: list[Member], timeout: float) -> None:
        """Nothing: digest identities need no server-side set-up."""

    def probe(self, member: Member, timeout: float) -> str:
        return mode(member.host, member.ports["client"], timeout, context_of(member.extra))

    def probe_group(self, members: list[Member], timeout: float) -> None:
        modes = [mode(m.host, m.ports["client"], timeout, context_of(m.extra)) for m in members]
        expected = ["standalone"] if len(members) == 1 else None
        if expected is not None and modes != expected:
            raise NotReady(f"ZooKeeper node is {modes[0]}, not standalone")
        if expected is None and (modes.count("leader") != 1 or
                                 modes.count("follower") != len(members) - 1):
            raise NotReady(f"ZooKeeper ensemble modes are {modes}, want one leader and followers")

    def leader(self, members: list[Member], timeout: float) -> int | None:
        for m in members:
            try:
                if mode(m.host, m.ports["client"], timeout, context_of(m.extra)) in ("leader", "standalone"):
                    return m.index
            except NotReady:
                continue
        return None
