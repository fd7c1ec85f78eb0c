"""The install a user does: the wheel into a bare virtual environment, then each method's extra alone.

From a bare install every command starts (`--help`, `--version`, `schemes`, a memory:// member), a scheme or a
command whose extra is missing says which `pip install 'elect[EXTRA]'` to run and exits 2, and each extra alone is
enough for its method: one member leads a role on the real infrastructure and drains on `stop`. Packages come from
the package registry (the only network CI has) or pip's cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from elect.extras import EXTRA_OF
from elect_bench.members import MemberProcess
from elect_cluster.endpoints import Endpoints
from elect_cluster.ports import free_port

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
PIP_ENV = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                           str(out), str(ROOT)], capture_output=True, text=True, timeout=600, env=PIP_ENV)
    assert done.returncode == 0, done.stderr
    (found,) = out.glob("elect-*.whl")
    return found


def venv(where: Path, wheel: Path, extra: str = "") -> Path:
    """A fresh virtual environment with the wheel (and `extra`) installed; its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    target = f"{wheel}[{extra}]" if extra else str(wheel)
    done = subprocess.run([str(where / "bin" / "pip"), "install", "-q", target], capture_output=True, text=True,
                          timeout=900, env=PIP_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin"


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return venv(tmp_path_factory.mktemp("bare") / "venv", wheel)


def elect(bin_dir: Path, *args: str, stdin: str | None = None,
          timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bin_dir / "elect"), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, cwd=bin_dir.parent)


def test_the_wheel_carries_no_anchor_sources(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()  # the kube-apiserver wrapper (elect_cluster/files/kubernetes) stays
    assert not [n for n in names if "/anchors/" in n or n.endswith(".java")], names


def test_every_command_starts_from_a_bare_install(bare: Path) -> None:
    for args in (["--help"], ["schemes"], ["schemes", "etcd://"], ["member", "--help"], ["bench", "--help"]):
        done = elect(bare, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    version = elect(bare, "--version")
    assert version.returncode == 0 and version.stdout.startswith("elect "), version
    member = elect(bare, "member", "memory://bare", "--id", "a", "--roles", "r", "--control", stdin="stop\n")
    assert member.returncode == 0 and '"event": "acquired"' in member.stdout, member.stderr
    assert "drained in" in member.stderr


@pytest.mark.parametrize(("args", "extra"), [
    (["member", "raft://a@127.0.0.1:1?peers=b@127.0.0.1:2", "--id", "a", "--roles", "r"], "raft"),
    (["member", "kafka://127.0.0.1:1/t", "--id", "a", "--roles", "r"], "kafka"),
    (["member", "zookeeper://127.0.0.1:1/z", "--id", "a", "--roles", "r"], "zookeeper"),
    (["member", "pysyncobj://a@127.0.0.1:1?peers=b@127.0.0.1:2", "--id", "a", "--roles", "r"], "pysyncobj"),
    (["member", "memory://m", "--id", "a", "--roles", "r", "--metrics-port", "0"], "metrics"),
    (["cluster", "up", "--services", "kafka", "--broker", "tansu", "--workdir", "cluster"], "cluster"),
    (["certs", "make", "certs", "--members", "a"], "tls"),
])
def test_a_missing_extra_is_named(bare: Path, args: list[str], extra: str) -> None:
    done = elect(bare, *args)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert f"pip install 'elect[{extra}]'" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]


def test_the_docs_say_where_they_are_built(bare: Path) -> None:
    done = elect(bare, "docs", "build")
    assert done.returncode == 2 and "built from a checkout" in done.stderr, done.stderr


def test_the_extras_table_covers_every_extra() -> None:
    """elect/extras.py names an extra for every optional module; each extra it names exists in pyproject.toml."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRA_OF.values()) <= set(declared)


def _smoke_urls(infra: Endpoints) -> Iterator[tuple[str, str]]:
    unique = f"install-{time.monotonic_ns()}"
    yield "raft", f"raft://a@127.0.0.1:{free_port()}?partitions=2"
    yield "kafka", f"kafka://{infra.kafka[0]}/{unique}"
    yield "zookeeper", f"zookeeper://{infra.zookeeper[0]}/{unique}"
    yield "etcd", f"etcd://{infra.etcd[0]}/{unique}"


def test_each_extra_alone_runs_its_method(infra: Endpoints, wheel: Path, tmp_path: Path) -> None:
    """One member of each method, from a virtual environment with that method's extra alone, leads a role on the
    real infrastructure and drains on `stop`. The environments are built, and their members run, side by side."""
    urls = dict(_smoke_urls(infra))
    with ThreadPoolExecutor(len(urls)) as pool:
        bins = dict(zip(urls, pool.map(lambda extra: venv(tmp_path / extra, wheel, extra), urls), strict=True))
    members = {}
    try:
        for extra, url in urls.items():
            (tmp_path / f"{extra}-logs").mkdir()
            members[extra] = MemberProcess(url, "a", ["r"], log_dir=tmp_path / f"{extra}-logs",
                                           python=str(bins[extra] / "python"))
            members[extra].start()
        for extra, member in members.items():
            member.log.wait_for(lambda line: line["event"] == "acquired", 120, what=f"{extra}: r acquired")
        for extra, member in members.items():
            member.stop(timeout=60)
            assert member.returncode == 0, (extra, member.stderr_tail())
    finally:
        for member in members.values():
            member.kill()
