"""A pytest plugin for ``--collect-only`` runs: prints, as one JSON line, the test modules that use
each expensive session fixture (tests/test_scheduling.py reads it).

    python -m pytest --collect-only -q -p tests.support.fixture_use tests
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

#: The session fixtures whose start costs tens of seconds on a worker.
EXPENSIVE = ("api_server", "stack")
MARKER = "fixture-use: "


def pytest_collection_finish(session: pytest.Session) -> None:
    used: dict[str, set[str]] = defaultdict(set)
    for item in session.items:
        for name in EXPENSIVE:
            if name in getattr(item, "fixturenames", ()):
                used[name].add(item.nodeid.split("::", 1)[0])
    print(MARKER + json.dumps({name: sorted(modules) for name, modules in used.items()}))
