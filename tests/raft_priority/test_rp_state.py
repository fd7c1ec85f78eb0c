"""A raft:// (and pysyncobj://) node's durable term and vote on a bad disk: damage no crash could leave, a data_dir
it cannot use. `elect member` exits 2 with one line naming the file (no traceback), before it takes part in any
election."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from elect_cluster.ports import free_port


def _member(data_dir: Path) -> subprocess.CompletedProcess[str]:
    port = free_port()
    url = f"raft://a@127.0.0.1:{port}?peers=b@127.0.0.1:{free_port()}&data_dir={data_dir}"
    return subprocess.run([sys.executable, "-m", "elect", "member", url, "--roles", "x"], capture_output=True,
                          text=True, timeout=60)


def test_a_damaged_state_file_is_refused_naming_it(tmp_path: Path) -> None:
    state = tmp_path / "state" / "a" / "hardstate.log"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"0":[3,"b"]}\n\x00\x00\x00\n{"0":[4,"a"]}\n')  # a block of zeros where a line was
    done = _member(tmp_path / "state")
    assert done.returncode == 2, done.stderr
    assert f"{state} is damaged at line 2 of 3" in done.stderr and "vote twice" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_data_dir_it_cannot_use_is_refused_naming_it(tmp_path: Path) -> None:
    taken = tmp_path / "a-file"
    taken.write_text("not a directory")
    done = _member(taken)
    assert done.returncode == 2, done.stderr
    assert f"data_dir: cannot keep Raft state in {taken}" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_damaged_pysyncobj_journal_is_refused_naming_it(tmp_path: Path) -> None:
    """The baseline's own journal: PySyncObj would fail in its constructor with a traceback."""
    journal = tmp_path / "state" / "a" / "partition-0.journal"
    journal.parent.mkdir(parents=True)
    (tmp_path / "state" / "a" / "partition-0.journal.meta").write_bytes(b"\x07" * 30)  # where term and vote are
    url = f"pysyncobj://a@127.0.0.1:{free_port()}?peers=b@127.0.0.1:{free_port()}&data_dir={tmp_path / 'state'}"
    done = subprocess.run([sys.executable, "-m", "elect", "member", url, "--roles", "x"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"PySyncObj journal {journal} (or its .meta) is damaged" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
