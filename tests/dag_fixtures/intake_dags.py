"""DAGs the intake tests run with dag.test(): an inbox taken in, and an extract snapshotted then gated.

Both point at any location through their params (a URL, an absolute path, or a path under the
storage base), so one DAG serves file:// and s3:// alike. Failures are recorded by the gate
DAGs' stand-in notifier (``CONVEYOR_TEST_ALERTS``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from conveyor.gate.operators import ValidationGateOperator
from conveyor.intake.operators import InboxIntakeOperator, SnapshotExtractOperator
from tests.dag_fixtures.gate_dags import record_alert

START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    "conveyor_intake_inbox",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    params={"inbox_path": Param("inbox", type="string")},
    default_args={"retries": 0, "on_failure_callback": record_alert},
) as inbox_dag:
    InboxIntakeOperator(task_id="intake", workflow="invoice_processing", inbox_path="{{ params.inbox_path }}")

with DAG(
    "conveyor_intake_extract",
    schedule=None,
    start_date=START,
    catchup=False,
    tags=["conveyor-tests"],
    params={"extract_path": Param("extract.csv", type="string")},
    # Retries are configured: a missing feed must fail at once, not use them.
    default_args={"retries": 2, "retry_delay": timedelta(seconds=0), "on_failure_callback": record_alert},
) as extract_dag:
    snapshot = SnapshotExtractOperator(
        task_id="snapshot", workflow="supplier_exceptions", source="{{ params.extract_path }}"
    )
    snapshot >> ValidationGateOperator(
        task_id="gate",
        workflow="supplier_exceptions",
        suite="supplier_exceptions",
        source="{{ ti.xcom_pull(task_ids='snapshot') }}",
        max_age=30,
        as_of="2026-11-30T06:00:00+00:00",
    )
