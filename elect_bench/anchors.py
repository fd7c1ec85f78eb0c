"""The anchors: well-known election implementations' own published code, run under the same harness.

Each anchor is a small adapter program of ours in bench/anchors/NAME/ (its README says what it sets and what
the anchor lacks) that runs one member of the anchor and prints the project's event lines, so the faults, the
checker and the measures are exactly those of elect's own methods (docs/architecture.md, "Anchors"). A
method's member URL names the anchor and its settings (`kazoo://HOSTS/PATH?session_timeout=1`); `command`
turns it into the adapter's command line. Programs that must be compiled (Go, Java) are built by their
`build` script (run by ./setup; quick when nothing changed), which prints the command that runs them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from elect.contract import Characteristics
from elect.errors import ConfigError

ROOT = Path(str(resources.files("elect_bench.scenarios").joinpath("anchors")))  # bench/anchors
KAZOO = "2.11.0"  # the release the kazoo anchor runs (pyproject's `anchors` extra pins the same)
KUBERNETES_PYTHON = "37.0.2"  # the `kubernetes` package the k8s-python anchor runs (pinned there too)

#: What each anchor promises to a user who runs it as its documentation says: one leader per role (a lock, an
#: election); where a leader learns of its loss (the token it has, or not) is in each `notes`.
PROMISES: dict[str, Characteristics] = {
    "kazoo": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False,
        token="the lock node's sequence number",
        notes="kazoo 2.11.0 Election; a leader stops on SUSPENDED/LOST only: no deadline of its own while frozen"),
    "etcd-election": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False,
        token="the leader key's create revision",
        notes="etcd Go client v3.5.35 concurrency.Election; a leader learns of its loss when its session's "
              "Done() closes"),
    "goneli": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False, token="none",
        notes="goNELI v0.4.3 (confluent-kafka-go v1.9.2), one instance (group) per role; no fencing token; "
              "it fences only inside Pulse, so a frozen leader has no deadline"),
    "client-go": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False,
        token="the Lease's leaseTransitions (read after leadership starts)",
        notes="k8s.io/client-go v0.35.4 leaderelection with a LeaseLock, one LeaderElector per role, "
              "ReleaseOnCancel on; it does not fence (a leader stops when RenewDeadline passes without a "
              "renewal, on its own clock; the package says it gives no fencing guarantee)"),
    "k8s-python": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False, token="none",
        notes="kubernetes (Python client) 37.0.2 leaderelection with its LeaseLock, one LeaderElection per role; "
              "whole-second timings of at least 3 s / 2 s / 1 s, wall-clock deadlines, no leaseTransitions, no "
              "release on exit"),
    "jraft": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False, token="raft term",
        notes="sofa-jraft 1.4.1, one group per partition with election priorities; no transfer back to a "
              "returning higher-priority member; its leader lease is not exposed to the application"),
    "ratis": Characteristics(
        exclusive=True, max_overlap=0.0, max_failover=None, graceful_handover=False, token="raft term",
        notes="Apache Ratis 3.1.3 (gRPC), one server per member hosting a group per partition, with peer "
              "priorities: a voter refuses a lower-priority candidate (RATIS-1033) and a leader hands leadership "
              "back to a caught-up higher-priority follower (checkPeersForYieldingLeader, RATIS-1266/1770); its "
              "leader lease serves linearizable reads only and is not exposed to the application; a cut-off leader "
              "steps down on its own after 2D to 4D without a quorum, a frozen one only once it runs again; a "
              "frozen or cut-off top-priority member delays its successor (candidates wait out its vote); the "
              "graceful stop raises the target's priority (Ratis transfers only to a highest-priority peer) and "
              "the adapter's new leader puts the balanced priorities back after leading 3D, so a member "
              "restarted after it gets its partitions back"),
}


def scheme(url: str) -> str:
    return urlsplit(url).scheme


def is_anchor(url: str) -> bool:
    return scheme(url) in PROMISES


@cache
def program(name: str) -> tuple[str, ...]:
    """The command that runs an anchor's adapter, built first if it must be (the build script is idempotent)."""
    build = ROOT / name / "build"
    if not build.is_file():
        raise ConfigError(f"anchor {name!r} has no build script at {build}", parameter="method")
    done = subprocess.run([str(build)], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise ConfigError(f"building anchor {name!r} failed ({build}):\n{done.stderr[-2000:]}", parameter="method")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise ConfigError(f"anchor {name!r}: {build} printed no command", parameter="method")
    return tuple(lines[-1].split())


def available(name: str) -> str | None:
    """None if the anchor can run here, else why not (a wheel install, the program does not build, the module is
    missing)."""
    if not (ROOT / name).is_dir():
        return (f"the anchors' adapters are built from a checkout of elect (bench/anchors/{name} is not in an "
                "installed wheel): clone the repository, run ./setup there, and run `elect bench anchors` in it")
    if name == "kazoo":
        try:
            import kazoo.version
        except ImportError:
            return "kazoo is not installed (pip install 'elect[anchors]')"
        return None if kazoo.version.__version__ == KAZOO else \
            f"kazoo {kazoo.version.__version__} is installed; the anchor is pinned to {KAZOO} (elect[anchors])"
    if name == "k8s-python":
        try:
            import kubernetes
        except ImportError:
            return "the kubernetes package is not installed (pip install 'elect[anchors]')"
        version = str(getattr(kubernetes, "__version__", "?"))
        return None if version == KUBERNETES_PYTHON else \
            f"kubernetes {version} is installed; the anchor is pinned to {KUBERNETES_PYTHON} (elect[anchors])"
    try:
        program(name)
    except ConfigError as exc:
        return str(exc)
    return None


def command(url: str, member: str, roles: Sequence[int | str], python: str) -> list[str]:
    """The adapter's command line for one member, from the anchor's member URL."""
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    common = ["--id", member, "--roles", ",".join(str(r) for r in roles)]
    name = parts.scheme
    if name == "kazoo":
        return [python, str(ROOT / "kazoo" / "kazoo_member.py"), *common, "--hosts", parts.netloc,
                "--path", parts.path or "/elect-kazoo", "--session-timeout", query.get("session_timeout", "10")]
    if name == "etcd-election":
        return [*program(name), *common, "--endpoints", parts.netloc, "--prefix", parts.path.lstrip("/"),
                "--ttl", query.get("ttl", "60")]
    if name == "goneli":
        own = ["--defaults"] if query.get("defaults") else ["--budget", query.get("budget", "10")]
        return [*program(name), *common, "--bootstrap", parts.netloc, "--group", parts.path.lstrip("/"),
                "--topic", parts.path.lstrip("/"), *own]
    if name == "client-go":
        timing = [f"--{flag}={query.get(flag.replace('-', '_'), default)}"
                  for flag, default in (("lease-duration", "15s"), ("renew-deadline", "10s"), ("retry-period", "2s"))]
        return [*program(name), *common, "--kubeconfig", query["kubeconfig"], "--namespace", parts.path.strip("/"),
                "--prefix", query.get("prefix", "elect-anchor"), *timing]
    if name == "k8s-python":
        timing = [f"--{flag}={query.get(flag.replace('-', '_'), default)}"
                  for flag, default in (("lease-duration", "15"), ("renew-deadline", "10"), ("retry-period", "2"))]
        return [python, str(ROOT / "k8s-python" / "k8s_python_member.py"), *common, "--kubeconfig", query["kubeconfig"],
                "--namespace", parts.path.strip("/"), "--prefix", query.get("prefix", "elect-anchor"), *timing]
    if name in ("jraft", "ratis"):  # the two Java multi-raft adapters take the same flags
        return [*program(name), *common, "--listen", parts.netloc.split("@", 1)[1], "--peers", query["peers"],
                "--election-timeout-ms", query.get("election_timeout_ms", "1000"),
                "--data-dir", query["data_dir"], *(["--priorities", query["priorities"]]
                                                   if query.get("priorities") else []),
                # a member joining a running cluster (the groups' leaders add it): sofa-jraft starts it with no
                # configuration, Ratis with a group of `peers` and itself as a listener
                *(["--join"] if query.get("join") else [])]
    raise ConfigError(f"no anchor is called {name!r}; known: {', '.join(PROMISES)}", parameter="method")
