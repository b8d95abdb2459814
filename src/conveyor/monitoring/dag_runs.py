"""The Airflow state of a workflow's runs (``queued``, ``running``, ``success``, ``failed``), for the
health page: a run's progress in the ledger says nothing about a run that failed before its items
moved ("0 of 480 done, 0 in review").

Read from Airflow's metadata database, which the API server (where the health routes run) reaches
through Airflow's own ORM session; the workflow is the DAG id. Anywhere else (no metadata DB, a run
the ledger knows but Airflow does not) the state is simply unknown: the page shows none.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


def run_states(dag_id: str, run_ids: Sequence[str]) -> dict[str, str]:
    """Run id -> its DagRun state, for the runs of ``dag_id`` Airflow knows (one indexed query)."""
    if not run_ids:
        return {}
    try:
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            rows = session.execute(
                select(DagRun.run_id, DagRun.state).where(DagRun.dag_id == dag_id, DagRun.run_id.in_(list(run_ids)))
            ).all()
    except Exception as exc:  # no metadata DB here: the states are unknown, the numbers still show
        log.debug("no DagRun states for %s: %s", dag_id, exc)
        return {}
    return {run_id: str(state.value if hasattr(state, "value") else state) for run_id, state in rows if state}


def with_states(dag_id: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``runs`` (``metrics.run_progress`` rows), each with its ``state`` (None when unknown)."""
    states = run_states(dag_id, [r["run_id"] for r in runs])
    for run in runs:
        run["state"] = states.get(run["run_id"])
    return runs
