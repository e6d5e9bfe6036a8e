"""The one error of a tuning run."""

from __future__ import annotations


class TuneError(Exception):
    """A grid, profile, run directory or argument that cannot be used; the message says how to
    fix it."""
