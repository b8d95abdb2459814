"""Where Conveyor finds its suites, prompts, training data and samples: the ``include/`` folder.

``CONVEYOR_INCLUDE`` wins; otherwise ``include/`` at the root of the repository this package lives
in (``plugins/conveyor`` -> ``../../include``), which is also where an Astro-style deployment puts
it, next to ``dags/`` and ``plugins/``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_INCLUDE = "CONVEYOR_INCLUDE"


def include_dir() -> Path:
    """The ``include/`` folder."""
    configured = os.environ.get(ENV_INCLUDE)
    if configured:
        return Path(configured).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "include"
