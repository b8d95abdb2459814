"""The suite's units of work (tests/support/scheduling.py) still match the fixtures the tests use:
a module that starts using the API server or the native stack without joining its unit would make
one more worker start one, and the suite slower, with nothing failing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import scheduling
from tests.support.fixture_use import MARKER

REPO = Path(__file__).resolve().parents[1]


def fixture_use() -> dict[str, list[str]]:
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.support.fixture_use",
         "-p", "no:randomly", "-p", "no:cacheprovider", "tests"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    [line] = [x for x in collected.stdout.splitlines() if x.startswith(MARKER)] or [collected.stderr[-2000:]]
    return json.loads(line.removeprefix(MARKER))


def test_every_module_on_the_api_server_or_the_stack_is_in_its_unit() -> None:
    used = fixture_use()
    api_modules = set(used["api_server"])
    assert len(api_modules) >= 10, api_modules
    assert api_modules == set(scheduling.API_SERVER_UNITS), (
        f"add to API_SERVER_UNITS: {sorted(api_modules - set(scheduling.API_SERVER_UNITS))}; "
        f"remove: {sorted(set(scheduling.API_SERVER_UNITS) - api_modules)}"
    )
    assert len(set(scheduling.API_SERVER_UNITS.values())) == 2
    # Each stack unit starts one stack; every stack module is one of two units.
    stack_units = {scheduling.unit_of(module) for module in used["stack"]}
    assert len(stack_units) == 2, stack_units


def test_first_names_only_units_that_exist() -> None:
    modules = {str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("test_*.py")}
    units = {scheduling.unit_of(module) for module in modules}
    assert set(scheduling.FIRST) <= units, set(scheduling.FIRST) - units
