"""The type checker: ``mypy`` on ``src/conveyor`` (settings in pyproject's ``[tool.mypy]``) finds nothing,
and every ``# type: ignore`` left in the package names its error code and says why."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "conveyor"

#: ``# type: ignore[code, ...]  # why``: the code keeps the silence narrow, the reason lets the next
#: engineer judge whether it still holds.
EXPLAINED_IGNORE = re.compile(r"# type: ignore\[[a-z0-9-]+(, ?[a-z0-9-]+)*\]  # \S")


def mypy_cache() -> Path:
    """The user's cache, not the checkout's: a fresh clone (CI) reuses what an earlier checkout
    learned of Airflow's and the other packages' types, as uv reuses its downloads. mypy checks each
    module's source hash, so a cache from another checkout or commit is never wrong, only colder."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "conveyor" / f"mypy-{sys.version_info.major}.{sys.version_info.minor}"


def test_mypy_finds_nothing_in_the_package():
    # Warm, a run takes seconds; cold, a minute and more of one worker (see DEVELOPERS.md for both).
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(mypy_cache())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout}{done.stderr}"
    assert "Success: no issues found" in done.stdout, done.stdout


def test_every_type_ignore_names_its_code_and_its_reason():
    unexplained = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "type: ignore" in line and not EXPLAINED_IGNORE.search(line)
    ]
    assert not unexplained, "write `# type: ignore[<code>]  # <why>` on:\n" + "\n".join(unexplained)
