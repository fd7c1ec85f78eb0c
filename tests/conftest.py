"""Shared pytest configuration: infrastructure fixtures live in _infra_fixtures.py."""
import signal
from types import FrameType

from hypothesis import settings

from _infra_fixtures import *  # noqa: F403

# Property tests run the same examples on every run (CI must not flake on a new draw), few enough to stay fast.
settings.register_profile("elect", max_examples=200, deadline=None, derandomize=True, database=None)
settings.load_profile("elect")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    """A SIGTERM (a CI timeout, `kill`) ends the run as Ctrl-C does: fixtures are torn down, so the brokers,
    stores and members the tests started are stopped, not left running after pytest is gone."""
    signal.signal(signal.SIGTERM, _interrupt)
