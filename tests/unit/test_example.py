"""examples/fenced_service.py and its asyncio twin as a user runs them: two service processes on the real etcd,
writing to the sqlite ledger they share, which refuses stale tokens.

memory:// is in-process, so two processes cannot share a group there; etcd is the lightest real store the session
infrastructure offers. What is checked is what the example promises its reader: every role is led by one of the
two, the leader's writes land under its token, and on SIGTERM the process drains (exit 0, a drained line) while
the other takes its roles and writes on under a higher token.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from elect_cluster.endpoints import Endpoints
from elect_cluster.waiting import WaitTimeout, wait_until

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["fenced_service.py", "fenced_service_async.py"]
ROLES = ["orders", "invoices", "payments", "refunds"]
LEADS = re.compile(r"^(\S+) leads (\S+) under token (\d+)$")


class Service:
    """One example process; its stdout lines collected by a thread (a full pipe would block the service)."""

    def __init__(self, example: str, member: str, url: str, db: Path, workdir: Path) -> None:
        self.member = member
        self.stderr_path = workdir / f"{member}.stderr"
        with open(self.stderr_path, "w") as stderr:  # the installed library only: no PYTHONPATH into the checkout
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "examples" / example), url, "--roles", ",".join(ROLES), "--id", member,
                 "--db", str(db), "--every", "0.05"], cwd=workdir,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"example-{member}")
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def led(self) -> dict[str, int]:
        """The roles this service said it took, with the token of the latest leadership of each."""
        found: dict[str, int] = {}
        for line in list(self.lines):
            match = LEADS.match(line)
            if match and match.group(1) == self.member:
                found[match.group(2)] = int(match.group(3))
        return found

    def says(self, prefix: str) -> str | None:
        return next((line for line in list(self.lines) if line.startswith(prefix)), None)

    def diagnostics(self) -> str:
        err = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return f"--- {self.member} stdout:\n" + "\n".join(self.lines) + f"\n--- {self.member} stderr:\n{err[-3000:]}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL: safe at any time and more than once."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def ledger(db: Path) -> dict[str, list[dict[str, Any]]]:
    """Every write the ledger took, per role, in the order it took them."""
    if not db.exists():
        return {}
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            rows = conn.execute("SELECT role, member, token, seq FROM writes ORDER BY id").fetchall()
        except sqlite3.OperationalError:  # not created yet
            return {}
    found: dict[str, list[dict[str, Any]]] = {}
    for role, member, token, seq in rows:
        found.setdefault(role, []).append({"member": member, "token": token, "seq": seq})
    return found


def writes_by(dump: dict[str, list[dict[str, Any]]], role: str, member: str, token: int) -> int:
    return sum(1 for w in dump.get(role, []) if w["member"] == member and w["token"] == token)


@pytest.mark.parametrize("example", EXAMPLES)
def test_two_example_services_share_roles_fence_writes_and_hand_over_on_sigterm(example: str, infra: Endpoints,
                                                                                  tmp_path: Path) -> None:
    url = f"etcd://{infra.etcd[0]}/example-{time.monotonic_ns()}?ttl=1.0"
    db = tmp_path / "ledger.db"
    services: list[Service] = []
    try:
        services = [Service(example, name, url, db, tmp_path) for name in ("a", "b")]
        a, b = services

        def current() -> dict[str, tuple[str, int]] | None:
            """Who leads each role (one member, with its token) by the services' own lines and the ledger's writes."""
            leaders: dict[str, tuple[str, int]] = {}
            dump = ledger(db)
            for role in ROLES:
                claims = [(s.member, s.led()[role]) for s in services if role in s.led()]
                if not claims:
                    return None
                member, token = max(claims, key=lambda claim: claim[1])
                if writes_by(dump, role, member, token) < 3:  # its writes land under its token
                    return None
                leaders[role] = (member, token)
            return leaders

        try:
            wait_until(lambda: a.says("a started") and b.says("b started"), 60.0, what="both services started")
            leaders = wait_until(current, 60.0, what="every role led, its leader's writes in the ledger")
        except WaitTimeout as exc:
            pytest.fail(f"{exc}\n" + "\n".join(s.diagnostics() for s in services))
        dump = ledger(db)
        for role, (member, token) in leaders.items():
            last = dump[role][-1]
            assert (last["member"], last["token"]) == (member, token), (role, dump[role][-3:])
            assert all(w["token"] <= token for w in dump[role]), role

        # the victim: whoever leads the most (fair sharing usually splits them, but do not count on it)
        counts = {s.member: sum(1 for m, _ in leaders.values() if m == s.member) for s in services}
        victim = max(services, key=lambda s: counts[s.member])
        survivor = b if victim is a else a
        handed = {role: token for role, (member, token) in leaders.items() if member == victim.member}
        assert handed

        victim.proc.send_signal(signal.SIGTERM)
        assert victim.proc.wait(60) == 0, victim.diagnostics()
        victim._reader.join(10)
        drained = victim.says(f"{victim.member} drained in ")
        assert drained is not None, victim.diagnostics()
        assert all(f'"{role}": "{survivor.member}"' in drained for role in handed), drained

        def taken_over() -> bool:
            dump = ledger(db)
            for role, old in handed.items():
                new = survivor.led().get(role)
                if new is None or new <= old or writes_by(dump, role, survivor.member, new) < 5:
                    return False
            return True

        try:
            wait_until(taken_over, 60.0, what=f"{survivor.member} writing {sorted(handed)} under higher tokens")
        except WaitTimeout as exc:
            pytest.fail(f"{exc}\n" + "\n".join(s.diagnostics() for s in services))
        dump = ledger(db)
        for role, old in handed.items():
            tokens = [w["token"] for w in dump[role]]
            assert tokens == sorted(tokens), (role, tokens)  # the ledger never took a stale token
            first_new = next(i for i, w in enumerate(dump[role]) if w["member"] == survivor.member and w["token"] > old)
            assert all(w["member"] == survivor.member for w in dump[role][first_new:]), role
        assert survivor.proc.poll() is None, survivor.diagnostics()
    finally:
        for service in services:
            service.stop()
