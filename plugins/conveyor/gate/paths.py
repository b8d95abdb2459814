"""Where the gate finds suites and sample data: the project's ``include/`` folder.

``CONVEYOR_INCLUDE`` wins; otherwise ``include/`` at the root of the repository this package
lives in (``plugins/conveyor/gate`` -> ``../../../include``), which is also where an Astro-style
deployment puts it next to ``dags/`` and ``plugins/``.
"""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.include import include_dir


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """An absolute path; a relative one is taken relative to the ``include/`` folder.

    Workers run in arbitrary working directories, so a relative path means "in include/", never
    "in whatever folder the worker started in".
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    return include_dir() / candidate
