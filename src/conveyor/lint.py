"""``conveyor lint``: every task of every DAG in a folder declares its recovery strategy."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from conveyor.recovery_doc import declared


@dataclass(frozen=True)
class Finding:
    """One problem: a DAG file that does not import, or a task without a recovery strategy."""

    path: str
    dag_id: str | None
    task_id: str | None
    message: str

    def __str__(self) -> str:
        where = ".".join(p for p in (self.dag_id, self.task_id) if p) or "-"
        return f"{self.path}: {where}: {self.message}"


def lint_dags(path: str | Path) -> tuple[int, list[Finding]]:
    """Parse every DAG under ``path``; return (tasks checked, findings)."""
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag

    folder = Path(path).resolve()
    if not folder.exists():
        raise ValueError(f"no such file or folder: {folder}")
    # As Airflow's DAG bundle does: the folder is on sys.path, so the DAGs' own modules import.
    root = str(folder if folder.is_dir() else folder.parent)
    if root not in sys.path:
        sys.path.append(root)
    # Airflow logs while it parses; keep stdout for the report (--json must stay parseable).
    with contextlib.redirect_stdout(sys.stderr):
        bag = DagBag(dag_folder=str(folder))
    findings = [
        Finding(file, None, None, f"does not import: {error.strip().splitlines()[-1]}")
        for file, error in sorted(bag.import_errors.items())
    ]
    checked = 0
    for dag_id, dag in sorted(bag.dags.items()):
        for task in dag.tasks:
            checked += 1
            if not declared(task.doc_md):
                findings.append(
                    Finding(
                        str(dag.fileloc), dag_id, task.task_id,
                        "no recovery strategy: add doc_md=recovery(Recovery.<STRATEGY>, why=...) "
                        "(retry, circuit breaker, alternative path, graceful degradation, manual intervention)",
                    )
                )
    return checked, findings
