"""Shared pytest configuration: infrastructure fixtures live in _infra_fixtures.py."""
from _infra_fixtures import *  # noqa: F403
