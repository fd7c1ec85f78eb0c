"""Errors of the local infrastructure, worded so a user can act on them without reading code."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """Something about the local infrastructure went wrong; the message says what and how to fix it."""


class MissingBinary(ClusterError):
    """A program a service needs is not installed; the message names the package that provides it."""


class NotReady(Exception):
    """A health probe found a service not (yet) serving; the message is the reason, shown on timeout."""
