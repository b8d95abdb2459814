"""inspection_notes: field inspection notes summarized with a risk label for site managers, daily.

    extract ─ validate ─ review_inputs ─ summarize ─ review_summaries ─ publish
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from conveyor import (
    AIStepOperator,
    HumanReviewSensor,
    PublishOperator,
    Recovery,
    SnapshotExtractOperator,
    ValidationGateOperator,
    default_args,
    recovery,
)
from conveyor_examples.inspection_notes import INSPECTIONS, SUMMARIZE

PERSON = recovery(Recovery.MANUAL_INTERVENTION, why="a person decides; after the timeout the run goes on without")

with DAG(
    dag_id="inspection_notes", schedule="0 7 * * *", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False, max_active_runs=1, default_args=default_args(), tags=["conveyor", "safety"], doc_md=__doc__,
    params={"extract_path": Param(None, type=["null", "string"], description="this run's notes file")},
) as dag:
    extract = SnapshotExtractOperator(
        task_id="extract", workflow=INSPECTIONS,
        source="{{ params.extract_path or var.value.get('conveyor_inspection_notes', 'feeds/inspection_notes.csv') }}",
        doc_md=recovery(Recovery.RETRY, why="a file still being written shows up on the next try"),
    )
    validate = ValidationGateOperator(
        task_id="validate", workflow=INSPECTIONS, suite="inspection_notes", max_exception_rate=0.2,
        source="{{ ti.xcom_pull(task_ids='extract') }}", max_age=3,
        doc_md=recovery(Recovery.MANUAL_INTERVENTION, Recovery.RETRY,
                        why="bad data fails at once and is fixed in the feed, bad rows by a person; a ledger "
                            "outage is retried"),
    )
    review_inputs = HumanReviewSensor(task_id="review_inputs", workflow=INSPECTIONS, escalation="proceed",
                                      timeout=int(timedelta(hours=1).total_seconds()), doc_md=PERSON)
    summarize = AIStepOperator(task_id="summarize", workflow=INSPECTIONS, ai_task=SUMMARIZE, min_confidence=0.7,
                               spot_check=0.1, max_error_rate=0.1,  # risk labels checked at random, measured
                               model="{{ var.value.get('conveyor_inspection_model', 'local') }}")
    review_summaries = HumanReviewSensor(task_id="review_summaries", workflow=INSPECTIONS, escalation="proceed",
                                         timeout=int(timedelta(hours=2).total_seconds()), doc_md=PERSON)
    publish = PublishOperator(
        task_id="publish", workflow=INSPECTIONS, from_status="summarized",
        templates=["conveyor_examples/inspection_report.md.j2"], title="Inspections {{ dag_run.run_after | ds }}",
        recipients=["site-managers@example.com"], required_fields=["ai_result.summary"],
        doc_md=recovery(Recovery.RETRY, why="the outbox record publishes once; a blank report fails instead"),
    )
    extract >> validate >> review_inputs >> summarize >> review_summaries >> publish
