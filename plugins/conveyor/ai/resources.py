"""Where the AI step finds its prompts and training data: the project's ``include/`` folder.

``CONVEYOR_INCLUDE`` wins; otherwise ``include/`` at the root of the repository this package
lives in (``plugins/conveyor/ai`` -> ``../../../include``). Fitted models are cached under
``$CONVEYOR_HOME/models`` (never committed: a pickle does not survive a scikit-learn upgrade).
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from conveyor.include import include_dir


def prompt_path(name: str) -> Path:
    """``include/prompts/<name>``."""
    return include_dir() / "prompts" / name


def model_data_path(name: str) -> Path:
    """``include/models/<name>``."""
    return include_dir() / "models" / name


def model_cache_dir() -> Path:
    """``$CONVEYOR_HOME/models`` (created on demand)."""
    from conveyor.ledger.connection import conveyor_home

    folder = conveyor_home() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@cache
def read_prompt(name: str) -> tuple[str, str]:
    """(text, sha256 prefix) of a prompt file; the hash makes an edited prompt a new version."""
    text = prompt_path(name).read_text(encoding="utf-8")
    return text, hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
