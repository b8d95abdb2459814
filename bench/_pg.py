"""A scratch database for benchmarks on the same server the tests use."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import postgres  # noqa: E402


def scratch_database(name: str) -> str:
    """Create (or re-create) database ``name`` and return its DSN."""
    return postgres.create_database(name)


def drop(name: str) -> None:
    postgres.drop_database(name)
