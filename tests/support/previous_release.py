"""The previous release's code, unpacked from git to run beside this tree's: the rolling-upgrade
test (``tests/ledger/test_rolling_upgrade.py``) and the old side of ``bench/ledger.py``."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The last commit before ledger migration 0019 (the "newest" index moved to the item's body).
PREVIOUS_RELEASE = "d60b787"
#: Every release a worker may still run while the ledger is upgraded under it, by what it predates.
RELEASES = {"before 0018": "22daa24", "before 0019": PREVIOUS_RELEASE}


def unpack_src(folder: Path, ref: str = PREVIOUS_RELEASE) -> Path:
    """``ref``'s ``src`` (``git archive``) unpacked in ``folder``; returns the path to put first on
    ``PYTHONPATH``. Needs the repository's history (a normal clone; a shallow one fails here)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "src"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder / "src"
