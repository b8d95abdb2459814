"""run_dag_test: the one way the quickstart and the suite start a bundled run in process, and the
answered sign-off that Airflow 3.3.2's dag.test() leaves waiting (conveyor.quickstart.dag_test)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from conveyor.quickstart.dag_test import AnsweredPromptsResumed, run_dag_test
from tests.support.postgres import REPO


def answer_as_dag_test_loses_it(dag_id: str, task_id: str, stop: threading.Event) -> list[str]:
    """Wait for ``task_id`` to park, then leave it as dag.test()'s late write does: answered
    ("Approve", by the director), still in ``awaiting_input``. Returns what it saw."""
    from airflow.models.hitl import HITLDetail
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    seen: list[str] = []
    while not stop.wait(0.2):
        with create_session() as session:
            ti = session.scalars(
                select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id)
                .order_by(TaskInstance.start_date.desc()).with_for_update(of=TaskInstance)
            ).first()
            if ti is None or ti.state != TaskInstanceState.AWAITING_INPUT:
                continue
            detail = session.scalars(select(HITLDetail).where(HITLDetail.ti_id == ti.id)).one()
            detail.chosen_options = ["Approve"]
            detail.params_input = {}
            detail.responded_by = {"id": "admin", "name": "admin"}
            detail.responded_at = datetime.now(UTC)
            seen.append(f"{ti.task_id} answered, left {ti.state}")
            return seen
    return seen


@pytest.mark.timeout(300, method="thread")  # a lost answer hangs dag.test(): end the worker, not the suite
def test_a_sign_off_answered_as_dag_test_overwrites_it_is_resumed_with_the_answer(airflow_db, ledger) -> None:
    from tests.dag_fixtures.signoff_dags import signoff_dag

    stop = threading.Event()
    seen: list[str] = []
    director = threading.Thread(target=lambda: seen.extend(
        answer_as_dag_test_loses_it(signoff_dag.dag_id, "director_signoff", stop)), daemon=True)
    director.start()
    try:
        run = run_dag_test(signoff_dag, datetime.now(UTC).replace(microsecond=0), {"drafts": ["Truck late."]})
    finally:
        stop.set()
        director.join(timeout=10)

    assert seen == ["director_signoff answered, left awaiting_input"]
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert run.state == "success", states
    assert states["director_signoff"] == states["publish_report"] == "success"
    assert ledger.count_by_status(workflow="supplier_exceptions", run_id=run.run_id) == {"published": 1}


def test_nothing_is_resumed_while_no_prompt_was_answered(airflow_db) -> None:
    from tests.dag_fixtures.signoff_dags import signoff_dag

    resumer = AnsweredPromptsResumed(signoff_dag.dag_id, "manual__never-run")
    assert resumer.resume_answered() == [] and resumer.resumed == []


#: A fresh interpreter that starts the resumer looking without pause while the main thread builds and
#: runs a DAG: every Airflow model is imported, and its mappers configured, while the resumer queries.
FRESH_RUN = """
from datetime import UTC, datetime
from conveyor.quickstart.dag_test import AnsweredPromptsResumed, manual_run_id

when = datetime.now(UTC).replace(microsecond=0)
resumer = AnsweredPromptsResumed("conveyor_smoke", manual_run_id(when), interval=0.0)
resumer.start()
from tests.dag_fixtures.smoke_dags import smoke_dag

run = smoke_dag.test(logical_date=when, run_after=when)
resumer.stop()
print(run.state)
"""


def test_the_resumer_never_deadlocks_with_a_first_dag_test_in_its_interpreter(airflow_db, ledger) -> None:
    # Seen under load: the resumer's first query configured SQLAlchemy's mappers (holding its lock)
    # and waited for a model module the main thread was importing, which waited for that lock.
    # Without orm_ready() this run deadlocked 3 times out of 3.
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FRESH_RUN], cwd=REPO, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "success"
