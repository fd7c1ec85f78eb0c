"""docs/getting-started.md runs as written: its program against the real etcd (two copies sharing the table, one
stopped while the other leads on), its YAML against the same etcd, its links on GitHub as on the site."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import elect
from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import wait_until

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE.read_text(), re.DOTALL)


def test_the_first_program_runs_as_written_on_memory(tmp_path: Path) -> None:
    (program,) = blocks("python")
    (tmp_path / "first.py").write_text(program)
    done = subprocess.run([sys.executable, "first.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "ELECT_URL"})
    assert done.returncode == 0, done.stderr
    assert "Acquired(role='orders'" in done.stdout and "Revoked(role='orders'" in done.stdout, done.stdout
    assert re.search(r"\('invoices', 1, 'a wrote #\d+'\), \('orders', 1, 'a wrote #\d+'\)", done.stdout), done.stdout
    assert "Traceback" not in done.stderr


def test_two_copies_on_etcd_share_the_table_under_growing_tokens(infra: Endpoints, tmp_path: Path) -> None:
    """The page's claim: swap the URL, run two copies, stop one, and the other takes over under a higher token."""
    (program,) = blocks("python")
    url = f"etcd://{infra.etcd[0]}/getting-started-{time.monotonic_ns()}"
    (tmp_path / "first.py").write_text(program)
    second = program.replace('member="a"', 'member="b"').replace("time.sleep(3)", "time.sleep(12)")
    (tmp_path / "second.py").write_text(second)
    env = {**os.environ, "ELECT_URL": url}
    b = subprocess.Popen([sys.executable, "second.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        a = subprocess.run([sys.executable, "first.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env=env)
        assert a.returncode == 0 and "Traceback" not in a.stderr, a.stderr

        def taken() -> list[tuple[str, int, str]] | None:
            with sqlite3.connect(tmp_path / "first.db", timeout=10) as db:
                rows = db.execute("SELECT role, token, text FROM latest ORDER BY role").fetchall()
            return rows if len(rows) == 2 and all(text.startswith("b wrote") for _, _, text in rows) else None

        rows = wait_until(taken, 60, what="b writing both roles once a stopped")
        out, err = b.communicate(timeout=120)
        assert b.returncode == 0 and "Traceback" not in err, err
        # b's tokens for each role it took from a are above a's: etcd revisions grow
        a_tokens = dict(re.findall(r"Acquired\(role='(\w+)', member='a', token=(\d+)", a.stdout))
        b_tokens = dict(re.findall(r"Acquired\(role='(\w+)', member='b', token=(\d+)", out))
        for role, token, _ in rows:
            if role in a_tokens:
                assert int(b_tokens[role]) > int(a_tokens[role]) and token == int(b_tokens[role])
    finally:
        if b.poll() is None:
            b.kill()
            b.communicate()


def test_the_yaml_configures_an_elector_as_written(infra: Endpoints, tmp_path: Path) -> None:
    (text,) = blocks("yaml")
    config = tmp_path / "elect.yaml"
    config.write_text(text.replace("127.0.0.1:2379", infra.etcd[0])
                      .replace("prefix: myapp", f"prefix: getting-started-yaml-{time.monotonic_ns()}"))
    with elect.from_config(config) as e:
        wait_until(lambda: e.leading() == {"orders", "invoices"}, 30, what="both roles led")
        assert e.member == "a" and e.characteristics.exclusive


def test_its_links_work_on_github_as_on_the_site() -> None:
    """A relative link to a page that exists only when the site is built is dead on GitHub (configuration.md once)."""
    dead = [target for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", PAGE.read_text())
            if not (PAGE.parent / target).is_file()]
    assert not dead, dead
