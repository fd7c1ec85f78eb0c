"""Shared pytest configuration: infrastructure fixtures live in _infra_fixtures.py."""
import os
import signal
import tempfile
from pathlib import Path
from types import FrameType

from hypothesis import settings

from _infra_fixtures import *  # noqa: F403

# Property tests run the same examples on every run (CI must not flake on a new draw), few enough to stay fast.
settings.register_profile("elect", max_examples=200, deadline=None, derandomize=True, database=None)
settings.load_profile("elect")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _memory_tmpdir() -> None:
    """Temporary files (every store's and broker's data, the members' logs) go to tmpfs unless TMPDIR says
    otherwise. The suite checks elect's contract, not this VM's disk: its fsyncs stall for over half a second
    now and then while both cores are busy (etcd's own histogram in a floor run: 8 of 55,302 above 512 ms,
    1 above 1 s), and an etcd or ZooKeeper waiting on its WAL stops answering renewals, so every member fences
    at once and a test that watches a leadership hold for 2 s at D = 1 s fails on the disk. Benchmarks keep
    the disk: `elect bench` does not come through here."""
    shm = Path("/dev/shm")
    if "TMPDIR" not in os.environ and shm.is_dir() and os.access(shm, os.W_OK):
        os.environ["TMPDIR"] = str(shm)  # also for the processes the tests start
        tempfile.tempdir = None  # computed again from TMPDIR


def pytest_configure() -> None:
    """A SIGTERM (a CI timeout, `kill`) ends the run as Ctrl-C does: fixtures are torn down, so the brokers,
    stores and members the tests started are stopped, not left running after pytest is gone."""
    signal.signal(signal.SIGTERM, _interrupt)
    _memory_tmpdir()
