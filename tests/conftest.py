"""Shared pytest configuration: infrastructure fixtures live in _infra_fixtures.py."""
from hypothesis import settings

from _infra_fixtures import *  # noqa: F403

# Property tests run the same examples on every run (CI must not flake on a new draw), few enough to stay fast.
settings.register_profile("elect", max_examples=200, deadline=None, derandomize=True, database=None)
settings.load_profile("elect")
