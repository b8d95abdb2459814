"""Where the gate finds a relative file (a suite, a reference CSV, an input): see :mod:`conveyor.include`."""

from __future__ import annotations

import os
from pathlib import Path

from conveyor.include import resolve


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """An absolute path; a relative one from the DAG file's folder, then the include folder.

    Workers run in arbitrary working directories, so a relative path never means "in whatever folder
    the worker started in". A file found nowhere keeps its include-folder path, so the reader's own
    "not found" message names it.
    """
    try:
        return resolve(path)
    except FileNotFoundError:
        from conveyor.include import include_dir

        return include_dir() / Path(path)
