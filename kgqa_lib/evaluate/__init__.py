"""Metrics, the resumable runner and reports (see the submodules)."""

from .metrics import *  # noqa: F401,F403
