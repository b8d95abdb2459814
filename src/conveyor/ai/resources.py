"""Where the AI step finds a task's prompt and training data: the user's project (see :mod:`conveyor.include`).

Relative paths are looked up next to the running DAG file, then in the include folder (and its
``prompts/`` or ``models/`` subfolder). Fitted models are cached under ``$CONVEYOR_HOME/models``
(never committed: a pickle does not survive a scikit-learn upgrade).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from conveyor.include import resolve


def prompt_path(name: str) -> Path:
    """A prompt file: next to the DAG, or ``include/prompts/<name>``."""
    return resolve(name, "prompts")


def model_data_path(name: str) -> Path:
    """A training-data file: next to the DAG, or ``include/models/<name>``."""
    return resolve(name, "models")


def model_cache_dir() -> Path:
    """``$CONVEYOR_HOME/models`` (created on demand)."""
    from conveyor.ledger.connection import conveyor_home

    folder = conveyor_home() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def read_prompt(name: str) -> tuple[str, str]:
    """(text, sha256 prefix) of a prompt file; the hash makes an edited prompt a new version."""
    path = prompt_path(name)
    return _read(str(path), path.stat().st_mtime_ns)


@cache
def _read(path: str, mtime_ns: int) -> tuple[str, str]:
    text = Path(path).read_text(encoding="utf-8")
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
