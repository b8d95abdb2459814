"""Where a workflow's own files are found: suites, prompts, training data, report templates.

They belong to the user's project, never to this package. A relative path is looked up

1. next to the DAG file of the running task (its folder, while :func:`searching_near` is active:
   every Conveyor operator sets it from ``dag.fileloc``), then
2. in the include folder: ``[conveyor] include_folder``, by default ``include/`` beside the DAGs
   folder (the Astro CLI and docker-compose layouts: ``dags/``, ``include/``, ``plugins/``).

An absolute path is used as it is. A file found nowhere is an error naming every place looked in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from conveyor import config

_near: ContextVar[tuple[Path, ...]] = ContextVar("conveyor_include_near", default=())


def include_dir() -> Path:
    """The configured include folder (``[conveyor] include_folder`` or ``<dags folder>/../include``)."""
    configured = config.get("include_folder")
    if configured:
        return Path(configured).expanduser().resolve()
    return dags_folder().parent / "include"


def dags_folder() -> Path:
    """Airflow's DAGs folder (``[core] dags_folder``)."""
    configured = os.environ.get("AIRFLOW__CORE__DAGS_FOLDER")
    if not configured:
        try:
            from airflow.configuration import conf

            configured = conf.get("core", "dags_folder")
        except Exception:  # no Airflow configuration here: the working directory's dags/
            configured = "dags"
    return Path(configured).expanduser().resolve()


def search_dirs(*subfolders: str) -> list[Path]:
    """Where a relative path is looked up, in order (each folder, then each of its ``subfolders``)."""
    bases = [*_near.get(), include_dir()]
    found: list[Path] = []
    for base in bases:
        for folder in (*(base / sub for sub in subfolders), base):
            if folder not in found:
                found.append(folder)
    return found


def resolve(path: str | os.PathLike[str], *subfolders: str) -> Path:
    """The file ``path`` names: absolute as given, relative from :func:`search_dirs`.

    :param subfolders: folders of the include layout to try too (``"expectations"``, ``"prompts"``).
    :raises FileNotFoundError: not found anywhere; the message lists where it looked.
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    places = search_dirs(*subfolders)
    for folder in places:
        if (folder / candidate).exists():
            return folder / candidate
    raise FileNotFoundError(
        f"{os.fspath(path)!r} not found; looked in " + ", ".join(str(p) for p in places)
        + " (relative paths are taken from the DAG file's folder, then [conveyor] include_folder)"
    )


@contextmanager
def searching_near(*folders: str | os.PathLike[str] | None) -> Iterator[None]:
    """Look next to these folders first (e.g. the running DAG file's) inside the ``with`` block."""
    extra = tuple(Path(f).resolve() for f in folders if f)
    token = _near.set(extra + _near.get())
    try:
        yield
    finally:
        _near.reset(token)


def dag_file_folder(context: Any) -> Path | None:
    """The folder of the DAG file the task's DAG was parsed from (None when unknown)."""
    dag = context.get("dag") if context else None
    fileloc = getattr(dag, "fileloc", None)
    return Path(fileloc).resolve().parent if fileloc else None
