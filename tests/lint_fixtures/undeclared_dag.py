"""A DAG for the lint test: one task declares a recovery strategy, one does not."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from conveyor.recovery_doc import Recovery, recovery

with DAG("lint_fixture", schedule=None, start_date=pendulum.datetime(2026, 1, 1)):
    EmptyOperator(task_id="declared", doc_md=recovery(Recovery.RETRY, why="a flaky feed"))
    EmptyOperator(task_id="undeclared", doc_md="Does something, recovers somehow.")
